//! Random elementwise expressions, fused and not: a seeded generator over
//! the grammar of regions (`+ - * /`, unary `-`, every elementwise
//! built-in, numbers and a Rust scalar on either side, broadcast inputs,
//! a folded `sum`/`mean`, an axis sum as a region boundary) writes
//! `cases.rs`, where each expression is a `grad!` block and its
//! `#[nofuse]` twin (one `g_*` call per op, the reference). On f32 and f64
//! tapes:
//!
//! - values are the same bits, always;
//! - gradients are the same bits when every input is read once;
//! - with an input read more than once, its contributions are summed in
//!   the kernel before they reach its gradient, which can round
//!   differently: the difference is measured here and bounded by
//!   [`FANOUT_BOUND`] ulps of the largest gradient element of the input
//!   (the grad! manual states the bound).
//!
//! Each case runs on inputs of mixed shapes (broadcast, interpreted) and
//! on inputs of one shape, `[3, 4]`, where every region that is not
//! folded runs the kernel `grad!` compiled for it: there, values and
//! every gradient are also the bits of the same case on those inputs
//! repeated eight times (`[8, 3, 4]`, too large for a kernel: the
//! interpreter).
//!
//! `GRAD_BLESS=1 cargo test --test fused_random` rewrites `cases.rs` after
//! a change to the generator (if the old file no longer compiles, first
//! replace it by an empty `CASES` and a `run` that panics).

#[path = "../common/mod.rs"]
mod common;

#[rustfmt::skip] // written by `generate`, compared with it as text
mod cases;

use grad_runtime::{Float, Tape};
use ndarray::ArrayD;

use common::Rng;

/// How many expressions `cases.rs` holds.
const COUNT: usize = 120;

/// The largest difference allowed between a fused and an unfused gradient
/// of an input read more than once, in ulps of the input's largest
/// gradient element (see the module docs). Measured: 0.51 on f32 and
/// f64, one rounding where a region's contributions and another node's
/// are added in a different order (5.4 ulps of the element itself where
/// they cancel); `FUSED_DEBUG=1` prints each difference.
const FANOUT_BOUND: f64 = 4.0;

// ---- the generator ----

/// Writes one expression of depth at most `depth`.
struct Generator {
    rng: Rng,
    /// How often each tensor input (x, y, z, w) is read.
    uses: [usize; 4],
}

