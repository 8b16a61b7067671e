//! The workloads of benches/README.md, each next to a hand-written baseline in
//! the same run: the same arithmetic on plain `ndarray` with the gradients
//! derived by hand (no tape, no graph, no checks). The ratio of the two
//! medians is the price of the tape. `grad` is written with `g_*` calls
//! (one node per op); `grad_fused` (W1, W2, W5) is the same workload as a
//! `grad!` block, whose elementwise chains are fused regions, and W5's
//! `memcpy` copies as many bytes as its ideal moves.
//!
//! Run: `cargo bench --bench workloads` (add a filter, e.g. `-- w1`).

use divan::counter::{BytesCount, ItemsCount};
use divan::{Bencher, black_box};
use grad_runtime::*;
use ndarray::linalg::general_mat_mul;
use ndarray::{Array1, Array2, Axis};

mod common;

use common::{Attention, Mlp, normal, w2_loss, w5_loss};

fn main() {
    divan::main();
}

fn normal2(rng: &mut Rng, rows: usize, cols: usize, scale: f32) -> Array2<f32> {
    Array2::from_shape_fn((rows, cols), |_| rng.normal() as f32 * scale)
}

/// W1: x[64,784], t[64,10]; h = relu(x@w1+b1); y = h@w2+b2; mse; backward; Adam.
mod w1_mlp_step {
    use super::*;

    #[divan::bench]
    fn grad(bencher: Bencher) {
        let mut tape = Tape::<f32>::new();
        let mut model = Mlp::new(&mut tape, 1);
        let mark = tape.mark();
        bencher.bench_local(|| {
            model.step(&mut tape);
            tape.reset_to(mark);
        });
    }

    /// The step written with `grad!`: bias and relu fused.
    #[divan::bench]
    fn grad_fused(bencher: Bencher) {
        let mut tape = Tape::<f32>::new();
        let mut model = Mlp::new(&mut tape, 1);
        let mark = tape.mark();
        bencher.bench_local(|| {
            model.step_fused(&mut tape);
            tape.reset_to(mark);
        });
    }

    /// The same step by hand: forward, hand-derived backward, Adam.
    #[divan::bench]
    fn baseline(bencher: Bencher) {
        let mut rng = Rng::new(1);
        let (x, t) = (normal2(&mut rng, 64, 784, 1.0), normal2(&mut rng, 64, 10, 1.0));
        let mut w1 = normal2(&mut rng, 784, 256, 0.05);
        let mut b1 = Array1::from_shape_fn(256, |_| rng.normal() as f32 * 0.05);
        let mut w2 = normal2(&mut rng, 256, 10, 0.05);
        let mut b2 = Array1::from_shape_fn(10, |_| rng.normal() as f32 * 0.05);
        let mut adam = HandAdam::new(&[784 * 256, 256, 256 * 10, 10]);
        let (mut z, mut y) = (Array2::zeros((64, 256)), Array2::zeros((64, 10)));
        let (mut gw1, mut gw2, mut gh) =
            (Array2::zeros((784, 256)), Array2::zeros((256, 10)), Array2::zeros((64, 256)));
        bencher.bench_local(|| {
            general_mat_mul(1.0, &x, &w1, 0.0, &mut z);
            z += &b1;
            z.mapv_inplace(|v| v.max(0.0));
            general_mat_mul(1.0, &z, &w2, 0.0, &mut y);
            y += &b2;
            let n = y.len() as f32;
            let gy = (&y - &t) * (2.0 / n);
            let gb2 = gy.sum_axis(Axis(0));
            general_mat_mul(1.0, &z.t(), &gy, 0.0, &mut gw2);
            general_mat_mul(1.0, &gy, &w2.t(), 0.0, &mut gh);
            gh.zip_mut_with(&z, |g, &h| {
                if h <= 0.0 {
                    *g = 0.0
                }
            });
            let gb1 = gh.sum_axis(Axis(0));
            general_mat_mul(1.0, &x.t(), &gh, 0.0, &mut gw1);
            adam.step([
                (w1.as_slice_mut().unwrap(), gw1.as_slice().unwrap()),
                (b1.as_slice_mut().unwrap(), gb1.as_slice().unwrap()),
                (w2.as_slice_mut().unwrap(), gw2.as_slice().unwrap()),
                (b2.as_slice_mut().unwrap(), gb2.as_slice().unwrap()),
            ]);
        });
    }

    struct HandAdam {
        t: i32,
        m: Vec<Vec<f32>>,
        v: Vec<Vec<f32>>,
    }

