//! The lab's plots (plotters), each written as `STEM.svg` and `STEM.png` by one function
//! (`write_svg_and_png`, over the `Figure` each plot implements): the replay's mean and worst-case
//! accuracy loss against cost (one line per policy), every app's best quality over time, the tuner
//! replay's `Accuracy_C`, grouped bars, and costs against work on log-log axes. Text needs a TrueType font: the first of the usual
//! system fonts (or `$EASEML_FONT`) is used; without one the plots are drawn without text and a
//! note says so.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::replay::ReplayOutcome;
use anyhow::Context;
use plotters::coord::Shift;
use plotters::coord::combinators::LogCoord;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

const WIDTH: u32 = 1200;
const HEIGHT: u32 = 500;

/// The bottom of the loss plots' log axis.
const LOSS_FLOOR: f64 = 1e-3;

/// Line colours of the loss plots (distinct on white).
const COLORS: [RGBColor; 14] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(0, 0, 0),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(0, 0, 128),
    RGBColor(128, 0, 0),
    RGBColor(0, 128, 128),
];

fn find_font_file() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("EASEML_FONT") {
        return Some(PathBuf::from(path));
    }
    let known = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/Library/Fonts/Arial.ttf",
        "C:\\Windows\\Fonts\\arial.ttf",
    ];
    known.iter().map(PathBuf::from).find(|path| path.is_file())
}

/// Registers a font once; returns whether text can be drawn.
fn font_available() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        let Some(bytes) = find_font_file().and_then(|path| std::fs::read(path).ok()) else {
            return false;
        };
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok()
    })
}

/// One line of a loss plot: a label and its mean and worst-case loss on the plot's grid.
pub struct LossSeries<'a> {
    /// The legend text.
    pub label: String,
    /// Mean loss at every grid point.
    pub mean_loss: &'a [f64],
    /// Worst-case loss at every grid point.
    pub worst_loss: &'a [f64],
}

/// What a loss plot shows: the title's subject, the x-axis and the lines.
pub struct LossPlot<'a> {
    /// The title's subject, e.g. "delgado179 (cost-oblivious)".
    pub subject: String,
    /// Whether the x-axis is summed cost (else runs).
    pub cost_aware: bool,
    /// The x values shared by every line.
    pub grid: &'a [f64],
    /// The lines.
    pub series: Vec<LossSeries<'a>>,
}

impl<'a> LossPlot<'a> {
    /// One line per policy of a replay.
    pub fn of_outcome(outcome: &'a ReplayOutcome) -> Self {
        LossPlot {
            subject: format!(
                "{} ({}{})",
                outcome.dataset,
                if outcome.config.cost_aware {
                    "cost-aware"
                } else {
                    "cost-oblivious"
                },
                if outcome.config.parallel > 1 {
                    format!(", {} workers, x = wall-clock", outcome.config.parallel)
                } else {
                    String::new()
                }
            ),
            cost_aware: outcome.config.cost_aware,
            grid: &outcome.grid,
            series: outcome
                .curves
                .iter()
                .map(|curves| LossSeries {
                    label: curves.policy.as_str().to_owned(),
                    mean_loss: &curves.mean_loss,
                    worst_loss: &curves.worst_loss,
                })
                .collect(),
        }
    }
}

/// The series legend (white box, black border) at `position`: the same in every plot.
fn draw_legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> anyhow::Result<()> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(position)
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// A chart builder on `area` with the frame every plot has: a 15-pixel margin and, with text, the
/// caption and room for the axis labels.
fn framed_builder<'a, 'b, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    with_text: bool,
    caption: &str,
) -> ChartBuilder<'a, 'b, DB> {
    let mut builder = ChartBuilder::on(area);
    builder.margin(15);
    if with_text {
        builder
            .caption(caption, ("sans-serif", 18))
            .x_label_area_size(40)
            .y_label_area_size(55);
    }
    builder
}

