//! Data-parallel training under `mpirun` (feature `mpi`; `.ci/run` runs it).
//!
//! `mpi_two_ranks` launches this test binary under `mpirun -np 2` (running
//! only the ignored test `mpi_rank`, once per rank), then checks what the
//! ranks wrote: bit-identical parameters on both ranks, equal to a
//! one-process run at the whole batch up to summation order, and the fault
//! rules (a poisoned rank, an untouched parameter, drift caught by the
//! checksum). `mpirun -np 1` must equal the one-process run bit for bit.
//! Without `mpirun` on the PATH it passes with a loud SKIPPED line.

use std::path::{Path, PathBuf};
use std::process::Command;

use grad_runtime::dist::Dist;
use grad_runtime::{Adam, ErrorKind, Optimizer, Rng, Tape, Var, g_matmul, grad, init};
use ndarray::Array2;

const GLOBAL_BATCH: usize = 16;
const STEPS: usize = 20;
const FEATURES: usize = 8;
const HIDDEN: usize = 16;
const CLASSES: usize = 3;

struct Model {
    w1: Var,
    b1: Var,
    w2: Var,
    b2: Var,
    /// Registered, used by no rank: must never change.
    lonely: Var,
}

/// The model, its optimizer (Adam with clipping that bites) and the tape.
/// `seed` differs per rank: the broadcast must make them equal anyway.
fn setup(seed: u64) -> (Tape<f32>, Model, Adam<f32>) {
    let mut rng = Rng::new(seed);
    let mut tape = Tape::<f32>::new();
    let model = Model {
        w1: tape.param(init::he_normal(&mut rng, &[FEATURES, HIDDEN])),
        b1: tape.param(init::zeros(&[HIDDEN])),
        w2: tape.param(init::he_normal(&mut rng, &[HIDDEN, CLASSES])),
        b2: tape.param(init::zeros(&[CLASSES])),
        lonely: tape.param(init::normal(&mut rng, &[5], 0.0, 1.0)),
    };
    let mut opt = Adam::new(1e-2);
    for (var, l2) in [(model.w1, 1e-3), (model.b1, 0.0), (model.w2, 1e-3), (model.b2, 0.0), (model.lonely, 1e-3)] {
        opt.add(&tape, var, l2).unwrap();
    }
    opt.set_clip(0.5).unwrap();
    (tape, model, opt)
}

/// Batch `step` of the fixed data set: rows `GLOBAL_BATCH` of features and labels.
fn batch(step: usize) -> (Array2<f32>, Vec<usize>) {
    let mut rng = Rng::new(1000 + step as u64);
    let x = Array2::from_shape_fn((GLOBAL_BATCH, FEATURES), |_| rng.normal() as f32);
    let labels =
        (0..GLOBAL_BATCH).map(|i| ((x[[i, 0]] + x[[i, 1]] > 0.0) as usize) + (x[[i, 2]] > 1.0) as usize).collect();
    (x, labels)
}

fn loss_of(tape: &mut Tape<f32>, m: &Model, x: &Array2<f32>, labels: &[usize]) -> Var {
    let x = tape.constant(x);
    let Model { w1, b1, w2, b2, .. } = *m;
    grad!(tape; let h = relu(x @ w1 + b1); cross_entropy(h @ w2 + b2, labels))
}

/// The registered parameters' bits, in order.
fn bits(tape: &Tape<f32>, opt: &Adam<f32>) -> Vec<u32> {
    opt.registered().flat_map(|(_, var, _)| tape.value(var).iter().map(|x| x.to_bits()).collect::<Vec<_>>()).collect()
}

/// One process, whole batches: the reference. Returns (losses, bits).
fn train_alone() -> (Vec<f64>, Vec<u32>) {
    let (mut tape, model, mut opt) = setup(0);
    let mark = tape.mark();
    let mut losses = Vec::new();
    for step in 0..STEPS {
        let (x, labels) = batch(step);
        let loss = loss_of(&mut tape, &model, &x, &labels);
        tape.backward(loss).unwrap();
        opt.step(&mut tape).unwrap();
        losses.push(f64::from(tape.scalar(loss)));
        tape.reset_to(mark);
    }
    (losses, bits(&tape, &opt))
}

