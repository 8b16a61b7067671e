//! Resuming training from files: 10 steps, save the model and the
//! optimizer state, load both into a fresh tape and optimizer, 10 more
//! steps; every parameter must equal 20 uninterrupted steps bit for bit.
//! For Adam, AdamW and Sgd with momentum (heavy-ball and Nesterov), in f32
//! and f64, with L2 or decay by name, clipping and a learning-rate schedule.

#[path = "common/models.rs"]
mod models;

use grad_runtime::{Adam, AdamW, Float, Optimizer, Params, Sgd, Tape};
use models::{Net, batch, net, scratch, snapshot};

/// Weights get a coefficient, biases none (by name).
fn coefficient(name: &str) -> f64 {
    if name.ends_with(".w") { 1e-3 } else { 0.0 }
}

/// Steps `from..to` of the training run on the net.
fn train<T: Float, O: Optimizer<T>>(tape: &mut Tape<T>, model: &Net, opt: &mut O, from: u64, to: u64) {
    let mark = tape.mark();
    for step in from..to {
        opt.set_lr(0.05 * (1.0 - step as f64 / 40.0)).unwrap(); // a schedule: the lr is state too
        let (x, t) = batch::<T>(step);
        let (x, t) = (tape.constant(&x), tape.constant(&t));
        let loss = model.loss(tape, x, t);
        tape.backward(loss).unwrap();
        opt.step(tape).unwrap();
        tape.reset_to(mark);
    }
}

fn resume_is_bit_identical<T: Float, O: Optimizer<T>>(test: &str, make: impl Fn() -> O) {
    let dir = scratch(test);
    let (model_path, state_path) = (dir.join("model.safetensors"), dir.join("opt.safetensors"));

    // 20 uninterrupted steps.
    let mut tape = Tape::<T>::new();
    let model = net::<T>(&mut tape, 11);
    let mut opt = make();
    opt.add_params(&tape, &model, coefficient).unwrap();
    opt.set_clip(0.5).unwrap();
    train(&mut tape, &model, &mut opt, 0, 20);
    let uninterrupted = snapshot(&tape, &model);

    // 10 steps, saved.
    let mut tape = Tape::<T>::new();
    let model = net::<T>(&mut tape, 11);
    let mut opt = make();
    opt.add_params(&tape, &model, coefficient).unwrap();
    opt.set_clip(0.5).unwrap();
    train(&mut tape, &model, &mut opt, 0, 10);
    model.save(&tape, &model_path).unwrap();
    opt.save_state(&tape, &state_path).unwrap();
    drop((tape, model, opt));

    // A fresh process, in effect: new tape (other initial values), new optimizer without clipping.
    let mut tape = Tape::<T>::new();
    let model = net::<T>(&mut tape, 12);
    let mut opt = make();
    opt.add_params(&tape, &model, coefficient).unwrap();
    model.load(&mut tape, &model_path).unwrap();
    opt.load_state(&tape, &state_path).unwrap();
    assert_eq!(opt.steps(), 10);
    train(&mut tape, &model, &mut opt, 10, 20);
    assert_eq!(snapshot(&tape, &model), uninterrupted, "{test}: resumed run differs");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn adam_resumes_bit_for_bit() {
    resume_is_bit_identical::<f32, _>("resume-adam-f32", || Adam::new(0.0));
    resume_is_bit_identical::<f64, _>("resume-adam-f64", || Adam::new(0.0).betas(0.8, 0.99));
}

#[test]
fn adamw_resumes_bit_for_bit() {
    resume_is_bit_identical::<f32, _>("resume-adamw-f32", || AdamW::new(0.0));
    resume_is_bit_identical::<f64, _>("resume-adamw-f64", || AdamW::new(0.0).eps(1e-6));
}

#[test]
fn sgd_with_momentum_resumes_bit_for_bit() {
    resume_is_bit_identical::<f32, _>("resume-sgd-f32", || Sgd::new(0.0).momentum(0.9).dampening(0.1));
    resume_is_bit_identical::<f64, _>("resume-sgd-nesterov-f64", || Sgd::new(0.0).momentum(0.9).nesterov(true));
    resume_is_bit_identical::<f32, _>("resume-sgd-plain-f32", || Sgd::new(0.0));
}

#[test]
fn the_state_restores_hyperparameters_too() {
    let dir = scratch("state-hyper");
    let path = dir.join("sgd.safetensors");
    let mut tape = Tape::<f64>::new();
    let model = net::<f64>(&mut tape, 1);
    let mut opt = Sgd::new(0.3).momentum(0.5).nesterov(true);
    opt.add_params(&tape, &model, |_| 0.0).unwrap();
    opt.set_clip(2.5).unwrap();
    train(&mut tape, &model, &mut opt, 0, 3);
    opt.save_state(&tape, &path).unwrap();

    let mut plain = Sgd::new(1.0);
    plain.add_params(&tape, &model, |_| 0.0).unwrap();
    plain.load_state(&tape, &path).unwrap();
    assert_eq!((plain.lr(), plain.clip(), plain.steps()), (opt.lr(), Some(2.5), 3));
    for (_, var) in model.named_params() {
        assert_eq!(plain.momentum_buffer(var), opt.momentum_buffer(var));
    }
    std::fs::remove_dir_all(dir).unwrap();
}
