//! `grad!` at run time: the check of declared shapes against the real
//! inputs (once per execution of the block), and the location a failing
//! op reports, which is the DSL sub-expression's, not the macro's, also
//! inside a fused region (whose error is the one its `#[nofuse]` form
//! records).
//!
//! It forbids unsafe code, as a user's crate may: an expansion, its
//! kernels included, has none.

#![forbid(unsafe_code)]

use grad_runtime::{ErrorKind, Float, GradError, Tape, Var, grad};
use ndarray::{Array1, Array2, Array3};

/// The 1-based column of the first `needle` on `line` of this file.
fn column_of(line: u32, needle: &str) -> u32 {
    let text = include_str!("macro_runtime.rs").lines().nth(line as usize - 1).expect("a line of this file");
    text.find(needle).map(|c| c as u32 + 1).unwrap_or_else(|| panic!("`{needle}` not on line {line}: {text}"))
}

/// The gradients of `vars`, each as its elements in order.
fn grads_of<T: Float>(tape: &mut Tape<T>, vars: &[Var]) -> Vec<Vec<T>> {
    vars.iter().map(|&v| tape.grad(v).iter().copied().collect()).collect()
}

fn error_of(tape: &Tape<f32>) -> GradError {
    tape.error().cloned().expect("the tape holds an error")
}

#[test]
fn a_declared_shape_that_the_input_contradicts_poisons_the_tape() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::zeros((64, 783)));
    let w = tape.param(Array2::<f32>::zeros((784, 10)));
    let line = line!() + 1;
    let y = grad!(tape; x: [B, 784], w: [784, 10]; relu(x @ w));

    let err = error_of(&tape);
    assert_eq!(err.op(), "grad!");
    assert_eq!(
        err.kind(),
        &ErrorKind::DeclaredShape {
            input: "x".to_string(),
            declared: "[B, 784] with B = 64".to_string(),
            problem: "dim 1 is 783".to_string(),
        }
    );
    assert_eq!(err.shapes(), &[vec![64, 783]]);
    assert_eq!((err.location().line(), err.location().column()), (line, column_of(line, "x: [B")));
    assert_eq!(err.location().file(), file!());
    let message = err.to_string();
    assert!(
        message
            .starts_with("grad!: input `x` was declared [B, 784] with B = 64, but dim 1 is 783; input [64, 783] (at "),
        "{message}"
    );

    // Poisoned: the block's ops did nothing, and backward reports the declaration.
    assert!(y.is_poisoned());
    assert_eq!(tape.backward(y).unwrap_err(), err);
}

#[test]
fn a_symbol_bound_by_one_input_is_checked_in_the_others() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::zeros((64, 784)));
    let t = tape.constant(Array2::<f32>::zeros((32, 10)));
    let w = tape.param(Array2::<f32>::zeros((784, 10)));
    let line = line!() + 1;
    let _loss = grad!(tape; x: [B, 784], w: [784, 10], t: [B, 10]; mse(x @ w, t));

    let err = error_of(&tape);
    let message = err.to_string();
    assert!(
        message.starts_with(
            "grad!: input `t` was declared [B, 10] with B = 64 (bound by `x`), but dim 0 is 32; input [32, 10]"
        ),
        "{message}"
    );
    assert_eq!(err.location().column(), column_of(line, "t: [B"));
}

#[test]
fn a_wrong_number_of_dims_is_reported() {
    let mut tape = Tape::<f32>::new();
    let b = tape.param(Array1::<f32>::zeros(10));
    let _y = grad!(tape; b: [1, 10]; relu(b));
    let message = error_of(&tape).to_string();
    assert!(message.starts_with("grad!: input `b` was declared [1, 10], but it has 1 dim; input [10]"), "{message}");
}

#[test]
fn symbols_are_bound_afresh_at_every_execution() {
    let mut tape = Tape::<f32>::new();
    let w = tape.param(Array2::<f32>::ones((4, 2)));
    let mark = tape.mark();
    for batch in [64, 32, 1] {
        let x = tape.constant(Array2::<f32>::ones((batch, 4)));
        let t = tape.constant(Array2::<f32>::zeros((batch, 2)));
        let loss =
            grad!(tape; x: [B, 4], w: [4, 2], t: [B, 2]; let y = x @ w; mse(reshape(y, [B * 2]), reshape(t, [B * 2])));
        tape.backward(loss).unwrap_or_else(|e| panic!("batch {batch}: {e}"));
        assert_eq!(tape.scalar(loss), 16.0);
        tape.reset_to(mark);
    }
}