/// One rank of the job; writes `rank{r}.txt` into `$GRAD_DIST_OUT`.
#[test]
#[ignore = "run by mpi_two_ranks under mpirun"]
fn mpi_rank() {
    let out = PathBuf::from(std::env::var("GRAD_DIST_OUT").expect("GRAD_DIST_OUT"));
    let mut dist = Dist::<f32>::init().unwrap();
    let (rank, size) = (dist.rank(), dist.size());
    assert_eq!(GLOBAL_BATCH % size, 0);
    let share = GLOBAL_BATCH / size;
    // Rank 0 draws the reference's init; the others draw their own, which
    // the broadcast must replace.
    let (mut tape, model, mut opt) = setup(if rank == 0 { 0 } else { 17 + rank as u64 });
    let lonely_before = tape.value(model.lonely).to_owned();
    dist.broadcast_params(&mut tape, &opt).unwrap();
    dist.set_check_every(5);
    let mark = tape.mark();
    let mut losses = Vec::new();
    for step in 0..STEPS {
        let (x, labels) = batch(step);
        let rows = rank * share..(rank + 1) * share;
        let x = x.slice(ndarray::s![rows.clone(), ..]).to_owned();
        let loss = loss_of(&mut tape, &model, &x, &labels[rows]);
        tape.backward(loss).unwrap();
        dist.step(&mut tape, &mut opt).unwrap();
        let mut total = [f64::from(tape.scalar(loss))];
        dist.all_sum(&mut total);
        losses.push(total[0] / size as f64);
        tape.reset_to(mark);
    }
    let trained = bits(&tape, &opt);
    if rank != 0 {
        assert_ne!(tape.value(model.lonely), lonely_before, "the broadcast replaced rank {rank}'s own init");
    }

    if size >= 2 {
        faults(&mut dist, &mut tape, &model, &mut opt, &trained);
    }

    let stats = dist.stats();
    let text = format!(
        "losses {}\nbits {}\nallreduces {} bytes {}\n",
        losses.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(" "),
        trained.iter().map(|b| format!("{b:08x}")).collect::<Vec<_>>().join(" "),
        stats.allreduces,
        stats.bytes,
    );
    std::fs::write(out.join(format!("rank{rank}.txt")), text).unwrap();
}

/// The fault rules, on 2 ranks or more, after training.
fn faults(dist: &mut Dist<f32>, tape: &mut Tape<f32>, model: &Model, opt: &mut Adam<f32>, trained: &[u32]) {
    let rank = dist.rank();
    let mark = tape.mark();
    // A rank with a poisoned tape: every rank refuses, nothing changes.
    let (x, labels) = batch(0);
    let x = x.slice(ndarray::s![0..8, ..]).to_owned();
    let loss = loss_of(tape, model, &x, &labels[0..8]);
    tape.backward(loss).unwrap();
    if rank == 1 {
        let bad = tape.constant(Array2::<f32>::zeros((3, 7)));
        g_matmul(tape, bad, model.w1); // [3, 7] @ [8, 16]: poisons
    }
    let steps_before = opt.steps();
    let error = dist.step(tape, opt).unwrap_err();
    match (rank, error.kind()) {
        (1, ErrorKind::TapePoisoned { .. }) => {}
        (r, ErrorKind::RankFailed { ranks }) if r != 1 => assert_eq!(ranks, &[1]),
        (r, kind) => panic!("rank {r}: unexpected {kind:?}"),
    }
    assert_eq!(&bits(tape, opt), trained, "a refused step changed parameters");
    assert_eq!(opt.steps(), steps_before);
    tape.reset_to(mark);

    // A parameter only rank 1 uses still gets the averaged gradient, and
    // updates identically everywhere; the one no rank uses stays untouched.
    let b2_before = tape.value(model.b2).to_owned();
    let lonely_trained = tape.value(model.lonely).to_owned();
    let (b1, b2) = (model.b1, model.b2);
    let loss = if rank == 1 { grad!(tape; sum(b2 * b2)) } else { grad!(tape; sum(b1 * 0.5)) };
    tape.backward(loss).unwrap();
    dist.step(tape, opt).unwrap();
    assert_ne!(tape.value(model.b2), b2_before);
    assert_eq!(tape.value(model.lonely), lonely_trained, "no rank touched `lonely`");
    tape.reset_to(mark);
    dist.check_params(tape, opt).unwrap();

    // Drift (rank 1 steps alone) is caught by the checksum on every rank.
    let loss = grad!(tape; sum(b1 * b1));
    tape.backward(loss).unwrap();
    if rank == 1 {
        opt.step(tape).unwrap();
    }
    tape.reset_to(mark);
    let error = dist.check_params(tape, opt).unwrap_err();
    assert!(matches!(error.kind(), ErrorKind::ParamsDiverged { ranks } if ranks == &[1]), "{error}");
}

