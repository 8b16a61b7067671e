//! The example's command line, parsed by hand (no parser crate for seven
//! flags): `--epochs N`, `--seed N`, `--plot PATH`, `--save PATH`,
//! `--load PATH`, `--export PATH`, `--quick`.

use std::fmt;
use std::path::PathBuf;

/// What the command line asked for.
#[derive(Debug, Default, PartialEq)]
pub struct Args {
    /// The most epochs to train (early stopping may end sooner).
    pub epochs: Option<usize>,
    /// Seeds the initialisation, the shuffles, dropout and augmentation.
    pub seed: Option<u64>,
    /// Write the training curves here (PNG).
    pub plot: Option<PathBuf>,
    /// Write the model here after training (or after loading).
    pub save: Option<PathBuf>,
    /// Evaluate the model saved here instead of training.
    pub load: Option<PathBuf>,
    /// Write the trained model here as ONNX (pixels in, class probabilities out).
    pub export: Option<PathBuf>,
    /// One epoch, no plot unless `--plot` is given: the smoke test's run.
    pub quick: bool,
}

pub const USAGE: &str =
    "usage: digits [--epochs N] [--seed N] [--plot PATH] [--save PATH] [--load PATH] [--export PATH] [--quick]";

/// A command line the example does not understand.
#[derive(Debug, PartialEq)]
pub struct UsageError(String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\n{USAGE}", self.0)
    }
}

impl std::error::Error for UsageError {}

impl Args {
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, UsageError> {
        let mut parsed = Args::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            if arg == "--quick" {
                parsed.quick = true;
                continue;
            }
            let value = |args: &mut dyn Iterator<Item = String>, what: &str| match args.next() {
                Some(value) if !value.starts_with("--") => Ok(value),
                _ => Err(UsageError(format!("`{arg}` needs {what}"))),
            };
            let number = |text: String| text.parse().map_err(|_| UsageError(format!("`{arg} {text}`: not a number")));
            match arg.as_str() {
                "--save" => parsed.save = Some(PathBuf::from(value(&mut args, "a file path")?)),
                "--load" => parsed.load = Some(PathBuf::from(value(&mut args, "a file path")?)),
                "--export" => parsed.export = Some(PathBuf::from(value(&mut args, "a file path")?)),
                "--plot" => parsed.plot = Some(PathBuf::from(value(&mut args, "a file path")?)),
                "--epochs" => parsed.epochs = Some(number(value(&mut args, "a number")?)?),
                "--seed" => parsed.seed = Some(number(value(&mut args, "a number")?)? as u64),
                other => return Err(UsageError(format!("unknown argument `{other}`"))),
            }
        }
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, UsageError> {
        Args::parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn options_take_their_values() {
        assert_eq!(parse(&[]), Ok(Args::default()));
        let both = parse(&["--load", "a.safetensors", "--save", "b.safetensors"]).unwrap();
        assert_eq!(both.load, Some(PathBuf::from("a.safetensors")));
        assert_eq!(both.save, Some(PathBuf::from("b.safetensors")));
        assert_eq!(parse(&["--export", "m.onnx"]).unwrap().export, Some(PathBuf::from("m.onnx")));
        let run = parse(&["--epochs", "3", "--seed", "7", "--plot", "p.png", "--quick"]).unwrap();
        assert_eq!((run.epochs, run.seed, run.quick), (Some(3), Some(7), true));
        assert_eq!(run.plot, Some(PathBuf::from("p.png")));
    }

    #[test]
    fn mistakes_are_explained() {
        assert_eq!(parse(&["--save"]).unwrap_err().0, "`--save` needs a file path");
        assert_eq!(parse(&["--load", "--save", "x"]).unwrap_err().0, "`--load` needs a file path");
        assert_eq!(parse(&["--epochs", "three"]).unwrap_err().0, "`--epochs three`: not a number");
        assert_eq!(parse(&["--lr", "3"]).unwrap_err().0, "unknown argument `--lr`");
        assert!(parse(&["-h"]).unwrap_err().to_string().contains("usage: digits"));
    }
}