#[test]
fn a_failing_op_reports_the_location_of_its_dsl_sub_expression() {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::zeros((64, 784)));
    let w = tape.param(Array2::<f32>::zeros((783, 10)));
    let b = tape.param(Array1::<f32>::zeros(10));
    let line = line!() + 1;
    let _y = grad!(tape; let h = relu(x + b); sigmoid(h @ w));
    // `x + b` ([64, 784] + [10]) fails first; its location is the `+`.
    let err = error_of(&tape);
    assert_eq!(err.op(), "g_add");
    assert_eq!((err.location().line(), err.location().column()), (line, column_of(line, "+ b")));
    assert_eq!(err.location().file(), file!());

    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::zeros((64, 784)));
    let w = tape.param(Array2::<f32>::zeros((783, 10)));
    let line = line!() + 1;
    let _y = grad!(tape; let h = relu(x); sigmoid(h @ w));
    let err = error_of(&tape);
    assert_eq!(err.op(), "g_matmul");
    assert_eq!(err.kind(), &ErrorKind::InnerDim { left: 784, right: 783 });
    assert_eq!((err.location().line(), err.location().column()), (line, column_of(line, "@ w")));

    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::zeros((64, 10)));
    let line = line!() + 1;
    let _y = grad!(tape; let h = relu(x); softmax(h, 2));
    let err = error_of(&tape);
    assert_eq!(err.op(), "g_softmax");
    assert_eq!(err.location().column(), column_of(line, "softmax"));

    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::zeros((64, 10)));
    let line = line!() + 1;
    let _y = grad!(tape; let h = relu(x); h.softmax(-3));
    assert_eq!(error_of(&tape).location().column(), column_of(line, "softmax"), "the method's name");
}

/// The error of the first failing op inside a fused region is the one the
/// unfused ops (`#[nofuse]`) record: same op, kind and input shapes, at
/// the location of that op's operator or name in the block.
fn assert_same_error(fused: &GradError, unfused: &GradError, line: u32, needle: &str) {
    assert_eq!((fused.op(), fused.kind(), fused.shapes()), (unfused.op(), unfused.kind(), unfused.shapes()));
    assert_eq!((fused.location().line(), fused.location().column()), (line, column_of(line, needle)));
    assert_eq!(unfused.location().line(), line + 1);
    assert_eq!(unfused.location().column(), column_of(line + 1, needle));
}

