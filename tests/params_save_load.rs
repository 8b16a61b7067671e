//! `#[derive(Params)]` names and `save`/`load` round trips: a nested model
//! (struct in struct, a `Vec` of layers, an `Option`, an array) written and
//! read back bit for bit in f32 and f64, atomically, with metadata.

#[path = "common/models.rs"]
mod models;

use grad_runtime::io::{self, LoadOptions};
use grad_runtime::{Float, Params, Tape, Var};
use models::{NET_NAMES, Net, files_in, net, scratch, snapshot};

#[test]
fn derived_names_follow_the_struct_paths() {
    let mut tape = Tape::<f32>::new();
    let model = net(&mut tape, 1);
    let names: Vec<String> = model.named_params().into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, NET_NAMES);
    // tape.params lists the same handles, in creation order.
    let vars: Vec<Var> = model.named_params().into_iter().map(|(_, var)| var).collect();
    assert_eq!(tape.params(), vars);
}

#[test]
fn tuple_structs_generics_and_renames() {
    #[derive(Params)]
    struct Pair<L>(L, #[params(rename = "second")] L);
    #[derive(Params)]
    struct Wrapper<'a, const N: usize> {
        #[params(rename = "weight")]
        w: Var,
        boxed: Box<[Var; N]>,
        #[params(skip)]
        _note: &'a str,
    }
    #[derive(Params)]
    struct Empty;

    let mut tape = Tape::<f64>::new();
    let mut param = || tape.param(ndarray::arr1(&[1.0]));
    let pair = Pair(
        Wrapper::<2> { w: param(), boxed: Box::new([param(), param()]), _note: "" },
        Wrapper { w: param(), boxed: Box::new([param(), param()]), _note: "" },
    );
    let names: Vec<String> = pair.named_params().into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["0.weight", "0.boxed.0", "0.boxed.1", "second.weight", "second.boxed.0", "second.boxed.1"]);
    assert!(Empty.named_params().is_empty());
}

