//! Which sub-expressions become fused regions, on tokens: every chain of
//! two elementwise operations or more, up to a `let` name or the result;
//! never a lone operation; never under `#[nofuse]`; at most 16 inputs
//! each; and a mistake inside a would-be region is reported as before.

use super::{errors, run};

/// The number of regions in the expansion of `input`, and each one's
/// input count (`Plan::new(name, steps, sites, leaves, params)`).
fn regions(input: &str) -> Vec<usize> {
    let text = run(input).unwrap_or_else(|e| panic!("`{input}` failed: {:?}", e.messages())).to_string();
    text.split(":: dsl :: Plan :: new (")
        .skip(1)
        .map(|rest| {
            let args = rest.split(") ;").next().expect("the plan's arguments");
            let counts: Vec<&str> = args.split(',').map(str::trim).filter(|a| !a.is_empty()).collect();
            counts[counts.len() - 2].parse().expect("an input count")
        })
        .collect()
}

#[test]
fn chains_of_two_operations_or_more_are_fused() {
    assert_eq!(regions("tape; tanh(x * 0.9 + 0.1)"), [1]);
    assert_eq!(regions("tape; relu(x @ w + b)"), [2], "the product is an input");
    assert_eq!(regions("tape; sum(sigmoid(x) * x)"), [1], "a root sum folds in; `x` read twice is one input");
    assert_eq!(regions("tape; mean(x * y)"), [2]);
    assert_eq!(regions("tape; x.relu().exp()"), [1], "method form");
    assert_eq!(regions("tape; pow(x, p) * clamp(y, lo, hi)"), [2], "scalars are parameters, not inputs");
    assert_eq!(regions("tape; let s = 0.5; (x * s + 1, x * (s * 2.0))"), [1], "`s * 2.0` is a number");
}

#[test]
fn a_lone_operation_is_its_own_op_call() {
    for input in ["tape; relu(x)", "tape; x + b", "tape; sum(x)", "tape; -x", "tape; x @ w", "tape; 2.0 * 3.0 * x"] {
        assert_eq!(regions(input), [0; 0], "{input}");
    }
    // Arithmetic on numbers is computed in Rust, not on the tape.
    assert_eq!(regions("tape; let k = 0.5 * 3.0; k * x"), [0; 0]);
}

#[test]
fn names_and_results_are_boundaries() {
    assert_eq!(regions("tape; let h = relu(x @ w + b); mse(h @ v + c, t)"), [2], "h is a node; `h @ v + c` is one op");
    assert_eq!(regions("tape; let a = x * 2.0; let b = a + 1; b"), [0; 0], "each let is one op");
    assert_eq!(regions("tape; (exp(x) + 1, exp(x) * y)"), [1, 2], "each tuple part is a result");
    assert_eq!(regions("tape; sum(x, 0) * 2.0 + 1"), [1], "an axis sum is an input");
    assert_eq!(regions("tape; relu(sum(x * y)) + 1"), [2, 1], "an inner sum starts a region of its own");
    assert_eq!(regions("tape; softmax(x * 2.0 + b, -1)"), [2]);
    assert_eq!(regions("tape; linear(x * 2.0 + b, w) - 1"), [2], "a user's call is an input");
}

#[test]
fn nofuse_records_every_operation() {
    for input in ["#[nofuse] tape; tanh(x * 0.9 + 0.1)", "#[nofuse] tp; sum(sigmoid(x) * x)"] {
        assert_eq!(regions(input), [0; 0], "{input}");
    }
    let text = run("#[nofuse] tape; relu(x + b)").unwrap().to_string();
    assert!(text.contains("g_relu") && text.contains("dsl :: add"), "{text}");
}

#[test]
fn a_region_reads_at_most_16_inputs() {
    let terms: Vec<String> = (0..40).map(|i| format!("x{i}")).collect();
    for input in [terms.join(" + "), format!("relu({})", terms.join(" * ")), format!("sum({})", terms.join(" - "))] {
        let found = regions(&format!("tape; {input}"));
        assert!(found.len() >= 3, "{input}: {found:?}");
        assert!(found.iter().all(|&n| n <= 16), "{input}: {found:?}");
    }
}

#[test]
fn mistakes_inside_a_region_read_as_before() {
    assert_eq!(errors("tape; relu(2.0) * x"), ["`x` of `relu` must be a tensor, but it is `2.0`"]);
    assert_eq!(errors("tape; pow(x, relu(x)) + 1"), ["`p` of `pow` must be a number, but `relu(x)` is not"]);
    assert!(errors("tape; exp(x + true) * 2")[0].contains("`true` is a `bool`"));
    assert!(errors("tape; (2.0 @ x) * y + 1")[0].contains("`@` multiplies tensors"));
}

#[test]
fn an_unknown_option_is_named() {
    let message = &errors("#[fuse] tape; relu(x) + 1")[0];
    assert!(message.starts_with("unknown grad! option `#[fuse]`: the one option is `#[nofuse]`"), "{message}");
    assert!(errors("#[nofuse]")[0].contains("after `#[nofuse]`, grad! needs a tape and a body"));
    assert!(errors("#[nofuse] tape")[0].contains("missing body"));
}