/// `tanh(x * 0.5 + b) * c` with x [2, 3], b [3], c [4], fused and under
/// `#[nofuse]`: its error, its node count and the line of the fused form.
fn broadcast_failure(fuse: bool) -> (GradError, usize, u32) {
    let mut tape = Tape::<f32>::new();
    let x = tape.constant(Array2::<f32>::zeros((2, 3)));
    let b = tape.param(Array1::<f32>::zeros(3));
    let c = tape.param(Array1::<f32>::zeros(4));
    let line = line!() + 2;
    let y = match fuse {
        true => grad!(tape; tanh(x * 0.5 + b) * c),
        false => grad!(#[nofuse] tape; tanh(x * 0.5 + b) * c),
    };
    assert!(y.is_poisoned());
    (error_of(&tape), tape.len(), line)
}

#[test]
fn a_failing_op_inside_a_fused_region_reports_as_the_unfused_op() {
    let ((fused, fused_nodes, line), (unfused, unfused_nodes, _)) = (broadcast_failure(true), broadcast_failure(false));
    assert_same_error(&fused, &unfused, line, "* c");
    assert_eq!((fused.op(), fused.kind()), ("g_mul", &ErrorKind::Broadcast));
    assert_eq!(fused.shapes(), &[vec![2, 3], vec![4]], "the shape of `tanh(x * 0.5 + b)`, and c's");
    assert!(fused.to_string().starts_with("g_mul: "), "{fused}");
    assert_eq!((fused_nodes, unfused_nodes), (3, 6), "the region recorded nothing; the ops before `*` did");
}

/// Runs program `case` fused or under `#[nofuse]` on a tape holding a
/// stale handle; returns its error and the line of the fused form (the
/// `#[nofuse]` form is on the next line).
fn failing(case: usize, fuse: bool) -> (GradError, u32) {
    let mut tape = Tape::<f64>::new();
    let x = tape.param(Array1::<f64>::ones(3));
    let mark = tape.mark();
    let stale = tape.constant(Array1::<f64>::ones(3));
    tape.reset_to(mark);
    let (s, t) = (0.5, -0.5);
    let base = line!();
    match (case, fuse) {
        (0, true) => grad!(tape; exp(x) * exp(stale)),
        (0, false) => grad!(#[nofuse] tape; exp(x) * exp(stale)),
        (1, true) => grad!(tape; (stale - s) * 2.0),
        (1, false) => grad!(#[nofuse] tape; (stale - s) * 2.0),
        (2, true) => grad!(tape; (s / stale) * 2.0),
        (2, false) => grad!(#[nofuse] tape; (s / stale) * 2.0),
        (3, true) => grad!(tape; clamp(x * 2.0, s, t) + 1),
        (3, false) => grad!(#[nofuse] tape; clamp(x * 2.0, s, t) + 1),
        _ => unreachable!(),
    };
    (tape.error().cloned().expect("the program fails"), base + 2 + 2 * case as u32)
}

#[test]
fn a_stale_handle_or_bad_bounds_inside_a_region_report_as_the_unfused_op() {
    let expected = [
        ("exp(stale)", "g_exp", ErrorKind::StaleVar, vec![]),
        // `x - s` with a Rust scalar is `g_adds(x, -s)`.
        ("- s", "g_adds", ErrorKind::StaleVar, vec![]),
        // `s / x` divides a scalar constant (shape []) by `x`.
        ("/ stale", "g_div", ErrorKind::StaleVar, vec![vec![]]),
        (
            "clamp",
            "g_clamp",
            ErrorKind::InvalidArgument { name: "lo", value: 0.5, expected: "lo <= hi (and neither NaN)" },
            vec![vec![3]],
        ),
    ];
    for (case, (needle, op, kind, shapes)) in expected.into_iter().enumerate() {
        let ((fused, line), (unfused, _)) = (failing(case, true), failing(case, false));
        assert_same_error(&fused, &unfused, line, needle);
        assert_eq!((fused.op(), fused.kind(), fused.shapes()), (op, &kind, &shapes[..]), "case {case}");
    }
}

/// A region in which a value that carries a gradient is broadcast (a
/// column inside the region, a bias sum broadcast over rows) is still one
/// node, with the values and gradients of its ops written out, bit for bit.
#[test]
fn a_region_with_a_broadcast_intermediate_is_one_node_with_the_unfused_bits() {
    let run = |fuse: bool| {
        let mut tape = Tape::<f32>::new();
        let x = tape.param(ndarray::array![[1.0f32, 2.0, -0.5], [3.0, -4.0, 0.25]]);
        let c = tape.param(ndarray::array![[0.5f32], [-1.5]]);
        let (b1, b2) = (tape.param(ndarray::array![0.5f32, 0.5, 2.0]), tape.param(ndarray::array![1.0f32, 1.0, -1.0]));
        let s = 0.75f32;
        let before = tape.len();
        let (y, z) = if fuse {
            grad!(tape; (tanh(b1 + b2) * x, relu(c * s - x) * c + exp(c) / 3.0))
        } else {
            grad!(#[nofuse] tape; (tanh(b1 + b2) * x, relu(c * s - x) * c + exp(c) / 3.0))
        };
        let nodes = tape.len() - before;
        let loss = grad!(tape; sum(y * z));
        tape.backward(loss).unwrap();
        let grads = grads_of(&mut tape, &[x, c, b1, b2]);
        let values: Vec<f32> = tape.value(y).iter().chain(tape.value(z).iter()).copied().collect();
        (nodes, values, grads)
    };
    let ((fused_nodes, fused_values, fused_grads), (nodes, values, grads)) = (run(true), run(false));
    assert_eq!((fused_nodes, nodes), (2, 11), "one node per region");
    assert_eq!(fused_values, values);
    assert_eq!(fused_grads, grads);
}

#[test]
fn declared_ids_bind_their_symbols_and_a_contradiction_poisons_the_tape() {
    let mut tape = Tape::<f32>::new();
    let wte = tape.param(Array2::<f32>::zeros((10, 4)));
    let logits = tape.param(Array3::<f32>::zeros((2, 3, 10)));
    let (ids, targets) = (Array2::<usize>::zeros((2, 3)), Array2::<usize>::zeros((2, 3)));
    let (x, loss) = grad!(tape; wte: [V, C], logits: [B, T, V], ids: [B, T], targets: [B, T];
        (reshape(embedding(wte, &ids), [B * T, C]), cross_entropy(logits, &targets)));
    assert!(tape.is_ok(), "{:?}", tape.error());
    assert_eq!(tape.value(x).shape(), &[6, 4]);
    assert_eq!(tape.value(loss).shape(), &[] as &[usize]);

    let transposed = Array2::<usize>::zeros((3, 2));
    let line = line!() + 1;
    let loss = grad!(tape; logits: [B, T, V], transposed: [B, T]; cross_entropy(logits, &transposed));
    assert!(loss.is_poisoned());
    let err = error_of(&tape);
    assert_eq!(
        err.kind(),
        &ErrorKind::DeclaredShape {
            input: "transposed".to_string(),
            declared: "[B, T] with B = 2 (bound by `logits`), T = 3 (bound by `logits`)".to_string(),
            problem: "dim 0 is 3".to_string(),
        }
    );
    assert_eq!(err.shapes(), &[vec![3, 2]]);
    assert_eq!((err.location().line(), err.location().column()), (line, column_of(line, "transposed: [B")));
}

/// A region and a folded region at every size: within the kernel's 64
/// elements and beyond, one tile and many, and over threads; their values
/// and gradients are the unfused ops' bits (every input is read once).
#[test]
fn regions_of_every_size_give_the_unfused_bits() {
    let run = |n: usize, fuse: bool| {
        let mut tape = Tape::<f64>::new();
        let x = tape.param(Array1::from_shape_fn(n, |i| (i as f64 * 0.37).sin() * 3.0));
        let w = tape.param(Array1::from_shape_fn(n, |i| (i as f64 * 0.11).cos()));
        let s = 0.75;
        let (y, loss) = if fuse {
            grad!(tape; let y = tanh(x * s + 0.1); (y, sum(sigmoid(y) * w)))
        } else {
            grad!(#[nofuse] tape; let y = tanh(x * s + 0.1); (y, sum(sigmoid(y) * w)))
        };
        tape.backward(loss).unwrap();
        let values: Vec<f64> = tape.value(y).iter().copied().chain([tape.scalar(loss)]).collect();
        let grads = grads_of(&mut tape, &[x, w, y]);
        (values, grads)
    };
    for n in [1, 5, 31, 64, 65, 1000, 3 * 1024 + 5, (1 << 17) + 3] {
        assert!(run(n, true) == run(n, false), "n = {n}");
    }
}

/// Regions walked row by row (a row and a column broadcast), short rows
/// and long, few and many: the unfused ops' bits.
#[test]
fn regions_over_broadcast_rows_give_the_unfused_bits() {
    let run = |rows: usize, cols: usize, fuse: bool| {
        let mut tape = Tape::<f32>::new();
        let x = tape.param(Array2::from_shape_fn((rows, cols), |(i, j)| ((i * cols + j) as f32 * 0.37).sin() * 3.0));
        let b = tape.param(Array1::from_shape_fn(cols, |j| (j as f32 * 0.11).cos()));
        let c = tape.param(Array2::from_shape_fn((rows, 1), |(i, _)| 1.0 + i as f32 * 0.01));
        let y = if fuse { grad!(tape; tanh(x * 0.9 + b) * c) } else { grad!(#[nofuse] tape; tanh(x * 0.9 + b) * c) };
        let loss = grad!(tape; sum(y * y));
        tape.backward(loss).unwrap();
        let value: Vec<f32> = tape.value(y).iter().copied().collect();
        let grads = grads_of(&mut tape, &[x, b, c]);
        (value, grads)
    };
    for (rows, cols) in [(3, 5), (2, 31), (4, 32), (3, 64), (5, 100), (300, 129), (2000, 70)] {
        assert!(run(rows, cols, true) == run(rows, cols, false), "{rows} x {cols}");
    }
}

/// A chain of regions down which the gradient decays into the subnormal
/// numbers (W2's `tanh(x * 0.9 + 0.1)`, 400 times; it settles on the
/// smallest of them), run by the regions' kernels up to 64 elements
/// (padded to whole blocks) and interpreted beyond. Every gradient along
/// the chain, subnormal or normal, is the unfused ops' bits.
#[test]
fn gradients_that_decay_into_subnormals_keep_the_unfused_bits() {
    let run = |n: usize, fuse: bool| {
        let mut tape = Tape::<f32>::new();
        let x0 = tape.param(Array1::from_shape_fn(n, |i| (i as f32 * 0.37).sin()));
        let mut xs = vec![x0];
        for _ in 0..400 {
            let x = *xs.last().unwrap();
            xs.push(if fuse { grad!(tape; tanh(x * 0.9 + 0.1)) } else { grad!(#[nofuse] tape; tanh(x * 0.9 + 0.1)) });
        }
        let last = *xs.last().unwrap();
        let loss = grad!(tape; sum(last));
        tape.backward(loss).unwrap();
        grads_of(&mut tape, &xs)
    };
    for n in [1, 16, 40, 64, 100] {
        let fused = run(n, true);
        let count = |p: fn(f32) -> bool| fused.iter().flatten().filter(|&&g| p(g)).count();
        assert!(count(f32::is_subnormal) > 100 * n, "n = {n}: most of the chain's gradients are subnormal");
        assert!(count(f32::is_normal) > 100 * n, "n = {n}: the rest normal");
        assert!(fused == run(n, false), "n = {n}");
    }
}
