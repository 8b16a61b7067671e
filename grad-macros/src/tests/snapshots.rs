//! Expansion snapshots: each case's expansion, pretty-printed with
//! prettyplease, is compared with `tests/snapshots/<name>.rs`. A mismatch
//! prints a line diff; `GRAD_BLESS=1 cargo test -p grad-macros` rewrites
//! the files (then review them with `git diff`).

use std::fs;
use std::path::PathBuf;

use super::run;

/// Representative inputs: each feature of the language at least once.
pub(super) const CASES: &[(&str, &str)] = &[
    ("mlp", "tape; let y = relu(x @ w + b); mse(y, t)"),
    ("precedence", "tape; a + b * c @ d - -e / f - g"),
    ("literals", "tape; (2.0 * x + 1, x - 0.5, 1.0 - x, 2.0 / x, x / 2, -3.0 * x, x * 1e-3f32)"),
    ("ambiguous_operands", "tape; lr * x + bias - cfg.shift / 2.0"),
    ("scalar_lets", "tape; let s = 0.5 * 2.0; let h = -s + x; (h, sum(h))"),
    ("user_layer", "tp; let h = linear(x, w, b); layers::norm(h, 3)"),
    ("borrowed_tape", "&mut self.tape; tanh(self.x)"),
    ("arguments", "tape; (softmax(x, -1), concat(a, b, 1), slice(x, [0, 0], [2, 3]), sum(x, 0, true), mean(x, -1))"),
    ("method_form", "tape; x.relu().softmax(-1).sum()"),
    ("declared_shapes", "tape; x: [B, T, D], w: [D, E], b: [E]; let y = x @ w + b; reshape(y, [B * T, E])"),
    (
        "size_arithmetic",
        "tape; x: [B, T, C]; (reshape(x, [B, T, h, C / h]), slice(x, [0, 1, 0], [B, T, C - 1]), reshape(x, [B, (T + T) * C / 2]))",
    ),
    (
        "declared_indices",
        "tape; wte: [V, C], tokens: [B, T], targets: [B, T]; cross_entropy(embedding(wte, &tokens) @ transpose(wte), targets)",
    ),
    ("pass_through", "tape; logits: [N, 10]; cross_entropy(log_softmax(logits, -1), &targets)"),
    ("layers", "tape; layer_norm(dropout(x, 0.1, &mut rng, train), gamma, beta, 1e-5)"),
    ("rust_block", "tape; x * { 1.0 / n as f32 } + { offsets[3] }"),
    ("errors", "tape; x: [B, 3], w: [4, 2], b: [5]; let a = x @ w; (a + b, softmax(x, 2), relu(2.0))"),
    // Fused regions: W2's chain, W5's folded sum (`x` read twice), every
    // elementwise built-in with its parameters, a region whose leaves are
    // a `let` name, a product and a user's call, and the fusion boundaries.
    ("fused_chain", "tape; tanh(x * 0.9 + 0.1)"),
    ("fused_sum", "tape; sum(sigmoid(x) * x)"),
    (
        "fused_builtins",
        "tape; (pow(x, 3) * leaky_relu(x, slope) + clamp(x, -1, hi), \
         mean(gelu(x) - silu(x) / softplus(x) + exp(log(sqrt(abs(x))))) , relu(tanh(-x)))",
    ),
    ("fused_leaves", "tape; let h = x @ w; sigmoid(h + b) * linear(h, w) - h / 2"),
    ("fused_boundaries", "tape; let h = relu(x + b); let s = sum(h); (h * s, exp(s) + 1)"),
    // The same inputs under `#[nofuse]`: one `g_*` call per operation, as
    // before fusion (the snapshots above that fuse have a twin here).
    ("nofuse_mlp", "#[nofuse] tape; let y = relu(x @ w + b); mse(y, t)"),
    ("nofuse_precedence", "#[nofuse] tape; a + b * c @ d - -e / f - g"),
    ("nofuse_literals", "#[nofuse] tape; (2.0 * x + 1, x - 0.5, 1.0 - x, 2.0 / x, x / 2, -3.0 * x, x * 1e-3f32)"),
    ("nofuse_ambiguous_operands", "#[nofuse] tape; lr * x + bias - cfg.shift / 2.0"),
    ("nofuse_rust_block", "#[nofuse] tape; x * { 1.0 / n as f32 } + { offsets[3] }"),
    ("nofuse_chain", "#[nofuse] tape; tanh(x * 0.9 + 0.1)"),
    ("nofuse_sum", "#[nofuse] tape; sum(sigmoid(x) * x)"),
];

fn snapshot_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots")
}

/// The pretty-printed expansion (or error block) of `input`.
fn render(input: &str) -> String {
    let tokens = match run(input) {
        Ok(tokens) => tokens,
        Err(error) => error.to_compile_error(),
    };
    let file: syn::File = syn::parse2(quote::quote!(fn expansion() { #tokens }))
        .unwrap_or_else(|e| panic!("the expansion of `{input}` is not valid Rust: {e}\n{tokens}"));
    format!("// grad!({input})\n\n{}", prettyplease::unparse(&file))
}

#[test]
fn expansions_match_their_snapshots() {
    let bless = std::env::var_os("GRAD_BLESS").is_some_and(|v| v == "1");
    let mut failures = Vec::new();
    for (name, input) in CASES {
        let path = snapshot_dir().join(format!("{name}.rs"));
        let actual = render(input);
        if bless {
            fs::write(&path, &actual).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
            continue;
        }
        let expected = fs::read_to_string(&path).unwrap_or_default();
        if expected != actual {
            failures.push(format!("--- {} (expected)\n+++ actual\n{}", path.display(), diff(&expected, &actual)));
        }
    }
    let known: Vec<String> = CASES.iter().map(|(name, _)| format!("{name}.rs")).collect();
    for entry in fs::read_dir(snapshot_dir()).expect("the snapshot directory exists") {
        let file = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !known.contains(&file) {
            failures.push(format!("{file}: a snapshot without a case; delete it"));
        }
    }
    assert!(failures.is_empty(), "{}\n\nre-bless with GRAD_BLESS=1 if the change is intended", failures.join("\n\n"));
}

/// A line diff (longest common subsequence): ` ` kept, `-` expected only,
/// `+` actual only.
fn diff(expected: &str, actual: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!("  {}\n", a[i]));
            (i, j) = (i + 1, j + 1);
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        }
    }
    out
}

#[test]
fn the_diff_marks_changed_lines() {
    assert_eq!(diff("a\nb\nc", "a\nx\nc"), "  a\n+ x\n- b\n  c\n");
}