/// The mesh of the line plots: with text, the axis descriptions `x_desc` and `y_desc`; without,
/// no grid lines either (nothing to read them by).
fn draw_line_mesh<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    with_text: bool,
    x_desc: &str,
    y_desc: &str,
) -> anyhow::Result<()>
where
    DB: DrawingBackend + 'a,
    X: Ranged + ValueFormatter<X::ValueType>,
    Y: Ranged + ValueFormatter<Y::ValueType>,
    X::ValueType: std::fmt::Debug,
    Y::ValueType: std::fmt::Debug,
{
    let mut mesh = chart.configure_mesh();
    if with_text {
        mesh.x_desc(x_desc).y_desc(y_desc);
    } else {
        mesh.disable_x_mesh().disable_y_mesh();
    }
    mesh.draw().map_err(|e| anyhow::anyhow!("{e}"))
}

/// Draws `points` as a line 2 pixels wide in `color`, with a legend entry `label` when given (a
/// short stroke of the same style).
fn draw_line<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    points: impl IntoIterator<Item = CT::From>,
    color: RGBAColor,
    label: Option<&str>,
) -> anyhow::Result<()>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate,
    CT::From: Clone + 'static,
{
    let series = chart
        .draw_series(LineSeries::new(points, color.stroke_width(2)))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(label) = label {
        series.label(label).legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
        });
    }
    Ok(())
}

/// How many decades the cost-aware grid must span before the loss plots' cost axis is
/// logarithmic: measured runtimes span orders of magnitude, and on a linear axis every policy's
/// descent is squeezed into the first pixels.
const LOG_COST_AXIS_DECADES: f64 = 3.0;

impl LossPlot<'_> {
    /// The cost axis' lower end when it is logarithmic (the smallest positive grid point), else
    /// `None` (runs, or costs within `LOG_COST_AXIS_DECADES` decades: linear from 0).
    fn log_axis_start(&self) -> Option<f64> {
        if !self.cost_aware {
            return None;
        }
        let smallest = self
            .grid
            .iter()
            .copied()
            .filter(|&cost| cost > 0.0)
            .fold(f64::INFINITY, f64::min);
        let largest = self.grid.last().copied().unwrap_or(0.0);
        (smallest.is_finite() && largest / smallest >= 10f64.powf(LOG_COST_AXIS_DECADES))
            .then_some(smallest)
    }

    /// Draws one panel's mesh, lines and legend (the mean loss, or the worst-case with `worst`)
    /// on `chart`, whose x-axis is linear or logarithmic; points at cost 0 are left out on a
    /// logarithmic axis (the line starts at the grid's first positive cost).
    fn draw_panel<'a, DB, X>(
        &self,
        chart: &mut ChartContext<'a, DB, Cartesian2d<X, LogCoord<f64>>>,
        worst: bool,
        with_text: bool,
        x_label: &str,
    ) -> anyhow::Result<()>
    where
        DB: DrawingBackend + 'a,
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let log_axis = self.log_axis_start().is_some();
        draw_line_mesh(
            chart,
            with_text,
            x_label,
            "accuracy loss (log scale, floor 0.001)",
        )?;
        for (index, line) in self.series.iter().enumerate() {
            let color = COLORS[index % COLORS.len()].to_rgba();
            let values = if worst {
                line.worst_loss
            } else {
                line.mean_loss
            };
            draw_line(
                chart,
                self.grid
                    .iter()
                    .copied()
                    .zip(values.iter().map(|&loss| loss.max(LOSS_FLOOR)))
                    .filter(|&(cost, _)| !log_axis || cost > 0.0),
                color,
                with_text.then_some(line.label.as_str()),
            )?;
        }
        if with_text {
            // On a logarithmic cost axis the lower left is empty (nothing is found that cheaply).
            let position = if log_axis {
                SeriesLabelPosition::LowerLeft
            } else {
                SeriesLabelPosition::UpperRight
            };
            draw_legend(chart, position)?;
        }
        Ok(())
    }
}

