//! `add_params` (every optimizer, all or nothing, coefficients by name),
//! the unregistered-parameter rule, and `load_state` refusing bad state
//! files with the optimizer left exactly as it was.

#[path = "common/models.rs"]
mod models;

use grad_runtime::{Adam, AdamW, ErrorKind, GradError, Optimizer, Params, Sgd, Tape, Var};
use models::{Net, batch, net, scratch, snapshot};

fn train<O: Optimizer<f64>>(tape: &mut Tape<f64>, model: &Net, opt: &mut O, steps: u64) -> Result<(), GradError> {
    let mark = tape.mark();
    for step in 0..steps {
        let (x, t) = batch::<f64>(step);
        let (x, t) = (tape.constant(&x), tape.constant(&t));
        let loss = model.loss(tape, x, t);
        tape.backward(loss)?;
        let result = opt.step(tape);
        tape.reset_to(mark);
        result?;
    }
    Ok(())
}

#[test]
fn add_params_gives_each_parameter_its_coefficient_by_name() {
    // Sgd without momentum: one step is w -= lr * (grad + alpha * w), so
    // alpha shows in the update of a parameter whose gradient is known.
    let mut tape = Tape::<f64>::new();
    let model = net::<f64>(&mut tape, 3);
    let mut by_name = Sgd::new(0.1);
    by_name.add_params(&tape, &model, |name| if name == "head.w" { 0.5 } else { 0.0 }).unwrap();
    let mut by_hand = Sgd::new(0.1);
    let mut twin_tape = Tape::<f64>::new();
    let twin = net::<f64>(&mut twin_tape, 3);
    for (name, var) in twin.named_params() {
        by_hand.add(&twin_tape, var, if name == "head.w" { 0.5 } else { 0.0 }).unwrap();
    }
    train(&mut tape, &model, &mut by_name, 2).unwrap();
    train(&mut twin_tape, &twin, &mut by_hand, 2).unwrap();
    assert_eq!(snapshot(&tape, &model), snapshot(&twin_tape, &twin));
}

#[test]
fn add_params_is_all_or_nothing_with_the_errors_of_add() {
    #[derive(Params)]
    struct WithConstant {
        w: Var,
        data: Var, // a constant, not a parameter
    }
    let mut tape = Tape::<f64>::new();
    let w = tape.param(ndarray::arr1(&[1.0, 2.0]));
    let data = tape.constant(ndarray::arr1(&[3.0]));
    let model = WithConstant { w, data };
    let mut opt = Adam::new(0.1);
    let err = opt.add_params(&tape, &model, |_| 0.0).unwrap_err();
    assert_eq!((err.op(), err.kind()), ("Adam::add_params", &ErrorKind::NotAParameter));
    assert!(opt.moments(w).is_none(), "nothing was registered");
    assert!(err.location().file().ends_with("optim_params.rs"));

    // A bad coefficient, by name.
    let err = opt.add_params(&tape, &w, |_| -1.0).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::InvalidArgument { name: "alpha", .. }), "{err}");
    let mut adamw = AdamW::<f64>::new(0.1);
    let err = adamw.add_params(&tape, &w, |_| f64::NAN).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::InvalidArgument { name: "weight_decay", .. }), "{err}");

    // Twice: the parameter is already there.
    opt.add_params(&tape, &w, |_| 0.0).unwrap();
    let err = opt.add_params(&tape, &w, |_| 0.0).unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::DuplicateParameter);

    // Two models whose names collide.
    #[derive(Params)]
    struct Layer {
        w: Var,
    }
    let mut sgd = Sgd::new(0.1);
    sgd.add_params(&tape, &Layer { w }, |_| 0.0).unwrap();
    let other = tape.param(ndarray::arr1(&[0.0]));
    let err = sgd.add_params(&tape, &Layer { w: other }, |_| 0.0).unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::DuplicateName { name: "w".into() });
}

#[test]
fn tied_weights_are_registered_once() {
    #[derive(Params)]
    struct Tied {
        embed: Var,
        unembed: Var,
    }
    let mut tape = Tape::<f64>::new();
    let table = tape.param(ndarray::arr1(&[1.0]));
    let mut opt = AdamW::new(0.1);
    opt.add_params(&tape, &Tied { embed: table, unembed: table }, |_| 0.0).unwrap();
    assert!(opt.moments(table).is_some());
}

