//! `load` is all or nothing: every bad file is refused with a `GradError`
//! whose kind says what is wrong and whose message names the tensor (where
//! there is one), and every parameter stays bit-identical. Hostile headers
//! (huge lengths, offsets and shapes at the limits of `usize`) are errors,
//! never panics.

#[path = "common/models.rs"]
mod models;

use std::path::Path;

use grad_runtime::{ErrorKind, GradError, Params, Tape, Var};
use models::{Dense, net, scratch, snapshot};

/// Loads `path` into a fresh `Net` on an f32 tape; asserts it fails, that
/// no parameter changed, and returns the error.
fn refused(path: &Path) -> GradError {
    let mut tape = Tape::<f32>::new();
    let model = net(&mut tape, 99);
    let before = snapshot(&tape, &model);
    let err = model.load(&mut tape, path).expect_err("the load must be refused");
    assert_eq!(snapshot(&tape, &model), before, "a refused load changed a parameter: {err}");
    assert_eq!(err.op(), "Params::load");
    assert!(err.location().file().ends_with("params_bad_files.rs"), "located at the caller: {err}");
    err
}

/// A good file of `Net` (f32), as bytes.
fn good_file(dir: &Path) -> Vec<u8> {
    let path = dir.join("good.safetensors");
    let mut tape = Tape::<f32>::new();
    net(&mut tape, 1).save(&tape, &path).unwrap();
    std::fs::read(path).unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A file with this header (spaces pad it as safetensors does) and data.
fn with_header(header: &str, data: &[u8]) -> Vec<u8> {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

#[test]
fn a_missing_parameter_is_named() {
    let dir = scratch("missing");
    let path = dir.join("partial.safetensors");
    // The same net without its head's bias.
    #[derive(Params)]
    struct Partial<'a> {
        layers: &'a Vec<models::Block>,
        head_w: Var,
        scales: [Var; 2],
    }
    let mut tape = Tape::<f32>::new();
    let full = net(&mut tape, 1);
    let partial = Partial { layers: &full.layers, head_w: full.head.w, scales: full.scales };
    partial.save(&tape, &path).unwrap();
    let err = refused(&path);
    assert!(matches!(err.kind(), ErrorKind::MissingTensor { tensor, .. } if &**tensor == "head.w"), "{err}");
    assert!(err.to_string().contains("tensor `head.w` is missing from"), "{err}");
}

#[test]
fn an_unexpected_tensor_is_named() {
    let dir = scratch("unexpected");
    let path = dir.join("extra.safetensors");
    #[derive(Params)]
    struct Extra<'a> {
        net: &'a models::Net,
        probe: &'a Dense,
    }
    let mut tape = Tape::<f32>::new();
    let full = net(&mut tape, 1);
    let probe = Dense { w: tape.param(ndarray::arr1(&[1.0f32])), b: tape.param(ndarray::arr1(&[2.0f32])) };
    // Saved with a `net.` prefix: every name is unexpected; the first (sorted) is reported.
    Extra { net: &full, probe: &probe }.save(&tape, &path).unwrap();
    let err = refused(&path);
    assert!(matches!(err.kind(), ErrorKind::MissingTensor { tensor, .. } if &**tensor == "layers.0.inner.w"), "{err}");

    // The net's own names plus one more.
    #[derive(Params)]
    struct Plus<'a> {
        #[params(rename = "layers")]
        l: &'a Vec<models::Block>,
        head: &'a Dense,
        scales: [Var; 2],
        probe: Dense,
    }
    Plus { l: &full.layers, head: &full.head, scales: full.scales, probe }.save(&tape, &path).unwrap();
    let err = refused(&path);
    assert!(matches!(err.kind(), ErrorKind::UnexpectedTensor { tensor, .. } if &**tensor == "probe.b"), "{err}");
    assert!(err.to_string().contains("holds tensor `probe.b`, which is not a parameter here"), "{err}");
}

