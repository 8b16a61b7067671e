// Written by the generator in main.rs (`GRAD_BLESS=1 cargo test --test fused_random`): do not edit.

use grad_runtime::{Float, Tape, Var, grad};

/// Each expression, and whether it reads a tensor input more than once.
pub const CASES: &[(&str, bool)] = &[
    ("leaky_relu(tanh(((x * c) * clamp(x, -1, s))), s)", true),
    ("sum(x * (silu((w * z))), -1, true)", false),
    ("((leaky_relu(y, s) - sigmoid(-c)) * exp(clamp((silu(z) + (-0.25 / (abs(w) + 0.5))), -4, 4)))", false),
    ("sum((w - leaky_relu(pow(abs(y) + 0.5, -1.5), s)))", false),
    ("softplus(exp(clamp(y, -4, 4)))", false),
    ("leaky_relu(x, s)", false),
    ("leaky_relu(abs(softplus(w)), s)", false),
    ("mean((-s - (x * z)))", false),
    ("pow(exp(clamp(sum(x * (y - s), -1, true), -4, 4)), 2)", false),
    ("sqrt(abs(clamp(abs(pow(y, 3)), -1, s)) + 0.25)", false),
    ("log(abs(z) + 0.5)", false),
    ("sigmoid((sqrt(abs((y / (abs(z) + 0.5))) + 0.25) - sum(x * -x, -1, true)))", true),
    ("pow(leaky_relu(((c / (abs(z) + 0.5)) / (abs((2 * x)) + 0.5)), 0.1), 3)", false),
    ("mean(pow((relu(exp(clamp(x, -4, 4))) / (abs((z - (0.5 + 2))) + 0.5)), 2))", false),
    ("exp(clamp(-(-(log(abs(y) + 0.5))), -4, 4))", false),
    ("sum(x * (sum(x * -x, -1, true) * -w), -1, true)", true),
    ("sum(gelu(clamp(pow(z, 3), -1, s)))", false),
    ("sum(leaky_relu((silu((y / (abs(z) + 0.5))) * s), s))", false),
    ("sum(x * (-(z - leaky_relu(x, s))), -1, true)", true),
    ("pow(sum(x * (pow(w, 3)), -1, true), 2)", false),
    ("softplus(w)", false),
    ("(y * z)", false),
    ("sqrt(abs((leaky_relu(x, s) + ((s * z) * pow(c, 3)))) + 0.25)", false),
    ("sum(x * -0.25, -1, true)", false),
    ("-(sum(x * (exp(clamp(exp(clamp(y, -4, 4)), -4, 4))), -1, true))", false),
    ("sum(-(x * z))", false),
    ("-(abs(softplus(x)) + leaky_relu(relu(z), s))", false),
    ("sum((exp(clamp(log(abs(-z) + 0.5), -4, 4)) * pow(pow(y, 2), 2)))", false),
    ("-(leaky_relu(x, s) / (abs(pow(abs(c), 3)) + 0.5))", false),
    ("(pow(c, 3) * pow(y, 3))", false),
    ("sum(abs(((-2 + silu(y)) * exp(clamp(x, -4, 4)))))", false),
    ("abs((silu((w * x)) * c))", false),
    ("(((log(abs(x) + 0.5) - clamp(c, -1, 1)) / (abs(pow(abs((z - x)) + 0.5, -1.5)) + 0.5)) + x)", true),
    ("mean(pow(leaky_relu(exp(clamp(sqrt(abs(z) + 0.25), -4, 4)), s), 3))", false),
    ("sum(sum(x * (-(softplus(exp(clamp(x, -4, 4))))), -1, true))", true),
    (
        "sum(((((x * z) - pow(x, 2)) / (abs(pow((x / (abs(x) + 0.5)), 2)) + 0.5)) + sum(x * (exp(clamp(sum(x * 2, -1, true), -4, 4))), -1, true)))",
        true,
    ),
    ("leaky_relu((w + (clamp(z, -1, s) * pow(z, 2))), 0.1)", true),
    ("pow((silu((y / (abs(y) + 0.5))) * exp(clamp((y / (abs(w) + 0.5)), -4, 4))), 2)", true),
    ("softplus(gelu(sum(x * silu(c), -1, true)))", false),
    ("(w * pow(w, 2))", true),
    ("pow(w, 2)", false),
    ("mean((s - (((x - c) + pow(y, 2)) + exp(clamp(z, -4, 4)))))", false),
    ("leaky_relu((sum(x * (exp(clamp(z, -4, 4))), -1, true) - silu(clamp(w, -1, 1))), 0.1)", false),
    ("(x + exp(clamp(((s * z) / (abs(leaky_relu(y, s)) + 0.5)), -4, 4)))", false),
    ("pow((c * (w + -z)), 2)", false),
    ("mean(exp(clamp((-(x / (abs(y) + 0.5)) + 3.0), -4, 4)))", false),
    (
        "mean(((((x - x) / (abs(c) + 0.5)) / (abs(clamp((x / (abs(x) + 0.5)), -1, 1)) + 0.5)) - sigmoid((relu(c) * leaky_relu(w, 0.1)))))",
        true,
    ),
    ("exp(clamp(x, -4, 4))", false),
    ("exp(clamp(y, -4, 4))", false),
    ("((pow(leaky_relu(x, 0.1), 3) + w) * clamp((x * pow(y, 2)), -1, 1))", true),
    ("pow((exp(clamp(x, -4, 4)) * ((c + y) - silu(y))), 3)", true),
    ("(x * (x + (c + (w + x))))", true),
    ("sigmoid(-z)", false),
    ("exp(clamp(y, -4, 4))", false),
    ("mean(clamp(abs(((w - y) * leaky_relu(x, s))), -1, s))", false),
    ("tanh(clamp(exp(clamp(log(abs(w) + 0.5), -4, 4)), -1, s))", false),
    ("sum(x * (sigmoid(log(abs((y + x)) + 0.5))), -1, true)", true),
    ("sigmoid((w * c))", false),
    ("(sqrt(abs(pow(sigmoid(y), 3)) + 0.25) / (abs(z) + 0.5))", false),
    ("abs(tanh(gelu(abs(x))))", false),
    ("-x", false),
    ("mean((softplus(exp(clamp(x, -4, 4))) - leaky_relu((leaky_relu(w, 0.1) + pow(abs(x) + 0.5, -1.5)), 0.1)))", true),
    ("((leaky_relu(clamp(x, -1, s), s) + leaky_relu(sqrt(abs(x) + 0.25), 0.1)) + y)", true),
    ("sum((c / (abs(-(exp(clamp((x * x), -4, 4)))) + 0.5)))", true),
    ("sum(x * (pow((softplus(x) / (abs((c - 1.5)) + 0.5)), 3)), -1, true)", true),
    ("(pow(sum(x * (c * c), -1, true), 3) / (abs(pow(pow(abs((x * x)) + 0.5, -1.5), 3)) + 0.5))", true),
    (
        "(((leaky_relu(y, 0.1) * exp(clamp(x, -4, 4))) * (sum(x * x, -1, true) + (x * x))) + -(leaky_relu((z / (abs(c) + 0.5)), s)))",
        true,
    ),
    ("sqrt(abs(sum(x * (log(abs(z) + 0.5)), -1, true)) + 0.25)", false),
    ("mean(abs(sqrt(abs(log(abs((z - 0.5)) + 0.5)) + 0.25)))", false),
    ("pow(-((z + x) * (3.0 - -0.25)), 2)", false),
    ("(pow(abs((clamp(w, -1, 1) * clamp(y, -1, s))) + 0.5, -1.5) + abs((softplus(w) + -s)))", true),
    ("softplus(sum(x * (softplus(sum(x * z, -1, true))), -1, true))", true),
    (
        "sum((tanh(exp(clamp(clamp(x, -1, 1), -4, 4))) / (abs(-((3.0 / (abs(x) + 0.5)) / (abs((0.5 * x)) + 0.5))) + 0.5)))",
        true,
    ),
    ("mean((pow(relu(clamp(x, -1, 1)), 3) * z))", false),
    ("softplus(tanh((clamp(z, -1, s) * sum(x * -0.25, -1, true))))", false),
    ("pow((sum(x * (leaky_relu(c, s)), -1, true) - softplus(silu(x))), 3)", true),
    ("sum(-(clamp(sum(x * (c * 1.5), -1, true), -1, 1)))", false),
    ("mean(abs(relu(silu(y))))", false),
    ("(-(-(pow(x, 2))) + (-(sum(x * x, -1, true)) * sum(x * relu(c), -1, true)))", true),
    ("clamp(pow(x, 3), -1, 1)", false),
    ("log(abs(x) + 0.5)", false),
    ("mean(sum(x * (leaky_relu((x + c), s) * (abs(y) * 0.5)), -1, true))", true),
    ("(clamp(x, -1, s) + -x)", true),
    ("mean(clamp(clamp(gelu((x * s)), -1, s), -1, 1))", false),
    ("sum(((((z * x) * abs(x)) - w) + pow(relu((0.5 * c)), 2)))", true),
    ("log(abs(exp(clamp(z, -4, 4))) + 0.5)", false),
    ("(x * x)", true),
    ("(silu(((w * w) * (z - y))) + (((w * c) * pow(abs(y) + 0.5, -1.5)) - clamp(exp(clamp(c, -4, 4)), -1, 1)))", true),
    ("sum(x * (clamp(c, -1, 1) + tanh(pow(abs(y) + 0.5, -1.5))), -1, true)", false),
    ("sum(clamp((x - tanh(relu(x))), -1, 1))", true),
    (
        "(gelu(silu((3.0 / (abs(c) + 0.5)))) / (abs((leaky_relu(sum(x * 3.0, -1, true), s) / (abs(relu((1.5 * w))) + 0.5))) + 0.5))",
        false,
    ),
    ("(y + sum(x * (tanh((2 * y))), -1, true))", true),
    ("tanh(pow(x, 3))", false),
    ("sum((pow(sigmoid(sum(x * c, -1, true)), 3) * (clamp((y * w), -1, s) * s)))", false),
    ("mean(exp(clamp((-(pow(abs(z) + 0.5, -1.5)) + x), -4, 4)))", false),
    ("(-(log(abs((z - y)) + 0.5)) + clamp(leaky_relu(z, s), -1, s))", true),
    ("(1.5 * (sigmoid(leaky_relu(z, 0.1)) + (z + (y + y))))", true),
    ("sum(x * (exp(clamp(pow(sigmoid(w), 3), -4, 4))), -1, true)", false),
    ("sum(clamp(gelu((softplus(y) * clamp(x, -1, 1))), -1, s))", false),
    ("sum(softplus(((exp(clamp(y, -4, 4)) - leaky_relu(x, 0.1)) + (softplus(y) * (c + z)))))", true),
    ("exp(clamp(-w, -4, 4))", false),
    ("(clamp(-(y - w), -1, 1) / (abs(-(pow(c, 3) - sum(x * x, -1, true))) + 0.5))", true),
    ("sum(sqrt(abs(pow(abs(clamp(sum(x * z, -1, true), -1, 1)) + 0.5, -1.5)) + 0.25))", false),
    ("abs(x)", false),
    ("silu(tanh(((c * x) * pow(w, 3))))", false),
    ("sigmoid((leaky_relu(exp(clamp(z, -4, 4)), s) * pow(abs(silu(w)) + 0.5, -1.5)))", false),
    ("clamp((((x - x) + (1.5 / (abs(y) + 0.5))) * ((w * x) - leaky_relu(z, s))), -1, s)", true),
    ("((clamp((w + 2), -1, s) + abs(leaky_relu(x, s))) - (x / (abs(pow(softplus(x), 3)) + 0.5)))", true),
    ("(exp(clamp(z, -4, 4)) * pow(exp(clamp(x, -4, 4)), 2))", false),
    ("mean((w / (abs((((c - 2) + silu(x)) - clamp(sqrt(abs(z) + 0.25), -1, s))) + 0.5)))", false),
    ("(((gelu(z) * z) * -y) + -(clamp((z * y), -1, s)))", true),
    ("leaky_relu(pow((-1.5 * pow(abs(x) + 0.5, -1.5)), 3), 0.1)", false),
    ("pow(abs(x) + 0.5, -1.5)", false),
    ("mean(clamp(x, -1, s))", false),
    ("((pow(tanh(x), 2) * pow((w / (abs(x) + 0.5)), 2)) * x)", true),
    ("leaky_relu(z, 0.1)", false),
    ("mean(clamp(((w * x) - clamp((x + y), -1, s)), -1, 1))", true),
    ("sum(((tanh((z * -0.25)) * leaky_relu(softplus(w), s)) * (z * c)))", true),
    (
        "sum(((sqrt(abs(log(abs(w) + 0.5)) + 0.25) - (relu(x) * s)) + (leaky_relu(-w, 0.1) / (abs(tanh(-x)) + 0.5))))",
        true,
    ),
    ("clamp(sum(x * (1.5 - x), -1, true), -1, 1)", true),
];

