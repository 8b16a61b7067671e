//! The example's command line, parsed by hand: `--steps N`, `--seed N`,
//! `--plot PATH`, `--save PATH`, `--load PATH`, `--export PATH`, `--bf16`,
//! `--quick`.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug, Default, PartialEq)]
pub struct Args {
    /// Training steps (default 2000).
    pub steps: Option<usize>,
    /// Seeds the initialisation, the batches and the sampling.
    pub seed: Option<u64>,
    /// Write the loss curves here (PNG; a temp-dir file by default).
    pub plot: Option<PathBuf>,
    /// Write the model here after training.
    pub save: Option<PathBuf>,
    /// Load the model saved here instead of training.
    pub load: Option<PathBuf>,
    /// Write the model as ONNX here (ids in, logits out).
    pub export: Option<PathBuf>,
    /// Matrix products from bf16 operands (`Tape::set_matmul_precision`).
    pub bf16: bool,
    /// A tiny model for 60 steps: the smoke test's run.
    pub quick: bool,
}

pub const USAGE: &str = "usage: char_gpt [--steps N] [--seed N] [--plot PATH] [--save PATH] [--load PATH] [--export PATH] [--bf16] [--quick]";

#[derive(Debug, PartialEq)]
pub struct UsageError(pub String);

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
            // The flags, which take no value.
            match arg.as_str() {
                "--quick" => parsed.quick = true,
                "--bf16" => parsed.bf16 = true,
                _ => (),
            }
            if matches!(arg.as_str(), "--quick" | "--bf16") {
                continue;
            }
            let mut value = |what: &str| match args.next() {
                Some(value) if !value.starts_with("--") => Ok(value),
                _ => Err(UsageError(format!("`{arg}` needs {what}"))),
            };
            let number = |text: String| text.parse().map_err(|_| UsageError(format!("`{arg} {text}`: not a number")));
            match arg.as_str() {
                "--steps" => parsed.steps = Some(number(value("a number")?)?),
                "--seed" => parsed.seed = Some(number(value("a number")?)? as u64),
                "--plot" => parsed.plot = Some(PathBuf::from(value("a file path")?)),
                "--save" => parsed.save = Some(PathBuf::from(value("a file path")?)),
                "--load" => parsed.load = Some(PathBuf::from(value("a file path")?)),
                "--export" => parsed.export = Some(PathBuf::from(value("a file path")?)),
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
    fn options_take_their_values_and_mistakes_are_explained() {
        let run = parse(&["--steps", "30", "--seed", "4", "--export", "m.onnx", "--bf16", "--quick"]).unwrap();
        assert!(run.bf16);
        assert_eq!((run.steps, run.seed, run.quick), (Some(30), Some(4), true));
        assert_eq!(run.export, Some(PathBuf::from("m.onnx")));
        assert_eq!(parse(&["--save"]).unwrap_err().0, "`--save` needs a file path");
        assert_eq!(parse(&["--steps", "x"]).unwrap_err().0, "`--steps x`: not a number");
        assert_eq!(parse(&["--lr"]).unwrap_err().0, "unknown argument `--lr`");
    }
}