#[test]
fn a_parameter_left_out_of_every_optimizer_stops_the_step() {
    let mut tape = Tape::<f64>::new();
    let model = net::<f64>(&mut tape, 1);
    #[derive(Params)]
    struct AllButHead<'a> {
        layers: &'a Vec<models::Block>,
        scales: [Var; 2],
        head_b: Var,
    }
    let partial = AllButHead { layers: &model.layers, scales: model.scales, head_b: model.head.b };
    let mut opt = Adam::new(0.01);
    opt.add_params(&tape, &partial, |_| 0.0).unwrap();
    let before = snapshot(&tape, &model);
    let err = train(&mut tape, &model, &mut opt, 1).unwrap_err();
    let head_w = format!("#{}", model.head.w.index());
    assert_eq!(err.kind(), &ErrorKind::UnregisteredParameter { name: head_w.clone() });
    assert_eq!(err.shapes(), [vec![4, 2]]);
    assert!(err.to_string().contains(&format!("parameter {head_w} received a gradient but no optimizer has it")));
    assert_eq!(snapshot(&tape, &model), before, "a refused step updates nothing");
    assert_eq!(opt.steps(), 0);

    // Split across two optimizers: fine.
    let mut sgd = Sgd::new(0.01);
    sgd.add(&tape, model.head.w, 0.0).unwrap();
    train(&mut tape, &model, &mut opt, 1).unwrap();
}

/// Two identical Adam runs of 3 steps; returns them (tape, model, optimizer).
fn trained_adam() -> (Tape<f64>, Net, Adam<f64>) {
    let mut tape = Tape::<f64>::new();
    let model = net::<f64>(&mut tape, 5);
    let mut opt = Adam::new(0.01);
    opt.add_params(&tape, &model, |_| 0.0).unwrap();
    train(&mut tape, &model, &mut opt, 3).unwrap();
    (tape, model, opt)
}

#[test]
fn bad_state_files_are_refused_and_the_optimizer_is_untouched() {
    let dir = scratch("bad-state");
    let (tape, model, opt) = trained_adam();
    let good = dir.join("adam.safetensors");
    opt.save_state(&tape, &good).unwrap();

    // State of an Sgd.
    let sgd_path = dir.join("sgd.safetensors");
    let mut sgd = Sgd::new(0.1).momentum(0.9);
    sgd.add_params(&tape, &model, |_| 0.0).unwrap();
    sgd.save_state(&tape, &sgd_path).unwrap();

    // State of a smaller model (no head): the head's state is missing.
    #[derive(Params)]
    struct NoHead<'a> {
        layers: &'a Vec<models::Block>,
        scales: [Var; 2],
    }
    let small_path = dir.join("small.safetensors");
    let mut small = Adam::new(0.01);
    small.add_params(&tape, &NoHead { layers: &model.layers, scales: model.scales }, |_| 0.0).unwrap();
    small.save_state(&tape, &small_path).unwrap();

    let truncated = dir.join("truncated.safetensors");
    let bytes = std::fs::read(&good).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() - 8]).unwrap();
    let model_file = dir.join("model.safetensors");
    model.save(&tape, &model_file).unwrap();

    type Expect = Box<dyn Fn(&ErrorKind) -> bool>;
    let cases: Vec<(&std::path::Path, Expect)> = vec![
        (&sgd_path, Box::new(|k| matches!(k, ErrorKind::StateMismatch { found, .. } if &**found == "Sgd"))),
        (&small_path, Box::new(|k| matches!(k, ErrorKind::MissingTensor { tensor, .. } if &**tensor == "head.w.step"))),
        (&truncated, Box::new(|k| matches!(k, ErrorKind::Truncated { .. }))),
        (&model_file, Box::new(|k| matches!(k, ErrorKind::StateMismatch { what, .. } if *what == "grad.format"))),
        (&dir, Box::new(|k| matches!(k, ErrorKind::Io { .. }))),
    ];
    for (path, expected) in cases {
        // A twin run that loads nothing must stay in step with the one refused.
        let (mut tape, model, mut refused) = trained_adam();
        let (mut twin_tape, twin, mut twin_opt) = trained_adam();
        let err = refused.load_state(&tape, path).unwrap_err();
        assert!(expected(err.kind()), "{}: {err}", path.display());
        assert_eq!(err.op(), "Adam::load_state");
        train(&mut tape, &model, &mut refused, 2).unwrap();
        train(&mut twin_tape, &twin, &mut twin_opt, 2).unwrap();
        assert_eq!(snapshot(&tape, &model), snapshot(&twin_tape, &twin), "{}: the optimizer changed", path.display());
    }

    // The bigger optimizer's file into the smaller: the head's state is unexpected.
    let err = small.load_state(&tape, &good).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::UnexpectedTensor { tensor, .. } if &**tensor == "head.b.exp_avg"), "{err}");

    // A wrong shape: the same names over a model whose head is wider.
    let mut wide_tape = Tape::<f64>::new();
    let mut wide = net::<f64>(&mut wide_tape, 5);
    wide.head.w = wide_tape.param(ndarray::Array2::<f64>::zeros((4, 3)));
    let mut wide_opt = Adam::new(0.01);
    wide_opt.add_params(&wide_tape, &wide, |_| 0.0).unwrap();
    let err = wide_opt.load_state(&wide_tape, &good).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::TensorShape { tensor, expected, found, .. }
            if &**tensor == "head.w.exp_avg" && expected[..] == [4, 3] && found[..] == [4, 2]),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