/// Case `k` on the inputs `x, y, z, w` (parameters) and `c` (a
/// constant), with the Rust scalar `s`: fused, or under `#[nofuse]`.
pub fn run<T: Float>(k: usize, fuse: bool, tp: &mut Tape<T>, [x, y, z, w, c]: [Var; 5], s: T) -> Var {
    match (k, fuse) {
        (0, true) => grad!(tp; leaky_relu(tanh(((x * c) * clamp(x, -1, s))), s)),
        (0, false) => grad!(#[nofuse] tp; leaky_relu(tanh(((x * c) * clamp(x, -1, s))), s)),
        (1, true) => grad!(tp; sum(x * (silu((w * z))), -1, true)),
        (1, false) => grad!(#[nofuse] tp; sum(x * (silu((w * z))), -1, true)),
        (2, true) => {
            grad!(tp; ((leaky_relu(y, s) - sigmoid(-c)) * exp(clamp((silu(z) + (-0.25 / (abs(w) + 0.5))), -4, 4))))
        }
        (2, false) => {
            grad!(#[nofuse] tp; ((leaky_relu(y, s) - sigmoid(-c)) * exp(clamp((silu(z) + (-0.25 / (abs(w) + 0.5))), -4, 4))))
        }
        (3, true) => grad!(tp; sum((w - leaky_relu(pow(abs(y) + 0.5, -1.5), s)))),
        (3, false) => grad!(#[nofuse] tp; sum((w - leaky_relu(pow(abs(y) + 0.5, -1.5), s)))),
        (4, true) => grad!(tp; softplus(exp(clamp(y, -4, 4)))),
        (4, false) => grad!(#[nofuse] tp; softplus(exp(clamp(y, -4, 4)))),
        (5, true) => grad!(tp; leaky_relu(x, s)),
        (5, false) => grad!(#[nofuse] tp; leaky_relu(x, s)),
        (6, true) => grad!(tp; leaky_relu(abs(softplus(w)), s)),
        (6, false) => grad!(#[nofuse] tp; leaky_relu(abs(softplus(w)), s)),
        (7, true) => grad!(tp; mean((-s - (x * z)))),
        (7, false) => grad!(#[nofuse] tp; mean((-s - (x * z)))),
        (8, true) => grad!(tp; pow(exp(clamp(sum(x * (y - s), -1, true), -4, 4)), 2)),
        (8, false) => grad!(#[nofuse] tp; pow(exp(clamp(sum(x * (y - s), -1, true), -4, 4)), 2)),
        (9, true) => grad!(tp; sqrt(abs(clamp(abs(pow(y, 3)), -1, s)) + 0.25)),
        (9, false) => grad!(#[nofuse] tp; sqrt(abs(clamp(abs(pow(y, 3)), -1, s)) + 0.25)),
        (10, true) => grad!(tp; log(abs(z) + 0.5)),
        (10, false) => grad!(#[nofuse] tp; log(abs(z) + 0.5)),
        (11, true) => grad!(tp; sigmoid((sqrt(abs((y / (abs(z) + 0.5))) + 0.25) - sum(x * -x, -1, true)))),
        (11, false) => grad!(#[nofuse] tp; sigmoid((sqrt(abs((y / (abs(z) + 0.5))) + 0.25) - sum(x * -x, -1, true)))),
        (12, true) => grad!(tp; pow(leaky_relu(((c / (abs(z) + 0.5)) / (abs((2 * x)) + 0.5)), 0.1), 3)),
        (12, false) => grad!(#[nofuse] tp; pow(leaky_relu(((c / (abs(z) + 0.5)) / (abs((2 * x)) + 0.5)), 0.1), 3)),
        (13, true) => grad!(tp; mean(pow((relu(exp(clamp(x, -4, 4))) / (abs((z - (0.5 + 2))) + 0.5)), 2))),
        (13, false) => grad!(#[nofuse] tp; mean(pow((relu(exp(clamp(x, -4, 4))) / (abs((z - (0.5 + 2))) + 0.5)), 2))),
        (14, true) => grad!(tp; exp(clamp(-(-(log(abs(y) + 0.5))), -4, 4))),
        (14, false) => grad!(#[nofuse] tp; exp(clamp(-(-(log(abs(y) + 0.5))), -4, 4))),
        (15, true) => grad!(tp; sum(x * (sum(x * -x, -1, true) * -w), -1, true)),
        (15, false) => grad!(#[nofuse] tp; sum(x * (sum(x * -x, -1, true) * -w), -1, true)),
        (16, true) => grad!(tp; sum(gelu(clamp(pow(z, 3), -1, s)))),
        (16, false) => grad!(#[nofuse] tp; sum(gelu(clamp(pow(z, 3), -1, s)))),
        (17, true) => grad!(tp; sum(leaky_relu((silu((y / (abs(z) + 0.5))) * s), s))),
        (17, false) => grad!(#[nofuse] tp; sum(leaky_relu((silu((y / (abs(z) + 0.5))) * s), s))),
        (18, true) => grad!(tp; sum(x * (-(z - leaky_relu(x, s))), -1, true)),
        (18, false) => grad!(#[nofuse] tp; sum(x * (-(z - leaky_relu(x, s))), -1, true)),
        (19, true) => grad!(tp; pow(sum(x * (pow(w, 3)), -1, true), 2)),
        (19, false) => grad!(#[nofuse] tp; pow(sum(x * (pow(w, 3)), -1, true), 2)),
        (20, true) => grad!(tp; softplus(w)),
        (20, false) => grad!(#[nofuse] tp; softplus(w)),
        (21, true) => grad!(tp; (y * z)),
        (21, false) => grad!(#[nofuse] tp; (y * z)),
        (22, true) => grad!(tp; sqrt(abs((leaky_relu(x, s) + ((s * z) * pow(c, 3)))) + 0.25)),
        (22, false) => grad!(#[nofuse] tp; sqrt(abs((leaky_relu(x, s) + ((s * z) * pow(c, 3)))) + 0.25)),
        (23, true) => grad!(tp; sum(x * -0.25, -1, true)),
        (23, false) => grad!(#[nofuse] tp; sum(x * -0.25, -1, true)),
        (24, true) => grad!(tp; -(sum(x * (exp(clamp(exp(clamp(y, -4, 4)), -4, 4))), -1, true))),
        (24, false) => grad!(#[nofuse] tp; -(sum(x * (exp(clamp(exp(clamp(y, -4, 4)), -4, 4))), -1, true))),
        (25, true) => grad!(tp; sum(-(x * z))),
        (25, false) => grad!(#[nofuse] tp; sum(-(x * z))),
        (26, true) => grad!(tp; -(abs(softplus(x)) + leaky_relu(relu(z), s))),
        (26, false) => grad!(#[nofuse] tp; -(abs(softplus(x)) + leaky_relu(relu(z), s))),
        (27, true) => grad!(tp; sum((exp(clamp(log(abs(-z) + 0.5), -4, 4)) * pow(pow(y, 2), 2)))),
        (27, false) => grad!(#[nofuse] tp; sum((exp(clamp(log(abs(-z) + 0.5), -4, 4)) * pow(pow(y, 2), 2)))),
        (28, true) => grad!(tp; -(leaky_relu(x, s) / (abs(pow(abs(c), 3)) + 0.5))),
        (28, false) => grad!(#[nofuse] tp; -(leaky_relu(x, s) / (abs(pow(abs(c), 3)) + 0.5))),
        (29, true) => grad!(tp; (pow(c, 3) * pow(y, 3))),
        (29, false) => grad!(#[nofuse] tp; (pow(c, 3) * pow(y, 3))),
        (30, true) => grad!(tp; sum(abs(((-2 + silu(y)) * exp(clamp(x, -4, 4)))))),
        (30, false) => grad!(#[nofuse] tp; sum(abs(((-2 + silu(y)) * exp(clamp(x, -4, 4)))))),
        (31, true) => grad!(tp; abs((silu((w * x)) * c))),
        (31, false) => grad!(#[nofuse] tp; abs((silu((w * x)) * c))),
        (32, true) => {
            grad!(tp; (((log(abs(x) + 0.5) - clamp(c, -1, 1)) / (abs(pow(abs((z - x)) + 0.5, -1.5)) + 0.5)) + x))
        }
        (32, false) => {
            grad!(#[nofuse] tp; (((log(abs(x) + 0.5) - clamp(c, -1, 1)) / (abs(pow(abs((z - x)) + 0.5, -1.5)) + 0.5)) + x))
        }
        (33, true) => grad!(tp; mean(pow(leaky_relu(exp(clamp(sqrt(abs(z) + 0.25), -4, 4)), s), 3))),
        (33, false) => grad!(#[nofuse] tp; mean(pow(leaky_relu(exp(clamp(sqrt(abs(z) + 0.25), -4, 4)), s), 3))),
        (34, true) => grad!(tp; sum(sum(x * (-(softplus(exp(clamp(x, -4, 4))))), -1, true))),
        (34, false) => grad!(#[nofuse] tp; sum(sum(x * (-(softplus(exp(clamp(x, -4, 4))))), -1, true))),
        (35, true) => {
            grad!(tp; sum(((((x * z) - pow(x, 2)) / (abs(pow((x / (abs(x) + 0.5)), 2)) + 0.5)) + sum(x * (exp(clamp(sum(x * 2, -1, true), -4, 4))), -1, true))))
        }
        (35, false) => {
            grad!(#[nofuse] tp; sum(((((x * z) - pow(x, 2)) / (abs(pow((x / (abs(x) + 0.5)), 2)) + 0.5)) + sum(x * (exp(clamp(sum(x * 2, -1, true), -4, 4))), -1, true))))
        }
        (36, true) => grad!(tp; leaky_relu((w + (clamp(z, -1, s) * pow(z, 2))), 0.1)),
        (36, false) => grad!(#[nofuse] tp; leaky_relu((w + (clamp(z, -1, s) * pow(z, 2))), 0.1)),
        (37, true) => grad!(tp; pow((silu((y / (abs(y) + 0.5))) * exp(clamp((y / (abs(w) + 0.5)), -4, 4))), 2)),
        (37, false) => {
            grad!(#[nofuse] tp; pow((silu((y / (abs(y) + 0.5))) * exp(clamp((y / (abs(w) + 0.5)), -4, 4))), 2))
        }
        (38, true) => grad!(tp; softplus(gelu(sum(x * silu(c), -1, true)))),
        (38, false) => grad!(#[nofuse] tp; softplus(gelu(sum(x * silu(c), -1, true)))),
        (39, true) => grad!(tp; (w * pow(w, 2))),
        (39, false) => grad!(#[nofuse] tp; (w * pow(w, 2))),
        (40, true) => grad!(tp; pow(w, 2)),
        (40, false) => grad!(#[nofuse] tp; pow(w, 2)),
        (41, true) => grad!(tp; mean((s - (((x - c) + pow(y, 2)) + exp(clamp(z, -4, 4)))))),
        (41, false) => grad!(#[nofuse] tp; mean((s - (((x - c) + pow(y, 2)) + exp(clamp(z, -4, 4)))))),
        (42, true) => grad!(tp; leaky_relu((sum(x * (exp(clamp(z, -4, 4))), -1, true) - silu(clamp(w, -1, 1))), 0.1)),
        (42, false) => {
            grad!(#[nofuse] tp; leaky_relu((sum(x * (exp(clamp(z, -4, 4))), -1, true) - silu(clamp(w, -1, 1))), 0.1))
        }
        (43, true) => grad!(tp; (x + exp(clamp(((s * z) / (abs(leaky_relu(y, s)) + 0.5)), -4, 4)))),
        (43, false) => grad!(#[nofuse] tp; (x + exp(clamp(((s * z) / (abs(leaky_relu(y, s)) + 0.5)), -4, 4)))),
        (44, true) => grad!(tp; pow((c * (w + -z)), 2)),
        (44, false) => grad!(#[nofuse] tp; pow((c * (w + -z)), 2)),
        (45, true) => grad!(tp; mean(exp(clamp((-(x / (abs(y) + 0.5)) + 3.0), -4, 4)))),
        (45, false) => grad!(#[nofuse] tp; mean(exp(clamp((-(x / (abs(y) + 0.5)) + 3.0), -4, 4)))),
        (46, true) => {
            grad!(tp; mean(((((x - x) / (abs(c) + 0.5)) / (abs(clamp((x / (abs(x) + 0.5)), -1, 1)) + 0.5)) - sigmoid((relu(c) * leaky_relu(w, 0.1))))))
        }
        (46, false) => {
            grad!(#[nofuse] tp; mean(((((x - x) / (abs(c) + 0.5)) / (abs(clamp((x / (abs(x) + 0.5)), -1, 1)) + 0.5)) - sigmoid((relu(c) * leaky_relu(w, 0.1))))))
        }
        (47, true) => grad!(tp; exp(clamp(x, -4, 4))),
        (47, false) => grad!(#[nofuse] tp; exp(clamp(x, -4, 4))),
        (48, true) => grad!(tp; exp(clamp(y, -4, 4))),
        (48, false) => grad!(#[nofuse] tp; exp(clamp(y, -4, 4))),
        (49, true) => grad!(tp; ((pow(leaky_relu(x, 0.1), 3) + w) * clamp((x * pow(y, 2)), -1, 1))),
        (49, false) => grad!(#[nofuse] tp; ((pow(leaky_relu(x, 0.1), 3) + w) * clamp((x * pow(y, 2)), -1, 1))),
        (50, true) => grad!(tp; pow((exp(clamp(x, -4, 4)) * ((c + y) - silu(y))), 3)),
        (50, false) => grad!(#[nofuse] tp; pow((exp(clamp(x, -4, 4)) * ((c + y) - silu(y))), 3)),
        (51, true) => grad!(tp; (x * (x + (c + (w + x))))),
        (51, false) => grad!(#[nofuse] tp; (x * (x + (c + (w + x))))),
        (52, true) => grad!(tp; sigmoid(-z)),
        (52, false) => grad!(#[nofuse] tp; sigmoid(-z)),
        (53, true) => grad!(tp; exp(clamp(y, -4, 4))),
        (53, false) => grad!(#[nofuse] tp; exp(clamp(y, -4, 4))),
        (54, true) => grad!(tp; mean(clamp(abs(((w - y) * leaky_relu(x, s))), -1, s))),
        (54, false) => grad!(#[nofuse] tp; mean(clamp(abs(((w - y) * leaky_relu(x, s))), -1, s))),
        (55, true) => grad!(tp; tanh(clamp(exp(clamp(log(abs(w) + 0.5), -4, 4)), -1, s))),
        (55, false) => grad!(#[nofuse] tp; tanh(clamp(exp(clamp(log(abs(w) + 0.5), -4, 4)), -1, s))),
        (56, true) => grad!(tp; sum(x * (sigmoid(log(abs((y + x)) + 0.5))), -1, true)),
        (56, false) => grad!(#[nofuse] tp; sum(x * (sigmoid(log(abs((y + x)) + 0.5))), -1, true)),
        (57, true) => grad!(tp; sigmoid((w * c))),
        (57, false) => grad!(#[nofuse] tp; sigmoid((w * c))),
        (58, true) => grad!(tp; (sqrt(abs(pow(sigmoid(y), 3)) + 0.25) / (abs(z) + 0.5))),
        (58, false) => grad!(#[nofuse] tp; (sqrt(abs(pow(sigmoid(y), 3)) + 0.25) / (abs(z) + 0.5))),
        (59, true) => grad!(tp; abs(tanh(gelu(abs(x))))),
        (59, false) => grad!(#[nofuse] tp; abs(tanh(gelu(abs(x))))),
        (60, true) => grad!(tp; -x),
        (60, false) => grad!(#[nofuse] tp; -x),
        (61, true) => {
            grad!(tp; mean((softplus(exp(clamp(x, -4, 4))) - leaky_relu((leaky_relu(w, 0.1) + pow(abs(x) + 0.5, -1.5)), 0.1))))
        }
        (61, false) => {
            grad!(#[nofuse] tp; mean((softplus(exp(clamp(x, -4, 4))) - leaky_relu((leaky_relu(w, 0.1) + pow(abs(x) + 0.5, -1.5)), 0.1))))
        }
        (62, true) => grad!(tp; ((leaky_relu(clamp(x, -1, s), s) + leaky_relu(sqrt(abs(x) + 0.25), 0.1)) + y)),
        (62, false) => {
            grad!(#[nofuse] tp; ((leaky_relu(clamp(x, -1, s), s) + leaky_relu(sqrt(abs(x) + 0.25), 0.1)) + y))
        }
        (63, true) => grad!(tp; sum((c / (abs(-(exp(clamp((x * x), -4, 4)))) + 0.5)))),
        (63, false) => grad!(#[nofuse] tp; sum((c / (abs(-(exp(clamp((x * x), -4, 4)))) + 0.5)))),
        (64, true) => grad!(tp; sum(x * (pow((softplus(x) / (abs((c - 1.5)) + 0.5)), 3)), -1, true)),
        (64, false) => grad!(#[nofuse] tp; sum(x * (pow((softplus(x) / (abs((c - 1.5)) + 0.5)), 3)), -1, true)),
        (65, true) => {
            grad!(tp; (pow(sum(x * (c * c), -1, true), 3) / (abs(pow(pow(abs((x * x)) + 0.5, -1.5), 3)) + 0.5)))
        }
        (65, false) => {
            grad!(#[nofuse] tp; (pow(sum(x * (c * c), -1, true), 3) / (abs(pow(pow(abs((x * x)) + 0.5, -1.5), 3)) + 0.5)))
        }
        (66, true) => {
            grad!(tp; (((leaky_relu(y, 0.1) * exp(clamp(x, -4, 4))) * (sum(x * x, -1, true) + (x * x))) + -(leaky_relu((z / (abs(c) + 0.5)), s))))
        }
        (66, false) => {
            grad!(#[nofuse] tp; (((leaky_relu(y, 0.1) * exp(clamp(x, -4, 4))) * (sum(x * x, -1, true) + (x * x))) + -(leaky_relu((z / (abs(c) + 0.5)), s))))
        }
        (67, true) => grad!(tp; sqrt(abs(sum(x * (log(abs(z) + 0.5)), -1, true)) + 0.25)),
        (67, false) => grad!(#[nofuse] tp; sqrt(abs(sum(x * (log(abs(z) + 0.5)), -1, true)) + 0.25)),
        (68, true) => grad!(tp; mean(abs(sqrt(abs(log(abs((z - 0.5)) + 0.5)) + 0.25)))),
        (68, false) => grad!(#[nofuse] tp; mean(abs(sqrt(abs(log(abs((z - 0.5)) + 0.5)) + 0.25)))),
        (69, true) => grad!(tp; pow(-((z + x) * (3.0 - -0.25)), 2)),
        (69, false) => grad!(#[nofuse] tp; pow(-((z + x) * (3.0 - -0.25)), 2)),
        (70, true) => grad!(tp; (pow(abs((clamp(w, -1, 1) * clamp(y, -1, s))) + 0.5, -1.5) + abs((softplus(w) + -s)))),
        (70, false) => {
            grad!(#[nofuse] tp; (pow(abs((clamp(w, -1, 1) * clamp(y, -1, s))) + 0.5, -1.5) + abs((softplus(w) + -s))))
        }
        (71, true) => grad!(tp; softplus(sum(x * (softplus(sum(x * z, -1, true))), -1, true))),
        (71, false) => grad!(#[nofuse] tp; softplus(sum(x * (softplus(sum(x * z, -1, true))), -1, true))),
        (72, true) => {
            grad!(tp; sum((tanh(exp(clamp(clamp(x, -1, 1), -4, 4))) / (abs(-((3.0 / (abs(x) + 0.5)) / (abs((0.5 * x)) + 0.5))) + 0.5))))
        }
        (72, false) => {
            grad!(#[nofuse] tp; sum((tanh(exp(clamp(clamp(x, -1, 1), -4, 4))) / (abs(-((3.0 / (abs(x) + 0.5)) / (abs((0.5 * x)) + 0.5))) + 0.5))))
        }
        (73, true) => grad!(tp; mean((pow(relu(clamp(x, -1, 1)), 3) * z))),
        (73, false) => grad!(#[nofuse] tp; mean((pow(relu(clamp(x, -1, 1)), 3) * z))),
        (74, true) => grad!(tp; softplus(tanh((clamp(z, -1, s) * sum(x * -0.25, -1, true))))),
        (74, false) => grad!(#[nofuse] tp; softplus(tanh((clamp(z, -1, s) * sum(x * -0.25, -1, true))))),
        (75, true) => grad!(tp; pow((sum(x * (leaky_relu(c, s)), -1, true) - softplus(silu(x))), 3)),
        (75, false) => grad!(#[nofuse] tp; pow((sum(x * (leaky_relu(c, s)), -1, true) - softplus(silu(x))), 3)),
        (76, true) => grad!(tp; sum(-(clamp(sum(x * (c * 1.5), -1, true), -1, 1)))),
        (76, false) => grad!(#[nofuse] tp; sum(-(clamp(sum(x * (c * 1.5), -1, true), -1, 1)))),
        (77, true) => grad!(tp; mean(abs(relu(silu(y))))),
        (77, false) => grad!(#[nofuse] tp; mean(abs(relu(silu(y))))),
        (78, true) => grad!(tp; (-(-(pow(x, 2))) + (-(sum(x * x, -1, true)) * sum(x * relu(c), -1, true)))),
        (78, false) => grad!(#[nofuse] tp; (-(-(pow(x, 2))) + (-(sum(x * x, -1, true)) * sum(x * relu(c), -1, true)))),
        (79, true) => grad!(tp; clamp(pow(x, 3), -1, 1)),
        (79, false) => grad!(#[nofuse] tp; clamp(pow(x, 3), -1, 1)),
        (80, true) => grad!(tp; log(abs(x) + 0.5)),
        (80, false) => grad!(#[nofuse] tp; log(abs(x) + 0.5)),
        (81, true) => grad!(tp; mean(sum(x * (leaky_relu((x + c), s) * (abs(y) * 0.5)), -1, true))),
        (81, false) => grad!(#[nofuse] tp; mean(sum(x * (leaky_relu((x + c), s) * (abs(y) * 0.5)), -1, true))),
        (82, true) => grad!(tp; (clamp(x, -1, s) + -x)),
        (82, false) => grad!(#[nofuse] tp; (clamp(x, -1, s) + -x)),
        (83, true) => grad!(tp; mean(clamp(clamp(gelu((x * s)), -1, s), -1, 1))),
        (83, false) => grad!(#[nofuse] tp; mean(clamp(clamp(gelu((x * s)), -1, s), -1, 1))),
        (84, true) => grad!(tp; sum(((((z * x) * abs(x)) - w) + pow(relu((0.5 * c)), 2)))),
        (84, false) => grad!(#[nofuse] tp; sum(((((z * x) * abs(x)) - w) + pow(relu((0.5 * c)), 2)))),
        (85, true) => grad!(tp; log(abs(exp(clamp(z, -4, 4))) + 0.5)),
        (85, false) => grad!(#[nofuse] tp; log(abs(exp(clamp(z, -4, 4))) + 0.5)),
        (86, true) => grad!(tp; (x * x)),
        (86, false) => grad!(#[nofuse] tp; (x * x)),
        (87, true) => {
            grad!(tp; (silu(((w * w) * (z - y))) + (((w * c) * pow(abs(y) + 0.5, -1.5)) - clamp(exp(clamp(c, -4, 4)), -1, 1))))
        }
        (87, false) => {
            grad!(#[nofuse] tp; (silu(((w * w) * (z - y))) + (((w * c) * pow(abs(y) + 0.5, -1.5)) - clamp(exp(clamp(c, -4, 4)), -1, 1))))
        }
        (88, true) => grad!(tp; sum(x * (clamp(c, -1, 1) + tanh(pow(abs(y) + 0.5, -1.5))), -1, true)),
        (88, false) => grad!(#[nofuse] tp; sum(x * (clamp(c, -1, 1) + tanh(pow(abs(y) + 0.5, -1.5))), -1, true)),
        (89, true) => grad!(tp; sum(clamp((x - tanh(relu(x))), -1, 1))),
        (89, false) => grad!(#[nofuse] tp; sum(clamp((x - tanh(relu(x))), -1, 1))),
        (90, true) => {
            grad!(tp; (gelu(silu((3.0 / (abs(c) + 0.5)))) / (abs((leaky_relu(sum(x * 3.0, -1, true), s) / (abs(relu((1.5 * w))) + 0.5))) + 0.5)))
        }
        (90, false) => {
            grad!(#[nofuse] tp; (gelu(silu((3.0 / (abs(c) + 0.5)))) / (abs((leaky_relu(sum(x * 3.0, -1, true), s) / (abs(relu((1.5 * w))) + 0.5))) + 0.5)))
        }
        (91, true) => grad!(tp; (y + sum(x * (tanh((2 * y))), -1, true))),
        (91, false) => grad!(#[nofuse] tp; (y + sum(x * (tanh((2 * y))), -1, true))),
        (92, true) => grad!(tp; tanh(pow(x, 3))),
        (92, false) => grad!(#[nofuse] tp; tanh(pow(x, 3))),
        (93, true) => grad!(tp; sum((pow(sigmoid(sum(x * c, -1, true)), 3) * (clamp((y * w), -1, s) * s)))),
        (93, false) => grad!(#[nofuse] tp; sum((pow(sigmoid(sum(x * c, -1, true)), 3) * (clamp((y * w), -1, s) * s)))),
        (94, true) => grad!(tp; mean(exp(clamp((-(pow(abs(z) + 0.5, -1.5)) + x), -4, 4)))),
        (94, false) => grad!(#[nofuse] tp; mean(exp(clamp((-(pow(abs(z) + 0.5, -1.5)) + x), -4, 4)))),
        (95, true) => grad!(tp; (-(log(abs((z - y)) + 0.5)) + clamp(leaky_relu(z, s), -1, s))),
        (95, false) => grad!(#[nofuse] tp; (-(log(abs((z - y)) + 0.5)) + clamp(leaky_relu(z, s), -1, s))),
        (96, true) => grad!(tp; (1.5 * (sigmoid(leaky_relu(z, 0.1)) + (z + (y + y))))),
        (96, false) => grad!(#[nofuse] tp; (1.5 * (sigmoid(leaky_relu(z, 0.1)) + (z + (y + y))))),
        (97, true) => grad!(tp; sum(x * (exp(clamp(pow(sigmoid(w), 3), -4, 4))), -1, true)),
        (97, false) => grad!(#[nofuse] tp; sum(x * (exp(clamp(pow(sigmoid(w), 3), -4, 4))), -1, true)),
        (98, true) => grad!(tp; sum(clamp(gelu((softplus(y) * clamp(x, -1, 1))), -1, s))),
        (98, false) => grad!(#[nofuse] tp; sum(clamp(gelu((softplus(y) * clamp(x, -1, 1))), -1, s))),
        (99, true) => grad!(tp; sum(softplus(((exp(clamp(y, -4, 4)) - leaky_relu(x, 0.1)) + (softplus(y) * (c + z)))))),
        (99, false) => {
            grad!(#[nofuse] tp; sum(softplus(((exp(clamp(y, -4, 4)) - leaky_relu(x, 0.1)) + (softplus(y) * (c + z))))))
        }
        (100, true) => grad!(tp; exp(clamp(-w, -4, 4))),
        (100, false) => grad!(#[nofuse] tp; exp(clamp(-w, -4, 4))),
        (101, true) => grad!(tp; (clamp(-(y - w), -1, 1) / (abs(-(pow(c, 3) - sum(x * x, -1, true))) + 0.5))),
        (101, false) => {
            grad!(#[nofuse] tp; (clamp(-(y - w), -1, 1) / (abs(-(pow(c, 3) - sum(x * x, -1, true))) + 0.5)))
        }
        (102, true) => grad!(tp; sum(sqrt(abs(pow(abs(clamp(sum(x * z, -1, true), -1, 1)) + 0.5, -1.5)) + 0.25))),
        (102, false) => {
            grad!(#[nofuse] tp; sum(sqrt(abs(pow(abs(clamp(sum(x * z, -1, true), -1, 1)) + 0.5, -1.5)) + 0.25)))
        }
        (103, true) => grad!(tp; abs(x)),
        (103, false) => grad!(#[nofuse] tp; abs(x)),
        (104, true) => grad!(tp; silu(tanh(((c * x) * pow(w, 3))))),
        (104, false) => grad!(#[nofuse] tp; silu(tanh(((c * x) * pow(w, 3))))),
        (105, true) => grad!(tp; sigmoid((leaky_relu(exp(clamp(z, -4, 4)), s) * pow(abs(silu(w)) + 0.5, -1.5)))),
        (105, false) => {
            grad!(#[nofuse] tp; sigmoid((leaky_relu(exp(clamp(z, -4, 4)), s) * pow(abs(silu(w)) + 0.5, -1.5))))
        }
        (106, true) => grad!(tp; clamp((((x - x) + (1.5 / (abs(y) + 0.5))) * ((w * x) - leaky_relu(z, s))), -1, s)),
        (106, false) => {
            grad!(#[nofuse] tp; clamp((((x - x) + (1.5 / (abs(y) + 0.5))) * ((w * x) - leaky_relu(z, s))), -1, s))
        }
        (107, true) => {
            grad!(tp; ((clamp((w + 2), -1, s) + abs(leaky_relu(x, s))) - (x / (abs(pow(softplus(x), 3)) + 0.5))))
        }
        (107, false) => {
            grad!(#[nofuse] tp; ((clamp((w + 2), -1, s) + abs(leaky_relu(x, s))) - (x / (abs(pow(softplus(x), 3)) + 0.5))))
        }
        (108, true) => grad!(tp; (exp(clamp(z, -4, 4)) * pow(exp(clamp(x, -4, 4)), 2))),
        (108, false) => grad!(#[nofuse] tp; (exp(clamp(z, -4, 4)) * pow(exp(clamp(x, -4, 4)), 2))),
        (109, true) => grad!(tp; mean((w / (abs((((c - 2) + silu(x)) - clamp(sqrt(abs(z) + 0.25), -1, s))) + 0.5)))),
        (109, false) => {
            grad!(#[nofuse] tp; mean((w / (abs((((c - 2) + silu(x)) - clamp(sqrt(abs(z) + 0.25), -1, s))) + 0.5))))
        }
        (110, true) => grad!(tp; (((gelu(z) * z) * -y) + -(clamp((z * y), -1, s)))),
        (110, false) => grad!(#[nofuse] tp; (((gelu(z) * z) * -y) + -(clamp((z * y), -1, s)))),
        (111, true) => grad!(tp; leaky_relu(pow((-1.5 * pow(abs(x) + 0.5, -1.5)), 3), 0.1)),
        (111, false) => grad!(#[nofuse] tp; leaky_relu(pow((-1.5 * pow(abs(x) + 0.5, -1.5)), 3), 0.1)),
        (112, true) => grad!(tp; pow(abs(x) + 0.5, -1.5)),
        (112, false) => grad!(#[nofuse] tp; pow(abs(x) + 0.5, -1.5)),
        (113, true) => grad!(tp; mean(clamp(x, -1, s))),
        (113, false) => grad!(#[nofuse] tp; mean(clamp(x, -1, s))),
        (114, true) => grad!(tp; ((pow(tanh(x), 2) * pow((w / (abs(x) + 0.5)), 2)) * x)),
        (114, false) => grad!(#[nofuse] tp; ((pow(tanh(x), 2) * pow((w / (abs(x) + 0.5)), 2)) * x)),
        (115, true) => grad!(tp; leaky_relu(z, 0.1)),
        (115, false) => grad!(#[nofuse] tp; leaky_relu(z, 0.1)),
        (116, true) => grad!(tp; mean(clamp(((w * x) - clamp((x + y), -1, s)), -1, 1))),
        (116, false) => grad!(#[nofuse] tp; mean(clamp(((w * x) - clamp((x + y), -1, s)), -1, 1))),
        (117, true) => grad!(tp; sum(((tanh((z * -0.25)) * leaky_relu(softplus(w), s)) * (z * c)))),
        (117, false) => grad!(#[nofuse] tp; sum(((tanh((z * -0.25)) * leaky_relu(softplus(w), s)) * (z * c)))),
        (118, true) => {
            grad!(tp; sum(((sqrt(abs(log(abs(w) + 0.5)) + 0.25) - (relu(x) * s)) + (leaky_relu(-w, 0.1) / (abs(tanh(-x)) + 0.5)))))
        }
        (118, false) => {
            grad!(#[nofuse] tp; sum(((sqrt(abs(log(abs(w) + 0.5)) + 0.25) - (relu(x) * s)) + (leaky_relu(-w, 0.1) / (abs(tanh(-x)) + 0.5)))))
        }
        (119, true) => grad!(tp; clamp(sum(x * (1.5 - x), -1, true), -1, 1)),
        (119, false) => grad!(#[nofuse] tp; clamp(sum(x * (1.5 - x), -1, true), -1, 1)),
        _ => panic!("no case {k}"),
    }
}