impl Figure for LossPlot<'_> {
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: DrawingArea<DB, Shift>,
        with_text: bool,
    ) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let plot = self;
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
        let panels = root.split_evenly((1, 2));
        let x_max = plot.grid.last().copied().unwrap_or(1.0).max(1e-9);
        let log_start = plot.log_axis_start();
        let x_label = match (plot.cost_aware, log_start.is_some()) {
            (false, _) => "runs",
            (true, false) => "cost (summed)",
            (true, true) => "cost (summed, log scale)",
        };
        for (panel_index, panel) in panels.iter().enumerate() {
            let worst = panel_index == 1;
            // Log scale: the first round takes the loss from ~0.5 to ~0.05, and the levels that tell
            // the policies apart (0.02, 0.01) would be invisible on a linear axis. Losses below the
            // floor (found the best model) are drawn at it.
            let y_max = plot
                .series
                .iter()
                .flat_map(|s| if worst { s.worst_loss } else { s.mean_loss }.iter())
                .copied()
                .fold(0.0, f64::max)
                .max(LOSS_FLOOR * 10.0)
                * 1.2;
            let title = format!(
                "{}: {} accuracy loss",
                plot.subject,
                if worst { "worst-case" } else { "mean" }
            );
            let mut builder = framed_builder(panel, with_text, &title);
            let y_range = (LOSS_FLOOR..y_max).log_scale();
            match log_start {
                Some(x_min) => {
                    let mut chart = builder
                        .build_cartesian_2d((x_min..x_max).log_scale(), y_range)
                        .map_err(|e| anyhow::anyhow!("{e}"))?;
                    plot.draw_panel(&mut chart, worst, with_text, x_label)?;
                }
                None => {
                    let mut chart = builder
                        .build_cartesian_2d(0.0..x_max, y_range)
                        .map_err(|e| anyhow::anyhow!("{e}"))?;
                    plot.draw_panel(&mut chart, worst, with_text, x_label)?;
                }
            }
        }
        root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(())
    }
}

/// Writes `loss.svg` and `loss.png` into `out`; returns notes for the user (e.g. no font found).
pub fn write_plots(outcome: &ReplayOutcome, out: &Path) -> anyhow::Result<Vec<String>> {
    write_loss_plots(&LossPlot::of_outcome(outcome), out, "loss")
}

/// Writes `STEM.svg` and `STEM.png` into `out`; returns notes for the user (e.g. no font found).
pub fn write_loss_plots(
    plot: &LossPlot<'_>,
    out: &Path,
    stem: &str,
) -> anyhow::Result<Vec<String>> {
    write_svg_and_png(plot, out, stem, (WIDTH, HEIGHT))
}

/// One app's best quality over time: `(minutes since the first run started, best quality so far)`,
/// one point per finished run.
pub struct QualityCurve {
    /// The app.
    pub app: String,
    /// The points, in time order.
    pub points: Vec<(f64, f64)>,
}

impl Figure for [QualityCurve] {
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: DrawingArea<DB, Shift>,
        with_text: bool,
    ) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let curves = self;
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
        let x_max = curves
            .iter()
            .flat_map(|curve| curve.points.iter().map(|&(x, _)| x))
            .fold(0.0, f64::max)
            .max(1e-3)
            * 1.05;
        let caption = "best model quality of every app over time";
        let mut chart = framed_builder(&root, with_text, caption)
            .build_cartesian_2d(0.0..x_max, 0.0..1.02)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        draw_line_mesh(
            &mut chart,
            with_text,
            "minutes of training",
            "best validation quality",
        )?;
        for (index, curve) in curves.iter().enumerate() {
            let color = Palette99::pick(index).to_rgba();
            // A step line: the best quality holds until the next improvement, and to the end.
            let mut steps = Vec::new();
            for (i, &(x, y)) in curve.points.iter().enumerate() {
                if i > 0 {
                    steps.push((x, curve.points[i - 1].1));
                }
                steps.push((x, y));
            }
            if let Some(&(_, y)) = curve.points.last() {
                steps.push((x_max, y));
            }
            chart
                .draw_series(
                    curve
                        .points
                        .iter()
                        .map(|&point| Circle::new(point, 3, color.filled())),
                )
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            draw_line(
                &mut chart,
                steps,
                color,
                with_text.then_some(curve.app.as_str()),
            )?;
        }
        if with_text {
            draw_legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        }
        root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(())
    }
}