#[test]
fn a_wrong_shape_is_named_with_both_shapes() {
    let dir = scratch("shape");
    let path = dir.join("wide.safetensors");
    let mut tape = Tape::<f32>::new();
    let mut model = net(&mut tape, 1);
    model.head.w = tape.param(ndarray::Array2::<f32>::zeros((4, 3))); // [4, 2] in Net
    model.save(&tape, &path).unwrap();
    let err = refused(&path);
    match err.kind() {
        ErrorKind::TensorShape { tensor, expected, found, .. } => {
            assert_eq!((&**tensor, &expected[..], &found[..]), ("head.w", &[4, 2][..], &[4, 3][..]));
        }
        other => panic!("wrong kind {other:?}"),
    }
    assert!(err.to_string().contains("tensor `head.w` of"), "{err}");
    assert!(err.to_string().contains("is [4, 3], but the parameter is [4, 2]"), "{err}");
}

#[test]
fn a_wrong_dtype_is_named() {
    let dir = scratch("dtype");
    let path = dir.join("double.safetensors");
    let mut tape = Tape::<f64>::new();
    net(&mut tape, 1).save(&tape, &path).unwrap();
    let err = refused(&path);
    assert!(
        matches!(err.kind(), ErrorKind::TensorDtype { tensor, expected, found, .. }
            if &**tensor == "layers.0.inner.w" && *expected == "F32" && *found == "F64"),
        "{err}"
    );
    assert!(err.to_string().contains("holds F64 elements, but the tape holds F32"), "{err}");
}

#[test]
fn a_truncated_file_names_the_tensor_cut_short() {
    let dir = scratch("truncated");
    let good = good_file(&dir);
    let data_start = 8 + u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let half_data = data_start + (good.len() - data_start) / 2;
    for keep in [good.len() - 1, good.len() - 20, half_data, data_start] {
        let path = write(&dir, "cut.safetensors", &good[..keep]);
        let err = refused(&path);
        let ErrorKind::Truncated { tensor, end, available, .. } = err.kind() else { panic!("{keep}: {err}") };
        assert!(end > available, "{err}");
        assert!(err.to_string().contains(&format!("tensor `{tensor}` ends at byte {end}")), "{err}");
    }
    // Cut inside the header: not safetensors any more, and said so.
    let path = write(&dir, "cut.safetensors", &good[..data_start / 2]);
    let err = refused(&path);
    assert!(matches!(err.kind(), ErrorKind::NotSafetensors { .. }), "{err}");
    assert!(err.to_string().contains(&format!("but only {} bytes follow", data_start / 2 - 8)), "{err}");
}

#[test]
fn a_corrupted_header_is_refused() {
    let dir = scratch("corrupted");
    let good = good_file(&dir);
    let header_len = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&good[8..8 + header_len]).unwrap();

    // A damaged byte in the JSON.
    let mut bytes = good.clone();
    bytes[8 + header.find("dtype").unwrap()] = b'#';
    let err = refused(&write(&dir, "bad-json.safetensors", &bytes));
    assert!(matches!(err.kind(), ErrorKind::NotSafetensors { .. }), "{err}");

    // An offset changed (still valid JSON, same length): the offsets no longer tile the data.
    let entry = header.find("\"head.b\"").unwrap();
    let offsets = entry + header[entry..].find("data_offsets\":[").unwrap() + "data_offsets\":[".len();
    let mut bytes = good.clone();
    let digit = &mut bytes[8 + offsets];
    *digit = if *digit == b'9' { b'8' } else { *digit + 1 };
    let err = refused(&write(&dir, "bad-offsets.safetensors", &bytes));
    assert!(matches!(err.kind(), ErrorKind::NotSafetensors { .. }), "{err}");

    // A dtype the file does not match (I8 elements are 1 byte): refused, not misread.
    let mut bytes = good.clone();
    let at = 8 + header.find("\"F32\"").unwrap();
    bytes[at..at + 5].copy_from_slice(b"\"I8\" ");
    let err = refused(&write(&dir, "bad-dtype.safetensors", &bytes));
    assert!(matches!(err.kind(), ErrorKind::NotSafetensors { .. }), "{err}");

    // Junk after the data.
    let mut bytes = good.clone();
    bytes.extend_from_slice(b"junk");
    let err = refused(&write(&dir, "trailing.safetensors", &bytes));
    assert!(matches!(err.kind(), ErrorKind::NotSafetensors { .. }), "{err}");
}

