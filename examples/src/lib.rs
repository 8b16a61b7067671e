//! What the examples share: a progress display per epoch ([`Progress`]) and
//! a PNG of the training curves ([`plot_curves`]). The examples themselves
//! are `digits/`, `attention.rs` and `regression.rs` beside this folder.
//! [`gpt`] is nanoGPT's model, which `char_gpt/` trains.

/// nanoGPT's model: the file lives with the benchmarks, whose W7 trains it
/// (and which build it against older revisions of the library too).
#[path = "../../benches/common/gpt.rs"]
pub mod gpt;

use std::error::Error;
use std::io::IsTerminal;
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

/// One epoch's progress: an indicatif bar with the running loss when stdout
/// is a terminal, nothing until the epoch's summary line otherwise (so CI
/// logs get one plain line per epoch, no control characters).
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar of `steps` minibatches for `epoch` of `epochs`; hidden when
    /// stdout is not a terminal or `quiet`.
    pub fn epoch(epoch: usize, epochs: usize, steps: usize, quiet: bool) -> Progress {
        if quiet || !std::io::stdout().is_terminal() {
            return Progress { bar: None };
        }
        let bar = ProgressBar::new(steps as u64);
        let template = "epoch {prefix} [{bar:30}] {pos}/{len} {msg}";
        bar.set_style(ProgressStyle::with_template(template).expect("a valid template").progress_chars("=> "));
        bar.set_prefix(format!("{epoch:>2}/{epochs}"));
        Progress { bar: Some(bar) }
    }

    /// One more minibatch done; `running_loss` is the epoch's mean so far.
    pub fn step(&self, running_loss: f64) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("loss {running_loss:.4}"));
            bar.inc(1);
        }
    }

    /// Ends the epoch with its summary: it replaces the bar on a terminal
    /// and is a plain line otherwise.
    pub fn finish(self, summary: &str) {
        match self.bar {
            Some(bar) => bar.finish_with_message(summary.to_string()),
            None => println!("{summary}"),
        }
    }
}

/// One curve of [`plot_curves`]: its values per epoch (epoch 1 first).
pub struct Curve<'a> {
    /// The panel's title and y-axis label, e.g. `"training loss"`.
    pub label: &'a str,
    pub values: &'a [f64],
}

/// The bundled DejaVu Sans (`fonts/`, Bitstream Vera license), so the
/// plots need no system font library.
const FONT: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

/// Writes a PNG with one panel per curve, side by side, each against the
/// epoch, titled `title`.
pub fn plot_curves(path: &Path, title: &str, curves: &[Curve<'_>]) -> Result<(), Box<dyn Error>> {
    plot_curves_against(path, title, "epoch", curves)
}

/// [`plot_curves`] against another x axis (`x_label`: "evaluation", "step / 100").
pub fn plot_curves_against(
    path: &Path,
    title: &str,
    x_label: &str,
    curves: &[Curve<'_>],
) -> Result<(), Box<dyn Error>> {
    // Registering twice (two plots in one process) only replaces the font.
    register_font("sans-serif", FontStyle::Normal, FONT).map_err(|_| "the bundled font does not parse")?;
    let width = 520 * curves.len().max(1) as u32;
    let root = BitMapBackend::new(path, (width, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 24))?;
    let colors = [BLUE, RED, GREEN, MAGENTA];
    for ((panel, curve), color) in
        root.split_evenly((1, curves.len().max(1))).iter().zip(curves).zip(colors.iter().cycle())
    {
        let epochs = curve.values.len().max(1);
        let (low, high) =
            curve.values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        let (low, high) = if low.is_finite() { (low, high) } else { (0.0, 1.0) };
        let pad = ((high - low) * 0.05).max(1e-6);
        let mut chart = ChartBuilder::on(panel)
            .caption(curve.label, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(1.0..epochs as f64, (low - pad)..(high + pad))?;
        chart.configure_mesh().x_desc(x_label).y_desc(curve.label).label_style(("sans-serif", 14)).draw()?;
        let points = curve.values.iter().enumerate().map(|(i, &v)| ((i + 1) as f64, v));
        chart.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?;
        chart.draw_series(points.map(|p| Circle::new(p, 3, color.filled())))?;
    }
    root.present()?;
    Ok(())
}