impl Generator {
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.rng.uniform() * items.len() as f64) as usize % items.len()]
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.uniform() < p
    }

    /// A leaf: a tensor input most of the time, else a number or the Rust scalar `s`.
    fn leaf(&mut self) -> String {
        if self.chance(0.75) {
            self.tensor_leaf()
        } else {
            self.pick(&["0.5", "2", "1.5", "-0.25", "3.0", "s"]).to_string()
        }
    }

    fn tensor_leaf(&mut self) -> String {
        let name = self.pick(&["x", "x", "y", "z", "w", "c"]);
        if let Some(k) = ["x", "y", "z", "w"].iter().position(|n| *n == name) {
            self.uses[k] += 1;
        }
        name.to_string()
    }

    /// An expression that reads a tensor, for a built-in's argument.
    fn tensor(&mut self, depth: usize) -> String {
        let e = self.expr(depth);
        let reads_tensor =
            e.split(|c: char| !c.is_alphanumeric() && c != '_').any(|w| "xyzwc".contains(w) && w.len() == 1);
        if reads_tensor { e } else { self.tensor_leaf() }
    }

    fn expr(&mut self, depth: usize) -> String {
        if depth == 0 || self.chance(0.2) {
            return self.leaf();
        }
        let d = depth - 1;
        match (self.rng.uniform() * 14.0) as usize {
            0..=3 => {
                let op = self.pick(&["+", "-", "*", "*"]);
                format!("({} {op} {})", self.expr(d), self.expr(d))
            }
            4 => format!("({} / (abs({}) + 0.5))", self.expr(d), self.tensor(d)),
            5 => format!("-{}", self.operand(d)),
            6 | 7 => {
                let f = self.pick(&["relu", "sigmoid", "tanh", "abs", "gelu", "silu", "softplus"]);
                format!("{f}({})", self.tensor(d))
            }
            8 => format!("exp(clamp({}, -4, 4))", self.tensor(d)),
            9 => {
                let f = self.pick(&["log(abs({}) + 0.5)", "sqrt(abs({}) + 0.25)", "pow(abs({}) + 0.5, -1.5)"]);
                f.replace("{}", &self.tensor(d))
            }
            10 => format!("pow({}, {})", self.tensor(d), self.pick(&["2", "3"])),
            11 => format!("leaky_relu({}, {})", self.tensor(d), self.pick(&["0.1", "s"])),
            12 => format!("clamp({}, -1, {})", self.tensor(d), self.pick(&["1", "s"])),
            _ => {
                self.uses[0] += 1;
                format!("sum(x * {}, -1, true)", self.operand(d))
            }
        }
    }

    /// An expression as the operand of a prefix operator or a product.
    fn operand(&mut self, depth: usize) -> String {
        let e = self.expr(depth);
        if e.starts_with('(') || !e.contains(' ') { e } else { format!("({e})") }
    }

    /// A whole case: an op at the root (maybe folded), reading a tensor.
    fn case(&mut self) -> (String, bool) {
        loop {
            self.uses = [0; 4];
            let e = self.tensor(4);
            let is_op = e.contains('(') || e.starts_with('-');
            if !is_op || self.uses.iter().sum::<usize>() == 0 {
                continue;
            }
            let e = match (self.rng.uniform() * 8.0) as usize {
                0 => format!("sum({e})"),
                1 => format!("mean({e})"),
                _ => e,
            };
            return (e, self.uses.iter().any(|&n| n > 1));
        }
    }
}

/// The source of `cases.rs`.
fn generate() -> String {
    let mut generator = Generator { rng: Rng::new(0xF05E), uses: [0; 4] };
    let cases: Vec<(String, bool)> = (0..COUNT).map(|_| generator.case()).collect();
    let mut out = String::from(
        "// Written by the generator in main.rs (`GRAD_BLESS=1 cargo test --test fused_random`): do not edit.\n\n\
         use grad_runtime::{Float, Tape, Var, grad};\n\n\
         /// Each expression, and whether it reads a tensor input more than once.\n\
         pub const CASES: &[(&str, bool)] = &[\n",
    );
    for (e, fanout) in &cases {
        out.push_str(&format!("    ({e:?}, {fanout}),\n"));
    }
    out.push_str(
        "];\n\n\
         /// Case `k` on the inputs `x, y, z, w` (parameters) and `c` (a\n\
         /// constant), with the Rust scalar `s`: fused, or under `#[nofuse]`.\n\
         pub fn run<T: Float>(k: usize, fuse: bool, tp: &mut Tape<T>, [x, y, z, w, c]: [Var; 5], s: T) -> Var {\n    \
         match (k, fuse) {\n",
    );
    for (k, (e, _)) in cases.iter().enumerate() {
        out.push_str(&format!("        ({k}, true) => grad!(tp; {e}),\n"));
        out.push_str(&format!("        ({k}, false) => grad!(#[nofuse] tp; {e}),\n"));
    }
    out.push_str("        _ => panic!(\"no case {k}\"),\n    }\n}\n");
    out
}

#[test]
fn the_cases_are_the_generators() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fused_random/cases.rs");
    let generated = generate();
    if std::env::var_os("GRAD_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(path, &generated).expect("cases.rs is writable");
        return;
    }
    let current = std::fs::read_to_string(path).unwrap_or_default();
    assert!(current == generated, "cases.rs is out of date: rerun with GRAD_BLESS=1");
}

// ---- the comparison ----

