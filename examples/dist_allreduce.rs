//! Times one `MPI_Allreduce` (sum, f32) against the buffer size: the cost
//! `grad_runtime::dist` pays per step for a model with that many parameters.
//! Run: `cargo build --release -p grad-examples --features mpi --example dist_allreduce &&
//! mpirun -np 2 target/release/examples/dist_allreduce` (grad-runtime/src/guide/data_parallel.md).

use std::time::Instant;

use grad_runtime::dist::Dist;
use grad_runtime::dist::mpi::collective::SystemOperation;
use grad_runtime::dist::mpi::traits::{Communicator, CommunicatorCollectives};

fn main() -> Result<(), grad_runtime::GradError> {
    let dist = Dist::<f32>::init()?;
    let comm = dist.communicator();
    if dist.is_root() {
        println!("{} ranks; f32 sum allreduce, median of the repetitions", comm.size());
        println!("{:>12} {:>10} {:>12} {:>10}", "elements", "bytes", "time", "GB/s (algbw)");
    }
    for elements in [1_000usize, 10_000, 100_000, 1_000_000, 10_000_000] {
        let send = vec![1.0f32; elements];
        let mut recv = vec![0.0f32; elements];
        let reps = (20_000_000 / elements).clamp(5, 200);
        comm.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum()); // warm-up
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            comm.barrier();
            let start = Instant::now();
            comm.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
            times.push(start.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let median = times[reps / 2];
        if dist.is_root() {
            let bytes = elements * 4;
            println!("{elements:>12} {bytes:>10} {:>9.1} µs {:>10.2}", median * 1e6, bytes as f64 / median / 1e9);
        }
    }
    Ok(())
}