/// Whether `mpirun` runs here, with the flags this machine needs.
fn mpirun() -> Option<Command> {
    Command::new("mpirun").arg("--version").output().ok().filter(|o| o.status.success())?;
    let mut command = Command::new("mpirun");
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if status.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")) {
        command.arg("--allow-run-as-root"); // Open MPI refuses root without it (CI containers)
    }
    command.arg("--oversubscribe"); // more ranks than cores is fine for a test
    Some(command)
}

fn run_ranks(np: usize, out: &Path) -> Vec<(Vec<f64>, Vec<u32>)> {
    std::fs::create_dir_all(out).unwrap();
    let mut command = mpirun().unwrap();
    command
        .args(["-np", &np.to_string()])
        .arg(std::env::current_exe().unwrap())
        .args(["mpi_rank", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env("GRAD_DIST_OUT", out);
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "mpirun -np {np} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (0..np)
        .map(|rank| {
            let text = std::fs::read_to_string(out.join(format!("rank{rank}.txt"))).unwrap();
            let field = |name: &str| {
                let line = text.lines().find(|l| l.starts_with(name)).unwrap();
                line[name.len()..].split_whitespace().map(str::to_owned).collect::<Vec<_>>()
            };
            let losses = field("losses ").iter().map(|l| l.parse().unwrap()).collect();
            let bits = field("bits ").iter().map(|b| u32::from_str_radix(b, 16).unwrap()).collect();
            (losses, bits)
        })
        .collect()
}

#[test]
fn mpi_two_ranks() {
    if mpirun().is_none() {
        eprintln!("SKIPPED mpi_two_ranks: `mpirun` not found (apt-get install openmpi-bin libopenmpi-dev)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("grad-dist-{}", std::process::id()));
    let (alone_losses, alone_bits) = train_alone();

    let one = run_ranks(1, &dir.join("np1"));
    assert!(one[0].1 == alone_bits, "mpirun -np 1 differs from the one-process run");
    assert_eq!(one[0].0, alone_losses);

    let two = run_ranks(2, &dir.join("np2"));
    assert!(two[0].1 == two[1].1, "ranks 0 and 1 hold different parameters");
    let max_param_diff = alone_bits
        .iter()
        .zip(&two[0].1)
        .map(|(&a, &b)| (f32::from_bits(a) - f32::from_bits(b)).abs())
        .fold(0.0f32, f32::max);
    let max_loss_diff = alone_losses.iter().zip(&two[0].0).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    let differing = alone_bits.iter().zip(&two[0].1).filter(|(a, b)| a != b).count();
    eprintln!(
        "1 process at batch {GLOBAL_BATCH} vs 2 ranks at {}: {differing} of {} parameter elements differ, \
         max |diff| {max_param_diff:e}; max loss diff over {STEPS} steps {max_loss_diff:e}",
        GLOBAL_BATCH / 2,
        alone_bits.len()
    );
    assert!(max_param_diff < 1e-5, "2 ranks drifted from one process: {max_param_diff}");
    assert!(max_loss_diff < 1e-5);
    std::fs::remove_dir_all(&dir).ok();
}