/// Distance in ulps between two floats of `T` (0 for two NaNs).
fn ulps<T: Float>(a: T, b: T) -> f64 {
    if a.is_nan() && b.is_nan() {
        return 0.0;
    }
    if a == b {
        return 0.0;
    }
    let (a, b) = (a.to_f64(), b.to_f64());
    let eps = T::epsilon().to_f64();
    (a - b).abs() / (eps * a.abs().max(b.abs()).max(T::min_positive_value().to_f64()))
}

/// The shapes of a case's inputs `x, y, z, w, c`.
#[derive(Clone, Copy, PartialEq)]
enum Shapes {
    /// `[3, 4], [4], [3, 1], [], [3, 4]`: broadcast inside regions.
    Mixed,
    /// All `[3, 4]`: regions small enough for their kernels.
    Flat,
    /// `Flat`'s inputs (and seed) repeated along a new first axis of 8.
    Tiled,
}

const TILES: usize = 8;

/// The values and gradients of case `k` on one tape.
fn run<T: Float>(k: usize, fuse: bool, shapes: Shapes) -> (ArrayD<T>, Vec<ArrayD<T>>) {
    let mut rng = Rng::new(1000 + k as u64);
    let tile = |a: ArrayD<f64>| match shapes {
        Shapes::Tiled => ndarray::concatenate(ndarray::Axis(0), &vec![a.view().insert_axis(ndarray::Axis(0)); TILES])
            .expect("tiles of one shape"),
        _ => a,
    };
    let mut data = |shape: &[usize]| {
        let shape = if shapes == Shapes::Mixed { shape } else { &[3, 4] };
        tile(rng.normal_array(shape)).mapv(T::from_f64)
    };
    let mut tape = Tape::<T>::new();
    let (x, y, z, w) = (data(&[3, 4]), data(&[4]), data(&[3, 1]), data(&[]));
    let c = data(&[3, 4]);
    let s = T::from_f64(0.75);
    let inputs = [tape.param(&x), tape.param(&y), tape.param(&z), tape.param(&w), tape.constant(&c)];
    let out = cases::run(k, fuse, &mut tape, inputs, s);
    assert!(tape.is_ok(), "case {k}: {}", tape.error().unwrap());
    let value = tape.value(out).to_owned();
    let mut seed_rng = Rng::new(2000 + k as u64);
    // A folded case's value is one number however its inputs are tiled.
    let seed = match value.shape() {
        [_, tile_shape @ ..] if shapes == Shapes::Tiled => tile(seed_rng.normal_array(tile_shape)),
        shape => seed_rng.normal_array(shape),
    }
    .mapv(T::from_f64);
    tape.backward_with(out, &seed).unwrap();
    (value, inputs[..4].iter().map(|&v| tape.grad(v).to_owned()).collect())
}

/// The largest gradient difference over the cases that read an input
/// more than once, in ulps of each input's largest gradient element.
fn compare<T: Float>(shapes: Shapes) -> (f64, usize) {
    let (mut worst, mut differing) = (0.0f64, 0);
    for (k, &(source, fanout)) in cases::CASES.iter().enumerate() {
        let (value, grads) = run::<T>(k, true, shapes);
        let (want_value, want_grads) = run::<T>(k, false, shapes);
        let same = |a: &ArrayD<T>, b: &ArrayD<T>| a.iter().zip(b).all(|(a, b)| ulps(*a, *b) == 0.0);
        assert!(same(&value, &want_value), "case {k} `{source}`: the values differ");
        for (input, (g, want)) in grads.iter().zip(&want_grads).enumerate() {
            if !fanout {
                assert!(same(g, want), "case {k} `{source}`: the gradient of input {input} differs");
                continue;
            }
            let scale = want.iter().fold(T::min_positive_value(), |m, v| m.max(v.abs()));
            for (a, b) in g.iter().zip(want) {
                let apart = ulps(*a, *b) * a.abs().max(b.abs()).to_f64() / scale.to_f64();
                if apart > 0.0 && std::env::var_os("FUSED_DEBUG").is_some() {
                    println!(
                        "case {k} input {input}: {a:?} vs {b:?}: {:.2} ulps, {apart:.2} scaled: {source}",
                        ulps(*a, *b)
                    );
                }
                differing += usize::from(apart > 0.0);
                worst = worst.max(apart);
            }
        }
    }
    (worst, differing)
}

