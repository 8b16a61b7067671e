#!/usr/bin/env bash
# What `grad!` blocks cost to compile, against the same code written as
# hand-written `g_*` calls.
#
# Generates two user crates of N small model functions each (default 200),
# depending on this checkout's grad-runtime by path, in one scratch
# workspace (so both share the dependencies' build):
#   blocks: each function one `grad!` block with declared shapes,
#           `let h = tanh(x @ w * s + b); let p = softmax(h, -1);
#            mean(sigmoid(p) * h - relu(h) / 2.0)`
#           (two fused regions, a product, a softmax);
#   calls:  the same functions as `g_*` calls.
# `main` calls every function, so none is left out of code generation.
#
# For each profile (debug, release) it builds the dependencies, then times
# for each crate a clean build of the crate alone (`cargo clean -p`) and a
# rebuild after an edit of main.rs (a constant appended), and reports the
# binary's size and the ratios. Runs both release binaries once, so the two crates
# are checked to compute the same loss.
#
# usage: benches/compile_time.sh [N] [--profile debug|release|both] [--keep DIR]
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
n=200
profiles="debug release"
keep=""
while [ $# -gt 0 ]; do
    case "$1" in
        --profile) profiles="${2/both/debug release}"; shift 2 ;;
        --keep) keep="$2"; shift 2 ;;
        [0-9]*) n="$1"; shift ;;
        *) echo "usage: $0 [N] [--profile debug|release|both] [--keep DIR]" >&2; exit 2 ;;
    esac
done

if [ -n "$keep" ]; then
    dir="$keep"
    mkdir -p "$dir"
else
    dir="$(mktemp -d)"
    trap 'rm -rf "$dir"' EXIT
fi

# --- the generated workspace ------------------------------------------------
cat >"$dir/Cargo.toml" <<EOF
[workspace]
members = ["blocks", "calls"]
resolver = "3"

[workspace.dependencies]
grad-runtime = { path = "$repo/grad-runtime" }
EOF

for crate in blocks calls; do
    mkdir -p "$dir/$crate/src"
    cat >"$dir/$crate/Cargo.toml" <<EOF
[package]
name = "$crate"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
grad-runtime.workspace = true
EOF
done

# The functions. Model k scales its product by s = 1 + k / N, so no two
# functions are the same code after constant folding.
gen() {
    local crate="$1" f="$dir/$1/src/main.rs"
    {
        echo "use grad_runtime::ndarray::{ArrayD, Dimension};"
        echo "use grad_runtime::{Tape, Var};"
        [ "$crate" = calls ] && echo "use grad_runtime::{g_add, g_matmul, g_mean, g_mul, g_muls, g_relu, g_sigmoid, g_softmax, g_sub, g_tanh};"
        [ "$crate" = blocks ] && echo "use grad_runtime::grad;"
        echo
        for k in $(seq 0 $((n - 1))); do
            echo "fn model_$k(tape: &mut Tape<f32>, x: Var, w: Var, b: Var, s: f32) -> Var {"
            if [ "$crate" = blocks ]; then
                echo "    grad!(tape; x: [B, 16], w: [16, 8], b: [8];"
                echo "        let h = tanh(x @ w * s + b); let p = softmax(h, -1); mean(sigmoid(p) * h - relu(h) / 2.0))"
            else
                echo "    let xw = g_matmul(tape, x, w);"
                echo "    let xws = g_muls(tape, xw, s);"
                echo "    let z = g_add(tape, xws, b);"
                echo "    let h = g_tanh(tape, z);"
                echo "    let p = g_softmax(tape, h, -1);"
                echo "    let sp = g_sigmoid(tape, p);"
                echo "    let sph = g_mul(tape, sp, h);"
                echo "    let r = g_relu(tape, h);"
                echo "    let r2 = g_muls(tape, r, 0.5);"
                echo "    let d = g_sub(tape, sph, r2);"
                echo "    g_mean(tape, d)"
            fi
            echo "}"
            echo
        done
        echo "fn main() {"
        echo "    let mut tape = Tape::<f32>::new();"
        echo "    let init = |shape: &[usize], k: usize| ArrayD::from_shape_fn(shape, |i| ((i.as_array_view().sum() + k) % 7) as f32 / 7.0 - 0.4);"
        echo "    let x = tape.constant(init(&[4, 16], 1));"
        echo "    let w = tape.param(init(&[16, 8], 2));"
        echo "    let b = tape.param(init(&[8], 3));"
        echo "    let mut total = 0.0f64;"
        for k in $(seq 0 $((n - 1))); do
            echo "    let loss = model_$k(&mut tape, x, w, b, 1.0 + $k.0 / $n.0);"
            echo "    tape.backward(loss).expect(\"backward\");"
            echo "    total += tape.scalar(loss) as f64;"
        done
        echo "    println!(\"loss sum {total:.6} over $n models, grad(b)[0] {:.6}\", tape.grad(b)[0]);"
        echo "}"
    } >"$f"
}
gen blocks
gen calls

# --- timing -----------------------------------------------------------------
export CARGO_TARGET_DIR="$dir/target"
cd "$dir"

seconds() { # seconds a command takes, to 0.1 s
    local start end
    start=$(date +%s.%N)
    "$@" >"$dir/last.log" 2>&1 || { cat "$dir/last.log" >&2; return 1; }
    end=$(date +%s.%N)
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
mib() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.1f", b / 1048576 }'; }

echo "compile time of $n grad! blocks against $n functions of g_* calls"
echo "grad at $(git -C "$repo" rev-parse --short HEAD)$(git -C "$repo" diff --quiet || echo ' (with uncommitted changes)')"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $(rustc --version)"
echo
printf '| %-8s | %-30s | %12s | %12s | %6s |\n' profile measure "grad! blocks" "g_* calls" ratio
printf '|%s|%s|%s|%s|%s|\n' ---------- -------------------------------- -------------- -------------- --------
for profile in $profiles; do
    flag=""
    [ "$profile" = release ] && flag="--release"
    dirname=debug
    [ "$profile" = release ] && dirname=release
    # The dependencies, once for both crates.
    cargo build $flag -p calls >"$dir/last.log" 2>&1 || { cat "$dir/last.log" >&2; exit 1; }
    declare -A clean rebuild size
    for crate in blocks calls; do
        cargo clean $flag -p "$crate" >/dev/null 2>&1
        clean[$crate]=$(seconds cargo build $flag -p "$crate")
        echo "const EDITED_${profile^^}: u32 = $RANDOM;" >>"$crate/src/main.rs"
        rebuild[$crate]=$(seconds cargo build $flag -p "$crate")
        size[$crate]=$(mib "target/$dirname/$crate")
    done
    printf '| %-8s | %-30s | %10s s | %10s s | %6s |\n' "$profile" "build of the crate alone" "${clean[blocks]}" "${clean[calls]}" "$(ratio "${clean[blocks]}" "${clean[calls]}")"
    printf '| %-8s | %-30s | %10s s | %10s s | %6s |\n' "$profile" "rebuild after an edit of main" "${rebuild[blocks]}" "${rebuild[calls]}" "$(ratio "${rebuild[blocks]}" "${rebuild[calls]}")"
    printf '| %-8s | %-30s | %8s MiB | %8s MiB | %6s |\n' "$profile" "binary size" "${size[blocks]}" "${size[calls]}" "$(ratio "${size[blocks]}" "${size[calls]}")"
    if [ "$profile" = release ]; then
        runs="$("target/$dirname/blocks") | $("target/$dirname/calls")"
    fi
done
echo
[ -n "${runs:-}" ] && echo "release runs (blocks | calls): $runs"
exit 0