/// Whether plots can have text (a font was found), and the note to show the user when not.
fn text_support() -> (bool, Vec<String>) {
    let with_text = font_available();
    let notes = if with_text {
        Vec::new()
    } else {
        vec![
            "no TrueType font found (set EASEML_FONT=/path/to/font.ttf): plots have no text"
                .to_owned(),
        ]
    };
    (with_text, notes)
}

/// A figure that draws itself on any plotters backend: [`write_svg_and_png`] draws it twice.
trait Figure {
    /// Draws the figure on `root` (text only `with_text`: a font was found).
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: DrawingArea<DB, Shift>,
        with_text: bool,
    ) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static;
}

/// Writes `STEM.svg` and `STEM.png` of `figure`, `size` pixels, into `out`; returns notes for the
/// user (e.g. no font found).
fn write_svg_and_png<F: Figure + ?Sized>(
    figure: &F,
    out: &Path,
    stem: &str,
    size: (u32, u32),
) -> anyhow::Result<Vec<String>> {
    let (with_text, notes) = text_support();
    let svg_path = out.join(format!("{stem}.svg"));
    figure
        .draw_on(
            SVGBackend::new(&svg_path, size).into_drawing_area(),
            with_text,
        )
        .with_context(|| format!("cannot draw `{}`", svg_path.display()))?;
    let png_path = out.join(format!("{stem}.png"));
    figure
        .draw_on(
            BitMapBackend::new(&png_path, size).into_drawing_area(),
            with_text,
        )
        .with_context(|| format!("cannot draw `{}`", png_path.display()))?;
    Ok(notes)
}

/// The tuner replay's figure: its subject (the title) and one line per policy.
struct AccuracyFigure<'a> {
    subject: &'a str,
    series: &'a [AccuracySeries],
}

/// Writes `quality.svg` and `quality.png` into `out`; returns notes for the user.
pub fn write_quality_plots(curves: &[QualityCurve], out: &Path) -> anyhow::Result<Vec<String>> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create `{}`", out.display()))?;
    write_svg_and_png(curves, out, "quality", (900, 500))
}

/// One line of the tuner replay's plot: a policy's mean `Accuracy_C` (Eq. 7 of TrimTuner) on a
/// grid of optimization costs.
pub struct AccuracySeries {
    /// The legend text.
    pub label: String,
    /// `(cost, mean Accuracy_C)` points.
    pub points: Vec<(f64, f64)>,
}

impl Figure for AccuracyFigure<'_> {
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: DrawingArea<DB, Shift>,
        with_text: bool,
    ) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (subject, series) = (self.subject, self.series);
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
        let x_max = series
            .iter()
            .flat_map(|s| s.points.iter().map(|&(x, _)| x))
            .fold(0.0, f64::max)
            .max(1e-9);
        let caption = format!("{subject}: Accuracy_C of the incumbent");
        let mut chart = framed_builder(&root, with_text, &caption)
            .build_cartesian_2d(0.0..x_max, 0.0..1.02)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        draw_line_mesh(
            &mut chart,
            with_text,
            "optimization cost (USD)",
            "mean Accuracy_C (Eq. 7)",
        )?;
        for (index, line) in series.iter().enumerate() {
            let color = COLORS[index % COLORS.len()].to_rgba();
            draw_line(
                &mut chart,
                line.points.iter().copied(),
                color,
                with_text.then_some(line.label.as_str()),
            )?;
        }
        if with_text {
            draw_legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        }
        root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(())
    }
}