    impl HandAdam {
        fn new(sizes: &[usize]) -> Self {
            HandAdam {
                t: 0,
                m: sizes.iter().map(|&n| vec![0.0; n]).collect(),
                v: sizes.iter().map(|&n| vec![0.0; n]).collect(),
            }
        }

        fn step<'a>(&mut self, params: [(&'a mut [f32], &'a [f32]); 4]) {
            self.t += 1;
            let lr_t = 1e-3 * (1.0 - 0.999f32.powi(self.t)).sqrt() / (1.0 - 0.9f32.powi(self.t));
            for ((w, g), (m, v)) in params.into_iter().zip(self.m.iter_mut().zip(&mut self.v)) {
                for (((w, &g), m), v) in w.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
                    *m = 0.9 * *m + 0.1 * g;
                    *v = 0.999 * *v + 0.001 * g * g;
                    *w -= lr_t * *m / (v.sqrt() + 1e-8);
                }
            }
        }
    }
}

/// W2: x[16]; 1000 × x = tanh(x*0.9 + 0.1); sum; backward. 3001 nodes.
mod w2_small_ops {
    use super::*;

    const NODES: usize = 3001;

    #[divan::bench]
    fn grad(bencher: Bencher) {
        let mut tape = Tape::<f32>::new();
        let x = tape.param(Array1::from_shape_fn(16, |i| i as f32 / 16.0));
        let mark = tape.mark();
        bencher.counter(ItemsCount::new(NODES)).bench_local(|| {
            let loss = w2_loss(&mut tape, x, false);
            tape.backward(loss).unwrap();
            black_box(tape.grad(x)[0]);
            tape.reset_to(mark);
        });
    }

    /// The chain written with `grad!`: each link one fused node (1001 nodes).
    #[divan::bench]
    fn grad_fused(bencher: Bencher) {
        let mut tape = Tape::<f32>::new();
        let x = tape.param(Array1::from_shape_fn(16, |i| i as f32 / 16.0));
        let mark = tape.mark();
        bencher.counter(ItemsCount::new(NODES)).bench_local(|| {
            let loss = w2_loss(&mut tape, x, true);
            tape.backward(loss).unwrap();
            black_box(tape.grad(x)[0]);
            tape.reset_to(mark);
        });
    }

    /// The same chain on plain arrays, keeping each tanh output for the
    /// backward pass, as any reverse mode must.
    #[divan::bench]
    fn baseline(bencher: Bencher) {
        let x: Vec<f32> = (0..16).map(|i| i as f32 / 16.0).collect();
        let mut outputs = vec![[0.0f32; 16]; 1000];
        bencher.counter(ItemsCount::new(NODES)).bench_local(|| {
            let mut h: [f32; 16] = x.clone().try_into().unwrap();
            for out in outputs.iter_mut() {
                for (o, v) in out.iter_mut().zip(&h) {
                    *o = (v * 0.9 + 0.1).tanh();
                }
                h = *out;
            }
            let mut g = [1.0f32; 16];
            for out in outputs.iter().rev() {
                for (g, y) in g.iter_mut().zip(out) {
                    *g *= (1.0 - y * y) * 0.9;
                }
            }
            black_box(g[0]);
        });
    }
}

/// Conv: x[32, 16, 32, 32] through a 3x3 conv to 32 channels, padding 1,
/// sum, backward (to the input and the kernel).
mod conv_3x3 {
    use super::*;

    /// 2 * N * O * OH * OW * C * 9 per product, three products (forward,
    /// to the kernel, to the input).
    const FLOPS: usize = 3 * 2 * 32 * 32 * 32 * 32 * 16 * 9;

    #[divan::bench(sample_count = 10)]
    fn grad(bencher: Bencher) {
        let mut rng = Rng::new(4);
        let mut tape = Tape::<f32>::new();
        let x = tape.param(normal(&mut rng, &[32, 16, 32, 32], 1.0));
        let k = tape.param(normal(&mut rng, &[32, 16, 3, 3], 0.1));
        let b = tape.param(normal(&mut rng, &[32], 0.1));
        let mark = tape.mark();
        bencher.counter(ItemsCount::new(FLOPS)).bench_local(|| {
            let y = g_conv2d(&mut tape, x, k, Some(b), [1, 1], [1, 1], [1, 1], 1);
            let loss = g_sum(&mut tape, y);
            tape.backward(loss).unwrap();
            tape.reset_to(mark);
        });
    }
}

/// W3: a, b [1024, 1024]; sum(a @ b); backward (three 1024³ GEMMs).
mod w3_matmul {
    use super::*;

    const FLOPS: usize = 6 * 1024 * 1024 * 1024;

