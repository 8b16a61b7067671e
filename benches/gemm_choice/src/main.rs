//! Which GEMM grad runs on. For W3's product (1024³) and the products of
//! W1 (64×784×256) and W4 (512×64×64), the median time of `c = a @ b`
//! (f32, row-major) on 1 thread and on all threads, for:
//!
//! - grad: its own GEMM, through `g_matmul` on a tape (forward only; the
//!   tape's bookkeeping is about 100 ns of a product);
//! - matrixmultiply 0.3 with its `threading` feature (`MATMUL_NUM_THREADS`);
//! - the gemm crate 0.19 (faer's; `Parallelism::Rayon`).
//!
//! Run: `cargo run --release` in this directory, on an idle machine.

use std::time::Instant;

use grad_runtime::{Rng, Tape, g_matmul, set_num_threads};

/// A row-major matrix of seeded normal values.
struct Matrix {
    rows: usize,
    cols: usize,
    data: Vec<f32>,
}

impl Matrix {
    fn normal(rng: &mut Rng, rows: usize, cols: usize) -> Matrix {
        Matrix { rows, cols, data: (0..rows * cols).map(|_| rng.normal() as f32).collect() }
    }
}

/// The median of `runs` timings of `f`, after a warm-up, in seconds.
fn median(runs: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[runs / 2]
}

fn grad(a: &Matrix, b: &Matrix, runs: usize) -> f64 {
    let mut tape = Tape::<f32>::new();
    let va = tape.constant(grad_runtime::ndarray::Array2::from_shape_vec((a.rows, a.cols), a.data.clone()).unwrap());
    let vb = tape.constant(grad_runtime::ndarray::Array2::from_shape_vec((b.rows, b.cols), b.data.clone()).unwrap());
    let mark = tape.mark();
    median(runs, || {
        let c = g_matmul(&mut tape, va, vb);
        std::hint::black_box(tape.value(c)[[0, 0]]);
        tape.reset_to(mark);
    })
}

fn matrixmultiply(a: &Matrix, b: &Matrix, c: &mut [f32], runs: usize) -> f64 {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    median(runs, || {
        // SAFETY: `a` is m×k, `b` k×n and `c` m×n, all row-major and
        // exclusively borrowed or immutable for the call; the strides
        // (row stride, column stride 1) stay inside each buffer.
        unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                n,
                1.0,
                a.data.as_ptr(),
                k as isize,
                1,
                b.data.as_ptr(),
                n as isize,
                1,
                0.0,
                c.as_mut_ptr(),
                n as isize,
                1,
            );
        }
        std::hint::black_box(c[0]);
    })
}

fn gemm_crate(a: &Matrix, b: &Matrix, c: &mut [f32], threads: usize, runs: usize) -> f64 {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let parallelism = if threads > 1 { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
    median(runs, || {
        // SAFETY: as above; `read_dst` false, so `c` is only written.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                c.as_mut_ptr(),
                1,
                n as isize,
                false,
                a.data.as_ptr(),
                1,
                k as isize,
                b.data.as_ptr(),
                1,
                n as isize,
                0.0f32,
                1.0f32,
                false,
                false,
                false,
                parallelism,
            );
        }
        std::hint::black_box(c[0]);
    })
}

/// Every shape at `threads` threads. matrixmultiply reads its thread count
/// once per process, so each count runs in a process of its own.
fn measure(threads: usize) {
    set_num_threads(threads).expect("a thread count");
    let shapes = [("W3", 1024, 1024, 1024, 20), ("W1", 64, 784, 256, 400), ("W4", 512, 64, 64, 2000)];
    for &(name, m, k, n, runs) in &shapes {
        let mut rng = Rng::new(7);
        let (a, b) = (Matrix::normal(&mut rng, m, k), Matrix::normal(&mut rng, k, n));
        let mut c = vec![0.0f32; m * n];
        let (g, mm, gc) =
            (grad(&a, &b, runs), matrixmultiply(&a, &b, &mut c, runs), gemm_crate(&a, &b, &mut c, threads, runs));
        let gflops = |seconds: f64| 2.0 * (m * k * n) as f64 / seconds / 1e9;
        let shape = format!("{name} {m}x{k}x{n}");
        println!("{shape:<17} {threads:>7}  {:>12.1}  {:>14.1}  {:>10.1}", gflops(g), gflops(mm), gflops(gc));
    }
}

fn main() {
    if let Some(threads) = std::env::args().nth(1).and_then(|a| a.parse().ok()) {
        return measure(threads);
    }
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("product           threads  grad GFLOP/s  matrixmultiply  gemm crate");
    for threads in if all > 1 { vec![1, all] } else { vec![1] } {
        let me = std::env::current_exe().expect("this program's path");
        let status = std::process::Command::new(me)
            .arg(threads.to_string())
            .env("MATMUL_NUM_THREADS", threads.to_string())
            .status()
            .expect("this program runs itself");
        assert!(status.success(), "the {threads}-thread run failed");
    }
}