/// Writes `accuracy_c.svg` and `accuracy_c.png` into `out`; returns notes for the user.
pub fn write_accuracy_plots(
    subject: &str,
    series: &[AccuracySeries],
    out: &Path,
) -> anyhow::Result<Vec<String>> {
    write_svg_and_png(
        &AccuracyFigure { subject, series },
        out,
        "accuracy_c",
        (900, 500),
    )
}

/// A grouped bar plot: one group per subject (a task), one bar per series (a method) in each.
pub struct BarPlot {
    /// The title.
    pub title: String,
    /// The y-axis text.
    pub y_label: String,
    /// The series (legend entries), in bar order.
    pub series: Vec<String>,
    /// The groups: a name and one value per series (`None`: no bar).
    pub groups: Vec<(String, Vec<Option<f64>>)>,
}

impl Figure for BarPlot {
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: DrawingArea<DB, Shift>,
        with_text: bool,
    ) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let plot = self;
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
        let groups = plot.groups.len().max(1);
        let values = plot.groups.iter().flat_map(|(_, v)| v.iter().flatten());
        let y_min = values.clone().copied().fold(0.0, f64::min).max(-1.0);
        let y_max = values.copied().fold(1.0, f64::max) * 1.3;
        // Group i is centred on x = i, so the mesh's integer key points label the groups.
        let mut chart = framed_builder(&root, with_text, &plot.title)
            .build_cartesian_2d(-0.5..groups as f64 - 0.5, y_min..y_max)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let names: Vec<String> = plot.groups.iter().map(|(name, _)| name.clone()).collect();
        let label = |x: &f64| {
            let index = x.round();
            if (x - index).abs() < 1e-6 && index >= 0.0 {
                names.get(index as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        let mut mesh = chart.configure_mesh();
        mesh.disable_x_mesh();
        if with_text {
            mesh.x_labels(groups + 1)
                .x_label_formatter(&label)
                .y_desc(plot.y_label.as_str());
        } else {
            mesh.disable_y_mesh();
        }
        mesh.draw().map_err(|e| anyhow::anyhow!("{e}"))?;
        let width = 0.8 / plot.series.len().max(1) as f64;
        for (index, name) in plot.series.iter().enumerate() {
            let color = COLORS[index % COLORS.len()].to_rgba();
            let bars = plot
                .groups
                .iter()
                .enumerate()
                .filter_map(|(group, (_, values))| {
                    let value = values.get(index).copied().flatten()?;
                    let left = group as f64 - 0.4 + index as f64 * width;
                    Some(Rectangle::new(
                        [(left, 0.0), (left + width * 0.92, value)],
                        color.filled(),
                    ))
                });
            let drawn = chart
                .draw_series(bars)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            if with_text {
                drawn.label(name.as_str()).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled())
                });
            }
        }
        if with_text {
            draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        }
        root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(())
    }
}

/// Writes `STEM.svg` and `STEM.png` (a grouped bar plot) into `out`; returns notes for the user.
pub fn write_bar_plots(plot: &BarPlot, out: &Path, stem: &str) -> anyhow::Result<Vec<String>> {
    let width = (200 + 110 * plot.groups.len() as u32).clamp(600, 1600);
    write_svg_and_png(plot, out, stem, (width, 500))
}

/// How costs grow with the work: a log-log plot with one line per metric, each divided by its
/// value at the smallest work so that every line starts at 1 and its slope is its growth exponent
/// (`easeml bench service --sweep`).
pub struct GrowthPlot {
    /// The title.
    pub title: String,
    /// The x-axis text (the work that grows).
    pub x_label: String,
    /// One line per metric: its legend text and its points (work, cost relative to the first).
    pub series: Vec<(String, Vec<(f64, f64)>)>,
}

