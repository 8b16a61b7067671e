//! The first thread that shares out a kernel becomes the first thread of
//! grad's team and computes its share itself; every other thread (another
//! user thread, a thread of a user's own rayon pool, the first thread while
//! another thread count is set) hands its kernels to a pool and waits.
//! Whichever way a kernel ran, every value and gradient is the same bits.
//!
//! One test, in a process of its own: which thread forms the team is the
//! point, so no other test may run kernels beside it.

mod common;

use common::Rng;
use grad_runtime::*;
use ndarray::ArrayD;

/// Values and gradients of a product large enough for the pool (2^25
/// multiply-adds), a medium one (the caller and `pair.rs`'s helper, 2^20),
/// and elementwise passes over them, with the thread count as set.
fn run() -> Vec<ArrayD<f32>> {
    let mut rng = Rng::new(23);
    let mut tape = Tape::<f32>::new();
    let [a, b] = [[256, 512], [512, 256]].map(|shape| tape.param(rng.normal_array(&shape).mapv(|v| v as f32)));
    let [c, d] = [[256, 64], [64, 64]].map(|shape| tape.param(rng.normal_array(&shape).mapv(|v| v as f32)));
    let large = g_matmul(&mut tape, a, b);
    let medium = g_matmul(&mut tape, c, d);
    let loss = grad!(tape; sum(tanh(large) * large) + sum(sigmoid(medium) * medium));
    tape.backward(loss).expect("the graph is well formed");
    let mut out: Vec<ArrayD<f32>> = [large, medium, loss].iter().map(|&v| tape.value(v).to_owned()).collect();
    out.extend([a, b, c, d].iter().map(|&v| tape.grad(v).to_owned()));
    out
}

fn assert_same(expected: &[ArrayD<f32>], got: &[ArrayD<f32>], case: &str) {
    assert_eq!(expected.len(), got.len());
    for (k, (a, b)) in expected.iter().zip(got).enumerate() {
        let same = a.iter().zip(b.iter()).all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(same, "tensor {k} differs {case}");
    }
}

#[test]
fn the_first_thread_to_share_out_a_kernel_joins_the_team_and_every_thread_gets_the_same_bits() {
    set_num_threads(1).unwrap();
    let alone = run();
    assert_eq!(rayon::current_thread_index(), None, "one thread forms no team");

    // The first kernel shared out on two threads makes this thread the
    // team's first; its rayon calls now run on the team.
    set_num_threads(2).unwrap();
    assert_same(&alone, &run(), "on the team's first thread");
    assert_eq!(rayon::current_thread_index(), Some(0));
    assert_eq!(rayon::current_num_threads(), 2);

    // Another thread count: this thread hands its kernels to a pool of
    // three, then uses the team again when two are set.
    set_num_threads(3).unwrap();
    assert_same(&alone, &run(), "on a pool of three, from the team's first thread");
    set_num_threads(2).unwrap();
    assert_same(&alone, &run(), "back on the team");

    // Another thread, at the same time as this one: the shared pool.
    let other = std::thread::spawn(|| {
        let got = run();
        (got, rayon::current_thread_index())
    });
    assert_same(&alone, &run(), "on the team, beside another thread");
    let (got, index) = other.join().expect("the other thread ran");
    assert_same(&alone, &got, "on another thread");
    assert_eq!(index, None, "the other thread joins no pool");

    // A thread of a user's own rayon pool: kernels run there, not on the team.
    let users = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let got = std::thread::spawn(move || users.install(run)).join().expect("the user's pool ran");
    assert_same(&alone, &got, "inside a user's rayon pool");
    set_num_threads(0).unwrap();
}