#[test]
fn fused_values_are_the_unfused_bits_and_gradients_are_within_the_bound() {
    for shapes in [Shapes::Mixed, Shapes::Flat] {
        for (name, (worst, differing)) in [("f32", compare::<f32>(shapes)), ("f64", compare::<f64>(shapes))] {
            let fanout = cases::CASES.iter().filter(|c| c.1).count();
            println!(
                "{name}, {}: {} cases ({fanout} reading an input twice or more): {differing} gradient elements \
                 differ, by at most {worst:.2} ulps of their input's largest gradient",
                if shapes == Shapes::Mixed { "mixed shapes" } else { "one shape" },
                cases::CASES.len()
            );
            assert!(worst <= FANOUT_BOUND, "{name}: {worst} ulps");
        }
    }
}

/// Every case whose value is elementwise, on `[3, 4]` inputs (its
/// regions run their kernels) and on those inputs tiled (interpreted):
/// the first tile's values and gradients are the same bits, inputs read
/// several times included. Returns how many cases were compared.
fn kernels_against_the_interpreter<T: Float>() -> usize {
    let mut compared = 0;
    for (k, &(source, _)) in cases::CASES.iter().enumerate() {
        let (value, grads) = run::<T>(k, true, Shapes::Flat);
        let (tiled, tiled_grads) = run::<T>(k, true, Shapes::Tiled);
        // A folded `sum` or `mean` adds up every tile.
        if tiled.ndim() != value.ndim() + 1 {
            continue;
        }
        compared += 1;
        let same = |a: &ArrayD<T>, tiled: &ArrayD<T>| {
            let first = tiled.index_axis(ndarray::Axis(0), 0);
            a.shape() == first.shape() && a.iter().zip(first).all(|(a, b)| ulps(*a, *b) == 0.0)
        };
        assert!(same(&value, &tiled), "case {k} `{source}`: the values differ");
        for (input, (g, tiled_g)) in grads.iter().zip(&tiled_grads).enumerate() {
            assert!(same(g, tiled_g), "case {k} `{source}`: the gradient of input {input} differs");
        }
    }
    compared
}

#[test]
fn kernels_give_the_interpreters_bits() {
    // `grad!` compiles kernels without debug assertions only (this
    // package's profile turns them off for its tests).
    if cfg!(debug_assertions) {
        panic!("built with debug assertions: every region is interpreted, no kernel is compared");
    }
    for (name, compared) in
        [("f32", kernels_against_the_interpreter::<f32>()), ("f64", kernels_against_the_interpreter::<f64>())]
    {
        println!("{name}: {compared} cases compared");
        assert!(compared >= cases::CASES.len() / 2, "{name}: only {compared} cases are elementwise");
    }
}

/// The same at each narrower SIMD level (`GRAD_SIMD`, chosen once per
/// process, so in a child process each): the kernel's version compiled
/// for AVX2 (an x86-64 CPU without AVX-512 runs it), and at the baseline,
/// where no version runs and every region is interpreted.
#[test]
fn kernels_give_the_interpreters_bits_at_every_level() {
    for level in ["avx2", "baseline"] {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "kernels_give_the_interpreters_bits", "--test-threads", "1"])
            .env("GRAD_SIMD", level)
            .output()
            .expect("the test binary runs itself");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "GRAD_SIMD={level}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
        assert!(stdout.contains("1 passed"), "GRAD_SIMD={level}: the comparison did not run: {stdout}");
    }
}