impl Figure for GrowthPlot {
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: DrawingArea<DB, Shift>,
        with_text: bool,
    ) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
        let points = self.series.iter().flat_map(|(_, points)| points.iter());
        let positive = |value: &f64| value.is_finite() && *value > 0.0;
        let xs: Vec<f64> = points.clone().map(|p| p.0).filter(positive).collect();
        let ys: Vec<f64> = points.map(|p| p.1).filter(positive).collect();
        let span = |values: &[f64]| {
            let low = values.iter().copied().fold(f64::INFINITY, f64::min);
            let high = values.iter().copied().fold(0.0, f64::max);
            if low.is_finite() && high > low {
                (low / 1.5, high * 1.5)
            } else {
                (0.1, 10.0)
            }
        };
        let (x_min, x_max) = span(&xs);
        let (y_min, y_max) = span(&ys);
        let mut chart = framed_builder(&root, with_text, &self.title)
            .build_cartesian_2d((x_min..x_max).log_scale(), (y_min..y_max).log_scale())
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut mesh = chart.configure_mesh();
        if with_text {
            mesh.x_desc(self.x_label.as_str())
                .y_desc("cost relative to the smallest work");
        }
        mesh.draw().map_err(|e| anyhow::anyhow!("{e}"))?;
        for (index, (name, points)) in self.series.iter().enumerate() {
            let color = COLORS[index % COLORS.len()];
            let kept: Vec<(f64, f64)> = points
                .iter()
                .copied()
                .filter(|(x, y)| positive(x) && positive(y))
                .collect();
            let drawn = chart
                .draw_series(LineSeries::new(kept.clone(), color.stroke_width(2)))
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            if with_text {
                drawn
                    .label(name.as_str())
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color));
            }
            chart
                .draw_series(
                    kept.into_iter()
                        .map(|point| Circle::new(point, 3, color.filled())),
                )
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        if with_text {
            draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        }
        root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(())
    }
}

/// Writes `growth.svg` and `growth.png` into `out`; returns notes for the user.
pub fn write_growth_plots(plot: &GrowthPlot, out: &Path) -> anyhow::Result<Vec<String>> {
    write_svg_and_png(plot, out, "growth", (WIDTH, HEIGHT))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plot<'a>(cost_aware: bool, grid: &'a [f64], loss: &'a [f64]) -> LossPlot<'a> {
        LossPlot {
            subject: "test".into(),
            cost_aware,
            grid,
            series: vec![LossSeries {
                label: "default".into(),
                mean_loss: loss,
                worst_loss: loss,
            }],
        }
    }

    #[test]
    fn the_cost_axis_is_logarithmic_only_where_costs_span_three_decades() {
        let wide = [0.0, 1e-3, 0.5, 1.0, 2.0];
        let narrow = [0.0, 0.01, 5.0, 9.99];
        let loss = [0.5, 0.4, 0.1, 0.05, 0.01];
        assert_eq!(plot(true, &wide, &loss).log_axis_start(), Some(1e-3));
        assert_eq!(plot(true, &narrow, &loss[..4]).log_axis_start(), None);
        // Runs are never on a logarithmic axis, however many.
        assert_eq!(plot(false, &wide, &loss).log_axis_start(), None);
        assert_eq!(plot(true, &[0.0], &loss[..1]).log_axis_start(), None);
        // Both axes draw (the point at cost 0 is left out of the logarithmic one).
        for (grid, loss) in [(&wide[..], &loss[..]), (&narrow[..], &loss[..4])] {
            let mut svg = String::new();
            plot(true, grid, loss)
                .draw_on(
                    SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area(),
                    false,
                )
                .unwrap();
            assert!(svg.contains("<polyline"), "a line is drawn");
        }
    }
}