fn round_trip<T: Float>(test: &str) {
    let dir = scratch(test);
    let path = dir.join("net.safetensors");
    let mut tape = Tape::<T>::new();
    let trained = net(&mut tape, 7);
    trained.save_with_metadata(&tape, &path, &[("epoch", "12"), ("note", "round trip")]).unwrap();
    assert_eq!(files_in(&dir), ["net.safetensors"], "no temporary file is left behind");

    let mut fresh_tape = Tape::<T>::new();
    let fresh = net(&mut fresh_tape, 8);
    assert_ne!(snapshot(&fresh_tape, &fresh), snapshot(&tape, &trained));
    fresh.load(&mut fresh_tape, &path).unwrap();
    assert_eq!(snapshot(&fresh_tape, &fresh), snapshot(&tape, &trained));

    let metadata = io::read_metadata(&path).unwrap();
    assert_eq!(metadata.get("epoch").map(String::as_str), Some("12"));
    assert_eq!(metadata.get("note").map(String::as_str), Some("round trip"));

    // Saving again replaces the file atomically, and leaves no temporary file.
    fresh.save(&fresh_tape, &path).unwrap();
    assert_eq!(files_in(&dir), ["net.safetensors"]);
    assert!(io::read_metadata(&path).unwrap().is_empty());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_nested_model_round_trips_bit_for_bit_in_f32() {
    round_trip::<f32>("round-trip-f32");
}

#[test]
fn a_nested_model_round_trips_bit_for_bit_in_f64() {
    round_trip::<f64>("round-trip-f64");
}

#[test]
fn the_file_is_plain_safetensors_named_by_path_row_major_little_endian() {
    let dir = scratch("layout");
    let path = dir.join("net.safetensors");
    let mut tape = Tape::<f32>::new();
    let model = net(&mut tape, 3);
    model.save(&tape, &path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    let data = &bytes[8 + header_len..];
    for (name, var) in model.named_params() {
        let info = &header[&name];
        assert_eq!(info["dtype"], "F32", "{name}");
        let shape: Vec<usize> =
            info["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        assert_eq!(shape, tape.value(var).shape(), "{name}");
        let offsets = info["data_offsets"].as_array().unwrap();
        let (start, end) = (offsets[0].as_u64().unwrap() as usize, offsets[1].as_u64().unwrap() as usize);
        let stored: Vec<f32> =
            data[start..end].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        let expected: Vec<f32> = tape.value(var).iter().copied().collect(); // row-major iteration
        assert_eq!(stored, expected, "{name}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn unexpected_tensors_load_when_allowed() {
    let dir = scratch("allow-unexpected");
    let path = dir.join("net.safetensors");
    let mut tape = Tape::<f32>::new();
    let full = net(&mut tape, 5);
    full.save(&tape, &path).unwrap();

    // A model that is only the head of the net: the file holds more.
    #[derive(Params)]
    struct HeadOnly {
        head: models::Dense,
    }
    let mut small_tape = Tape::<f32>::new();
    let other = net(&mut small_tape, 6);
    let head_only = HeadOnly { head: other.head };
    let err = head_only.load(&mut small_tape, &path).unwrap_err();
    assert!(matches!(err.kind(), grad_runtime::ErrorKind::UnexpectedTensor { .. }), "{err}");
    head_only.load_with(&mut small_tape, &path, LoadOptions::new().allow_unexpected(true)).unwrap();
    assert_eq!(snapshot(&small_tape, &head_only), snapshot(&tape, &HeadOnly { head: full.head }));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn tied_parameters_save_under_each_name() {
    #[derive(Params)]
    struct Tied {
        embed: Var,
        unembed: Var,
    }
    let dir = scratch("tied");
    let path = dir.join("tied.safetensors");
    let mut tape = Tape::<f64>::new();
    let table = tape.param(ndarray::arr2(&[[1.0, 2.0], [3.0, 4.0]]));
    let model = Tied { embed: table, unembed: table };
    model.save(&tape, &path).unwrap();
    model.load(&mut tape, &path).unwrap();
    assert_eq!(tape.value(table), ndarray::arr2(&[[1.0, 2.0], [3.0, 4.0]]).into_dyn());
    std::fs::remove_dir_all(dir).unwrap();
}

/// `Net` is used through a generic function, as a user would write one.
#[allow(dead_code)]
fn generic_save<T: Float>(model: &Net, tape: &Tape<T>) -> Result<(), grad_runtime::GradError> {
    model.save(tape, "unused.safetensors")
}

/// A model with buffers beside its parameters, nested.
#[derive(Params)]
struct Normed {
    w: Var,
    #[params(buffer)]
    running: Var,
    inner: Counter,
}

#[derive(Params)]
struct Counter {
    #[params(rename = "count", buffer)]
    seen: Var,
}

fn normed(tape: &mut Tape<f64>, seed: f64) -> Normed {
    Normed {
        w: tape.param(ndarray::arr1(&[seed, seed + 1.0])),
        running: tape.buffer(ndarray::arr1(&[seed * 0.5, seed * 0.25, seed * 0.125])),
        inner: Counter { seen: tape.buffer(ndarray::arr0(seed)) },
    }
}

#[test]
fn buffers_are_listed_apart_from_parameters_and_saved_and_loaded_with_them() {
    let dir = scratch("buffers_round_trip");
    let path = dir.join("normed.safetensors");
    let mut tape = Tape::<f64>::new();
    let model = normed(&mut tape, 3.0);
    let names = |named: Vec<(String, Var)>| named.into_iter().map(|(name, _)| name).collect::<Vec<_>>();
    assert_eq!(names(model.named_params()), ["w"]);
    assert_eq!(names(model.named_buffers()), ["running", "inner.count"]);
    assert_eq!(tape.params(), [model.w], "a buffer is no parameter");
    model.save(&tape, &path).unwrap();

    let mut fresh_tape = Tape::<f64>::new();
    let fresh = normed(&mut fresh_tape, -1.0);
    fresh.load(&mut fresh_tape, &path).unwrap();
    for (a, b) in [(model.w, fresh.w), (model.running, fresh.running), (model.inner.seen, fresh.inner.seen)] {
        assert_eq!(tape.value(a), fresh_tape.value(b));
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_buffer_gets_no_gradient_and_no_optimizer_takes_it() {
    let mut tape = Tape::<f64>::new();
    let model = normed(&mut tape, 2.0);
    let mut adam = grad_runtime::Adam::new(1e-2);
    adam.add_params(&tape, &model, |_| 0.0).unwrap();
    let err = adam.add(&tape, model.running, 0.0).unwrap_err();
    assert_eq!(err.kind(), &grad_runtime::ErrorKind::NotAParameter);

    let scaled = grad_runtime::g_mul(&mut tape, model.w, model.w);
    let plus = grad_runtime::g_sum(&mut tape, scaled);
    let total = grad_runtime::g_sum(&mut tape, model.running);
    let loss = grad_runtime::g_add(&mut tape, plus, total);
    tape.backward(loss).unwrap();
    assert_eq!(tape.grad(model.running), ndarray::arr1(&[0.0, 0.0, 0.0]).into_dyn());
    let before = tape.value(model.running).to_owned();
    adam.step(&mut tape).unwrap();
    assert_eq!(tape.value(model.running), before, "the step leaves buffers alone");
    assert_ne!(tape.value(model.w), ndarray::arr1(&[2.0, 3.0]).into_dyn());
}

#[test]
fn set_value_checks_the_shape_and_changes_nothing_on_error() {
    let mut tape = Tape::<f64>::new();
    let model = normed(&mut tape, 1.0);
    let before = tape.value(model.running).to_owned();
    let err = tape.set_value(model.running, ndarray::arr1(&[1.0, 2.0])).unwrap_err();
    assert_eq!(
        (err.op(), err.kind(), err.shapes()),
        ("Tape::set_value", &grad_runtime::ErrorKind::ShapeMismatch, &[vec![3], vec![2]][..])
    );
    assert_eq!(tape.value(model.running), before);
    assert!(tape.is_ok(), "a refused write does not poison the tape");

    let mark = tape.mark();
    let temp = tape.buffer(ndarray::arr1(&[0.0]));
    tape.reset_to(mark);
    assert_eq!(tape.set_value(temp, ndarray::arr1(&[1.0])).unwrap_err().kind(), &grad_runtime::ErrorKind::StaleVar);

    // An EMA update through set_value: shadow = 0.9 shadow + 0.1 w.
    let shadow = tape.buffer(tape.value(model.w).to_owned());
    tape.set_value(model.w, ndarray::arr1(&[11.0, 12.0])).unwrap();
    let ema = &tape.value(shadow) * 0.9 + &tape.value(model.w) * 0.1;
    tape.set_value(shadow, ema).unwrap();
    assert_eq!(tape.value(shadow), ndarray::arr1(&[0.9 + 1.1, 1.8 + 1.2]).into_dyn());
}

/// A safetensors file of one tensor `w` of `shape` stored as `dtype`,
/// written byte by byte (what PyTorch writes for `model.to(torch.bfloat16)`).
fn one_tensor_file(dtype: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let header = serde_json::json!({ "w": { "dtype": dtype, "shape": shape, "data_offsets": [0, data.len()] } });
    let mut header = header.to_string().into_bytes();
    while !header.len().is_multiple_of(8) {
        header.push(b' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend(header);
    file.extend_from_slice(data);
    file
}

#[test]
fn bf16_parameters_load_widened_exactly_and_f16_is_refused() {
    #[derive(Params)]
    struct One {
        w: Var,
    }
    let dir = scratch("bf16_load");
    // 1.5, -0.375, a bf16 denormal (2^-133), the largest bf16.
    let halves: [u16; 4] = [0x3fc0, 0xbec0, 0x0001, 0x7f7f];
    let data: Vec<u8> = halves.iter().flat_map(|h| h.to_le_bytes()).collect();
    let path = dir.join("bf16.safetensors");
    std::fs::write(&path, one_tensor_file("BF16", &[2, 2], &data)).unwrap();
    let expected = halves.map(|h| f32::from_bits(u32::from(h) << 16));

    let mut tape = Tape::<f32>::new();
    let model = One { w: tape.param(ndarray::Array2::<f32>::zeros((2, 2))) };
    model.load(&mut tape, &path).unwrap();
    assert_eq!(tape.value(model.w).iter().copied().collect::<Vec<_>>(), expected);
    let mut tape64 = Tape::<f64>::new();
    let model64 = One { w: tape64.param(ndarray::Array2::<f64>::zeros((2, 2))) };
    model64.load(&mut tape64, &path).unwrap();
    assert_eq!(tape64.value(model64.w).iter().copied().collect::<Vec<_>>(), expected.map(f64::from));

    let f16 = dir.join("f16.safetensors");
    std::fs::write(&f16, one_tensor_file("F16", &[2, 2], &data)).unwrap();
    let error = model.load(&mut tape, &f16).unwrap_err();
    assert!(matches!(error.kind(), grad_runtime::ErrorKind::TensorDtype { found: "F16", .. }), "{error}");
    assert_eq!(tape.value(model.w).iter().copied().collect::<Vec<_>>(), expected, "a refused load changes nothing");
}