    #[divan::bench(sample_count = 10)]
    fn grad(bencher: Bencher) {
        let mut rng = Rng::new(3);
        let mut tape = Tape::<f32>::new();
        let a = tape.param(normal(&mut rng, &[1024, 1024], 0.05));
        let b = tape.param(normal(&mut rng, &[1024, 1024], 0.05));
        let mark = tape.mark();
        bencher.counter(ItemsCount::new(FLOPS)).bench_local(|| {
            let c = g_matmul(&mut tape, a, b);
            let loss = g_sum(&mut tape, c);
            tape.backward(loss).unwrap();
            tape.reset_to(mark);
        });
    }

    #[divan::bench(sample_count = 10)]
    fn baseline(bencher: Bencher) {
        let mut rng = Rng::new(3);
        let (a, b) = (normal2(&mut rng, 1024, 1024, 0.05), normal2(&mut rng, 1024, 1024, 0.05));
        let (mut c, mut ga, mut gb) =
            (Array2::zeros((1024, 1024)), Array2::zeros((1024, 1024)), Array2::zeros((1024, 1024)));
        let g = Array2::<f32>::ones((1024, 1024));
        bencher.counter(ItemsCount::new(FLOPS)).bench_local(|| {
            general_mat_mul(1.0, &a, &b, 0.0, &mut c);
            general_mat_mul(1.0, &g, &b.t(), 0.0, &mut ga);
            general_mat_mul(1.0, &a.t(), &g, 0.0, &mut gb);
            black_box(c[[0, 0]] + ga[[0, 0]] + gb[[0, 0]]);
        });
    }
}

/// W4: single-head attention on x[8,64,64], forward + backward, no optimizer.
mod w4_attention {
    use super::*;

    #[divan::bench]
    fn grad(bencher: Bencher) {
        let mut tape = Tape::<f32>::new();
        let model = Attention::new(&mut tape, 4);
        let mark = tape.mark();
        bencher.bench_local(|| {
            model.step(&mut tape);
            tape.reset_to(mark);
        });
    }
}

/// W5: x[16M]; sum(sigmoid(x) * x); backward.
mod w5_bandwidth {
    use super::*;

    const N: usize = 1 << 24;
    /// Bytes an ideal fused implementation moves: read x, write the gradient, read x again.
    const BYTES: usize = 4 * N * 3;

    #[divan::bench(sample_count = 10)]
    fn grad(bencher: Bencher) {
        let mut tape = Tape::<f32>::new();
        let x = tape.param(normal(&mut Rng::new(5), &[N], 1.0));
        let mark = tape.mark();
        bencher.counter(BytesCount::new(BYTES)).bench_local(|| {
            let loss = w5_loss(&mut tape, x, false);
            tape.backward(loss).unwrap();
            tape.reset_to(mark);
        });
    }

    /// `grad!(tape; sum(sigmoid(x) * x))`: one fused node, the sum folded
    /// in: one pass over `x` forward, one backward.
    #[divan::bench(sample_count = 10)]
    fn grad_fused(bencher: Bencher) {
        let mut tape = Tape::<f32>::new();
        let x = tape.param(normal(&mut Rng::new(5), &[N], 1.0));
        let mark = tape.mark();
        bencher.counter(BytesCount::new(BYTES)).bench_local(|| {
            let loss = w5_loss(&mut tape, x, true);
            tape.backward(loss).unwrap();
            tape.reset_to(mark);
        });
    }

    /// A copy of as many bytes as the ideal moves (`BYTES`: 24M floats
    /// read and written): the floor any implementation approaches.
    #[divan::bench(sample_count = 10)]
    fn memcpy(bencher: Bencher) {
        let source = vec![1.0f32; N * 3 / 2];
        let mut target = vec![0.0f32; N * 3 / 2];
        bencher.counter(BytesCount::new(BYTES)).bench_local(|| {
            target.copy_from_slice(black_box(&source));
            black_box(target[0]);
        });
    }

    /// The fused loop: one pass for the loss, one for the gradient.
    #[divan::bench(sample_count = 10)]
    fn baseline(bencher: Bencher) {
        let x = normal(&mut Rng::new(5), &[N], 1.0).into_raw_vec_and_offset().0;
        let mut grad = vec![0.0f32; N];
        bencher.counter(BytesCount::new(BYTES)).bench_local(|| {
            let loss: f32 = x.iter().map(|&v| v / (1.0 + (-v).exp())).sum();
            for (g, &v) in grad.iter_mut().zip(&x) {
                let s = 1.0 / (1.0 + (-v).exp());
                *g = s + v * s * (1.0 - s);
            }
            black_box(loss + grad[0]);
        });
    }
}