#[test]
fn files_that_are_not_safetensors_are_refused() {
    let dir = scratch("not-safetensors");
    let cases: [(&str, &[u8], &str); 5] = [
        ("empty", b"", "it is 0 bytes long"),
        ("text", b"name,value\nw,1.0\n", "but only"),
        ("png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01", "but only"),
        ("json-array", &with_header("[1, 2, 3]", b""), "not a JSON object"),
        ("binary", &[0xffu8; 64], "a header of 18446744073709551615 bytes"),
    ];
    for (name, bytes, says) in cases {
        let err = refused(&write(&dir, name, bytes));
        assert!(matches!(err.kind(), ErrorKind::NotSafetensors { .. }), "{name}: {err}");
        assert!(err.to_string().contains(says), "{name}: {err}");
    }
    let err = refused(&dir.join("no-such-file.safetensors"));
    assert!(matches!(err.kind(), ErrorKind::Io { .. }), "{err}");
}

#[test]
fn sizes_at_the_limits_of_usize_are_errors_not_panics() {
    let dir = scratch("limits");
    let max = u64::MAX;
    let headers = [
        // A shape whose element count overflows.
        format!(r#"{{"w":{{"dtype":"F32","shape":[{max},{max}],"data_offsets":[0,4]}}}}"#),
        // An end offset at the limit, far past the data.
        format!(r#"{{"w":{{"dtype":"U8","shape":[4],"data_offsets":[0,{max}]}}}}"#),
        // Offsets that chain up to the limit: their sum would overflow the reader's bounds check.
        {
            let step = max / 8;
            let entries: Vec<String> = (0..8)
                .map(|i| {
                    format!(
                        r#""t{i}":{{"dtype":"U8","shape":[{step}],"data_offsets":[{},{}]}}"#,
                        i * step,
                        (i + 1) * step
                    )
                })
                .collect();
            format!("{{{}}}", entries.join(","))
        },
        // Offsets past u64.
        r#"{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,99999999999999999999999]}}"#.to_string(),
        // A negative dim.
        r#"{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}"#.to_string(),
    ];
    for header in headers {
        let err = refused(&write(&dir, "limits.safetensors", &with_header(&header, &[0; 4])));
        assert!(
            matches!(err.kind(), ErrorKind::NotSafetensors { .. } | ErrorKind::Truncated { .. }),
            "{header}: {err}"
        );
    }
}

#[test]
fn bad_handles_and_duplicate_names_are_refused_before_reading() {
    let dir = scratch("handles");
    let path = dir.join("net.safetensors");
    let mut tape = Tape::<f32>::new();
    let model = net(&mut tape, 1);
    model.save(&tape, &path).unwrap();

    let mut other = Tape::<f32>::new();
    let err = model.load(&mut other, &path).unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::ForeignVar);
    let err = model.save(&other, dir.join("never.safetensors")).unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::ForeignVar);
    assert!(!dir.join("never.safetensors").exists(), "a refused save writes nothing");

    struct Clash(Var, Var);
    impl Params for Clash {
        fn visit_params(&self, visitor: &mut grad_runtime::ParamVisitor<'_>) {
            visitor.field("w", &self.0);
            visitor.field("w", &self.1);
        }
    }
    let clash = Clash(model.head.w, model.head.b);
    let err = clash.save(&tape, &path).unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::DuplicateName { name: "w".into() });
    // The earlier file is still whole.
    model.load(&mut tape, &path).unwrap();
}

#[test]
fn a_failed_save_leaves_the_old_file_whole() {
    let dir = scratch("failed-save");
    let path = dir.join("net.safetensors");
    let mut tape = Tape::<f32>::new();
    let model = net(&mut tape, 1);
    model.save(&tape, &path).unwrap();
    let before = std::fs::read(&path).unwrap();
    // The target is a directory: the rename fails after the temporary file was written.
    let blocked = dir.join("blocked.safetensors");
    std::fs::create_dir(&blocked).unwrap();
    std::fs::write(blocked.join("inside"), b"x").unwrap();
    let err = model.save(&tape, &blocked).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Io { .. }), "{err}");
    assert_eq!(models::files_in(&dir), ["blocked.safetensors", "net.safetensors"], "the temporary file is removed");
    assert_eq!(std::fs::read(&path).unwrap(), before);
}
