//! The example's command line, parsed by hand: `--save PATH`, `--load PATH`.

use std::fmt;
use std::path::PathBuf;

/// What the command line asked for.
#[derive(Debug, Default, PartialEq)]
pub struct Args {
    /// Write the model here after training (or after loading).
    pub save: Option<PathBuf>,
    /// Evaluate the model saved here instead of training.
    pub load: Option<PathBuf>,
}

/// A command line the example does not understand.
#[derive(Debug, PartialEq)]
pub struct UsageError(String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\nusage: digits [--save PATH] [--load PATH]", self.0)
    }
}

impl std::error::Error for UsageError {}

impl Args {
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, UsageError> {
        let mut parsed = Args::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let slot = match arg.as_str() {
                "--save" => &mut parsed.save,
                "--load" => &mut parsed.load,
                other => return Err(UsageError(format!("unknown argument `{other}`"))),
            };
            match args.next() {
                Some(path) if !path.starts_with("--") => *slot = Some(PathBuf::from(path)),
                _ => return Err(UsageError(format!("`{arg}` needs a file path"))),
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
    fn save_and_load_take_a_path() {
        assert_eq!(parse(&[]), Ok(Args::default()));
        let both = parse(&["--load", "a.safetensors", "--save", "b.safetensors"]).unwrap();
        assert_eq!(both.load, Some(PathBuf::from("a.safetensors")));
        assert_eq!(both.save, Some(PathBuf::from("b.safetensors")));
    }

    #[test]
    fn mistakes_are_explained() {
        assert_eq!(parse(&["--save"]).unwrap_err().0, "`--save` needs a file path");
        assert_eq!(parse(&["--load", "--save", "x"]).unwrap_err().0, "`--load` needs a file path");
        assert_eq!(parse(&["--epochs", "3"]).unwrap_err().0, "unknown argument `--epochs`");
        assert!(parse(&["-h"]).unwrap_err().to_string().contains("usage: digits"));
    }
}
