//! A throwaway Python virtualenv for the tests that check grad's files
//! with the real Python libraries (safetensors, onnx, onnxruntime).
//!
//! Needs `python3` with `venv` (or `$PYTHON`). Without it the caller gets
//! `None` after a loud SKIPPED line on the terminal's stderr (past the
//! test harness's capture), so a CI log shows the test did not run. With
//! Python, a failed pip install is a failure, not a skip.
#![allow(dead_code)] // each test binary uses a different subset

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Written straight to the process's stderr, past the harness's capture.
pub fn say(test: &str, message: &str) {
    let _ = writeln!(std::io::stderr(), "{test}: {message}");
}

pub fn run(command: &mut Command) -> Output {
    command.output().unwrap_or_else(|e| panic!("could not start {command:?}: {e}"))
}

/// The Python of a new virtualenv in `dir` with `packages` installed
/// (no pip cache, nothing kept), or `None` when there is no Python.
pub fn venv(test: &str, dir: &Path, packages: &[&str]) -> Option<PathBuf> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    match Command::new(&python).arg("--version").output() {
        Ok(out) if out.status.success() => say(test, &format!("using {}", String::from_utf8_lossy(&out.stdout).trim())),
        _ => {
            say(test, &format!("SKIPPED: `{python}` not found; the test did not run"));
            println!("SKIPPED: python3 not found");
            return None;
        }
    }
    let venv = dir.join("venv");
    let made = run(Command::new(&python).args(["-m", "venv"]).arg(&venv));
    if !made.status.success() {
        say(test, &format!("SKIPPED: `{python} -m venv` failed: {}", String::from_utf8_lossy(&made.stderr).trim()));
        println!("SKIPPED: no venv");
        return None;
    }
    let venv_python =
        if cfg!(windows) { venv.join("Scripts").join("python.exe") } else { venv.join("bin").join("python") };
    say(test, &format!("installing {} into a throwaway virtualenv", packages.join(", ")));
    let pip = run(Command::new(&venv_python)
        .args(["-m", "pip", "install", "--quiet", "--no-cache-dir", "--disable-pip-version-check"])
        .args(packages));
    assert!(pip.status.success(), "pip install failed:\n{}", String::from_utf8_lossy(&pip.stderr));
    Some(venv_python)
}
