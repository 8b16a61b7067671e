//! Interop with the real Python client: grad writes a nested model in f32
//! and f64, and a model with batch norm (its buffers under PyTorch's
//! `state_dict` names); Python's `safetensors` (with numpy) reads each file
//! and checks names, shapes, dtypes, every element's bits and the metadata,
//! then writes files grad loads and checks bit for bit.
//!
//! Needs `python3` with `venv`: the test makes a throwaway virtualenv in a
//! temporary directory and pip-installs `safetensors` and `numpy` there
//! (no pip cache, nothing kept). Without Python it passes with a loud
//! SKIPPED message on the terminal's stderr (not captured by the test
//! harness), so a CI log shows it was not run. With Python, a failed
//! install is a failure, not a skip.

#[path = "common/models.rs"]
mod models;
#[path = "common/python.rs"]
mod python;

use std::path::Path;
use std::process::Command;

use grad_runtime::{Float, Params, Tape};
use models::{net, scratch, snapshot};
use python::{run, say};

const TEST: &str = "python_interop";
use serde_json::{Value, json};

/// Every tensor a file of `model` holds: its parameters and its buffers.
fn named_tensors(model: &impl Params) -> Vec<(String, grad_runtime::Var)> {
    let mut named = model.named_params();
    named.extend(model.named_buffers());
    named
}

fn describe<T: Float>(tape: &Tape<T>, model: &impl Params, file: &Path, dtype: &str) -> Value {
    let tensors: serde_json::Map<String, Value> = named_tensors(model)
        .into_iter()
        .map(|(name, var)| {
            let value = tape.value(var);
            let bits: Vec<Value> = value
                .iter()
                .map(|&x| {
                    if dtype == "float32" {
                        json!((Float::to_f64(x) as f32).to_bits())
                    } else {
                        json!(Float::to_f64(x).to_bits())
                    }
                })
                .collect();
            (name, json!({ "dtype": dtype, "shape": value.shape(), "bits": bits }))
        })
        .collect();
    json!({ "file": file, "tensors": tensors, "metadata": { "writer": "grad", "case": dtype } })
}

/// A small image model with batch norm: its buffers are in the file under
/// PyTorch's `state_dict` names.
#[derive(Params)]
struct ConvBn {
    conv: grad_runtime::Var,
    bn: grad_runtime::nn::BatchNorm2d,
}

fn conv_bn(tape: &mut Tape<f32>) -> ConvBn {
    let conv = tape.param(ndarray::Array4::<f32>::from_shape_fn((3, 2, 3, 3), |(o, i, h, w)| (o + i + h * w) as f32));
    let bn = grad_runtime::nn::BatchNorm2d::new(tape, 3);
    tape.set_value(bn.running_mean, ndarray::arr1(&[0.5f32, -1.0, 2.0])).unwrap();
    tape.set_value(bn.num_batches_tracked, ndarray::arr0(7.0f32)).unwrap();
    ConvBn { conv, bn }
}

/// Loads Python's file into a fresh net and checks every element.
fn load_from_python<T: Float>(dir: &Path, case: &str) {
    let path = dir.join(format!("from_python_{case}.safetensors"));
    let mut tape = Tape::<T>::new();
    let model = net::<T>(&mut tape, 77);
    model.load(&mut tape, &path).unwrap_or_else(|e| panic!("grad could not load Python's {case} file: {e}"));
    for (name, shape, bits) in snapshot(&tape, &model) {
        let n: usize = shape.iter().product();
        let want: Vec<u64> =
            (0..n).map(|i| Float::to_f64(T::from_f64(((i % 17) as f64 - 8.0) / 8.0)).to_bits()).collect();
        assert_eq!(bits, want, "{case}: {name}");
    }
    let metadata = grad_runtime::io::read_metadata(&path).unwrap();
    assert_eq!(metadata.get("writer").map(String::as_str), Some("python"));
    say(TEST, &format!("grad loaded Python's {case} file: {} tensors, values exact", model.named_params().len()));
}

#[test]
fn python_safetensors_reads_grads_files_and_grad_reads_pythons() {
    let dir = scratch("python-interop");
    let Some(venv_python) = python::venv(TEST, &dir, &["safetensors", "numpy"]) else { return };

    // grad writes the nested model in both dtypes.
    let mut tape32 = Tape::<f32>::new();
    let net32 = net::<f32>(&mut tape32, 5);
    let file32 = dir.join("from_grad_f32.safetensors");
    net32.save_with_metadata(&tape32, &file32, &[("writer", "grad"), ("case", "float32")]).unwrap();
    let mut tape64 = Tape::<f64>::new();
    let net64 = net::<f64>(&mut tape64, 6);
    let file64 = dir.join("from_grad_f64.safetensors");
    net64.save_with_metadata(&tape64, &file64, &[("writer", "grad"), ("case", "float64")]).unwrap();
    let mut tape_bn = Tape::<f32>::new();
    let model_bn = conv_bn(&mut tape_bn);
    let file_bn = dir.join("from_grad_bn.safetensors");
    model_bn.save_with_metadata(&tape_bn, &file_bn, &[("writer", "grad"), ("case", "float32")]).unwrap();
    let expected = json!({
        "f32": describe(&tape32, &net32, &file32, "float32"),
        "f64": describe(&tape64, &net64, &file64, "float64"),
        "bn": describe(&tape_bn, &model_bn, &file_bn, "float32"),
    });
    let bn_names: Vec<String> = named_tensors(&model_bn).into_iter().map(|(name, _)| name).collect();
    assert_eq!(
        bn_names,
        ["conv", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    );
    let expected_path = dir.join("expected.json");
    std::fs::write(&expected_path, expected.to_string()).unwrap();

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/interop.py");
    let checked = run(Command::new(&venv_python).arg(script).arg(&expected_path).arg(&*dir));
    for line in String::from_utf8_lossy(&checked.stdout).lines() {
        say(TEST, line);
    }
    assert!(checked.status.success(), "the Python side failed:\n{}", String::from_utf8_lossy(&checked.stderr));

    load_from_python::<f32>(&dir, "f32");
    load_from_python::<f64>(&dir, "f64");
    // Python's file for the batch-norm model loads, buffers included.
    let mut tape = Tape::<f32>::new();
    let fresh = conv_bn(&mut tape);
    fresh.load(&mut tape, dir.join("from_python_bn.safetensors")).unwrap();
    for (name, var) in named_tensors(&fresh) {
        let want: Vec<f32> = (0..tape.value(var).len()).map(|i| ((i % 17) as f32 - 8.0) / 8.0).collect();
        assert_eq!(tape.value(var).iter().copied().collect::<Vec<_>>(), want, "bn: {name}");
    }
    say(TEST, "grad loaded Python's bn file: parameters and buffers exact");
    std::fs::remove_dir_all(&dir).unwrap();
    say(TEST, "passed");
}
