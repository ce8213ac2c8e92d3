//! Plot primitives over plain `(x, y)` slices, rendered to SVG with `plotters`.
//!
//! Only the SVG backend is used: it writes text as `<text>` elements, so no font files, freetype
//! or fontconfig are needed to build or render. Everything here
//! is defensive: non-finite points are dropped, empty or degenerate ranges are widened, and a
//! panel without data is drawn as a short framed note instead of failing.

use anyhow::{anyhow, Result};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Colours for series, chosen to stay apart when printed in grey (Tableau 10).
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Colour of the best-effort flow in every goodput plot.
pub const BE_COLOR: usize = 0;
/// Colour of the background (less-than-best-effort) flow in every goodput plot.
pub const BG_COLOR: usize = 1;
/// Grey, used for the paper's reference values.
pub const PAPER_COLOR: usize = 7;

const FONT: &str = "sans-serif";
const GREY: RGBColor = RGBColor(90, 90, 90);
const GRID: RGBColor = RGBColor(225, 225, 225);
/// Width of every figure, pixels.
const WIDTH: u32 = 900;
/// Height of a panel that only carries a note.
const NOTE_HEIGHT: u32 = 64;

/// A colour from [`PALETTE`], wrapping around.
pub fn color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// How one series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// A solid line.
    Solid,
    /// A dashed line (estimates, references).
    Dashed,
    /// A line with the area between it and y = 0 shaded.
    Filled,
}

/// One named line in a panel.
#[derive(Debug, Clone)]
pub struct Line {
    /// Legend text.
    pub label: String,
    /// Finite points only (see [`Line::new`]).
    pub points: Vec<(f64, f64)>,
    /// Index into [`PALETTE`].
    pub color: usize,
    /// How it is drawn.
    pub kind: LineKind,
}

impl Line {
    /// A line over the finite points of `points`.
    pub fn new(label: impl Into<String>, points: &[(f64, f64)], color: usize, kind: LineKind) -> Self {
        Line { label: label.into(), points: finite(points), color, kind }
    }
}

/// A horizontal or vertical reference line (link capacity, phase boundary).
#[derive(Debug, Clone)]
pub struct Marker {
    /// Where (y for horizontal, x for vertical lines).
    pub at: f64,
    /// Text written beside it.
    pub label: Option<String>,
}

impl Marker {
    /// A marker at `at`.
    pub fn new(at: f64, label: Option<String>) -> Self {
        Marker { at, label }
    }
}

/// One chart of a figure.
#[derive(Debug, Clone, Default)]
pub struct Panel {
    /// Caption above the chart.
    pub title: String,
    /// Y axis description, with unit.
    pub y_label: String,
    pub lines: Vec<Line>,
    /// Dashed horizontal lines, e.g. the link capacity.
    pub hlines: Vec<Marker>,
    /// Dashed vertical lines, e.g. where the background mode starts and stops.
    pub vlines: Vec<Marker>,
    /// Print the y tick labels as absolute values (for flows drawn upside down).
    pub mirrored: bool,
    /// Force this y range instead of fitting the data.
    pub y_range: Option<(f64, f64)>,
    /// Shown instead of the chart when the panel has no data.
    pub note: Option<String>,
}

impl Panel {
    /// An empty panel.
    pub fn new(title: impl Into<String>, y_label: impl Into<String>) -> Self {
        Panel { title: title.into(), y_label: y_label.into(), ..Panel::default() }
    }

    /// Whether any line has a point to draw.
    pub fn has_data(&self) -> bool {
        self.lines.iter().any(|l| !l.points.is_empty())
    }
}

/// Panels stacked vertically that share one x axis range.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Title at the top.
    pub title: String,
    /// X axis description, with unit.
    pub x_label: String,
    /// The panels, top to bottom.
    pub panels: Vec<Panel>,
    /// The x range; `None` fits the data (and the vertical markers) of all panels.
    pub x_range: Option<(f64, f64)>,
    /// Logarithmic x axis (points with x <= 0 are dropped); ticks in k / M.
    pub log_x: bool,
}

impl Figure {
    /// An empty figure with a linear x axis fitted to the data.
    pub fn new(title: impl Into<String>, x_label: impl Into<String>) -> Self {
        Figure {
            title: title.into(),
            x_label: x_label.into(),
            panels: Vec::new(),
            x_range: None,
            log_x: false,
        }
    }
}

/// The finite points of `points`, in their order.
pub fn finite(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect()
}

/// Points of an empirical CDF of `values` (x = value, y = fraction ≤ x, 0..=1), as a staircase.
pub fn cdf_points(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mut out = Vec::with_capacity(v.len() * 2);
    for (i, x) in v.iter().enumerate() {
        out.push((*x, i as f64 / n));
        out.push((*x, (i + 1) as f64 / n));
    }
    out
}

/// `points` with every y negated (to draw a flow upside down).
pub fn negate(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    points.iter().map(|(x, y)| (*x, -*y)).collect()
}

/// A range that contains `lo..hi` and zero, is never empty, and has a little headroom.
fn pad_range(lo: f64, hi: f64) -> (f64, f64) {
    let (lo, hi) =
        if lo.is_finite() && hi.is_finite() && lo <= hi { (lo.min(0.0), hi.max(0.0)) } else { (0.0, 1.0) };
    if hi - lo < 1e-12 {
        let d = if lo.abs() > 1e-12 { lo.abs() * 0.1 } else { 1.0 };
        return (lo - d, hi + d);
    }
    let pad = (hi - lo) * 0.05;
    (if lo < 0.0 { lo - pad } else { lo }, hi + pad)
}

fn x_extent(panels: &[Panel]) -> (f64, f64) {
    let xs = panels.iter().flat_map(|p| {
        p.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)).chain(p.vlines.iter().map(|m| m.at))
    });
    match crate::analysis::min_max(xs) {
        None => (0.0, 1.0),
        Some((lo, hi)) if hi - lo < 1e-12 => (lo - 0.5, hi + 0.5),
        Some(range) => range,
    }
}

fn y_extent(panel: &Panel) -> (f64, f64) {
    if let Some((lo, hi)) = panel.y_range {
        if lo.is_finite() && hi.is_finite() && lo < hi {
            return (lo, hi);
        }
    }
    let ys = panel
        .lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .chain(panel.hlines.iter().map(|m| m.at));
    let (lo, hi) = crate::analysis::min_max(ys).unwrap_or((f64::NAN, f64::NAN));
    pad_range(lo, hi)
}

/// A tick label: few digits, no trailing zeros.
pub fn tick(v: f64) -> String {
    let a = v.abs();
    let s = if a == 0.0 {
        "0".to_string()
    } else if !(1e-3..1e6).contains(&a) {
        format!("{v:.1e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') && !s.contains('e') {
        let t = s.trim_end_matches('0').trim_end_matches('.');
        if t == "-0" {
            "0".to_string()
        } else {
            t.to_string()
        }
    } else {
        s
    }
}

/// A tick with an SI suffix: 1500 -> "1.5k", 2000000 -> "2M".
pub fn tick_si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{}G", tick(v / 1e9))
    } else if a >= 1e6 {
        format!("{}M", tick(v / 1e6))
    } else if a >= 1e3 {
        format!("{}k", tick(v / 1e3))
    } else {
        tick(v)
    }
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plot: {e}")
}

/// `fig` with x replaced by log10(x) (points at x <= 0 dropped): a log axis drawn as a linear
/// one, its ticks printed as 10^x.
fn log10_x(fig: &Figure) -> Figure {
    let mut f = fig.clone();
    let lg = |x: f64| if x > 0.0 { x.log10() } else { f64::NAN };
    for p in &mut f.panels {
        for l in &mut p.lines {
            l.points = l.points.iter().map(|(x, y)| (lg(*x), *y)).filter(|(x, _)| x.is_finite()).collect();
        }
        p.vlines.iter_mut().for_each(|m| m.at = lg(m.at));
    }
    f.x_range = fig.x_range.map(|(lo, hi)| (lg(lo), lg(hi)));
    f
}

/// Renders `fig` as an SVG document: the title, then the panels top to bottom, each with its own
/// legend. A lone panel is drawn taller; a panel without data is a short note.
pub fn render_figure(fig: &Figure) -> Result<String> {
    let fig = if fig.log_x { log10_x(fig) } else { fig.clone() };
    let data_height = if fig.panels.len() == 1 { 420 } else { 240 };
    let heights: Vec<u32> =
        fig.panels.iter().map(|p| if p.has_data() { data_height } else { NOTE_HEIGHT }).collect();
    let height = 40 + heights.iter().sum::<u32>().max(NOTE_HEIGHT);
    let x_range = match fig.x_range {
        Some((lo, hi)) if lo.is_finite() && hi.is_finite() && lo < hi => (lo, hi),
        _ => x_extent(&fig.panels),
    };
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut rest = root.titled(&fig.title, (FONT, 24).into_font().color(&BLACK)).map_err(err)?;
        if fig.panels.is_empty() {
            draw_note(&rest, "no panels: nothing was measured for this figure")?;
        }
        for (panel, h) in fig.panels.iter().zip(heights) {
            let (area, below) = rest.split_vertically(h);
            draw_panel(&area, panel, x_range, &fig.x_label, fig.log_x)?;
            rest = below;
        }
        root.present().map_err(err)?;
    }
    Ok(buf)
}

fn draw_note<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, text: &str) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let (w, h) = area.dim_in_pixel();
    area.draw(&Rectangle::new(
        [(10, 4), (w as i32 - 10, h as i32 - 4)],
        ShapeStyle::from(&RGBColor(190, 190, 190)).stroke_width(1),
    ))
    .map_err(err)?;
    let style =
        TextStyle::from((FONT, 16).into_font()).color(&GREY).pos(Pos::new(HPos::Center, VPos::Center));
    area.draw(&Text::new(text.to_string(), (w as i32 / 2, h as i32 / 2), style)).map_err(err)?;
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    (x_lo, x_hi): (f64, f64),
    x_label: &str,
    log_x: bool,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    if !panel.has_data() {
        let note = panel.note.clone().unwrap_or_else(|| "no data".to_string());
        let note = if panel.title.is_empty() || note.starts_with(&panel.title) {
            note
        } else {
            format!("{}: {note}", panel.title)
        };
        return draw_note(&area.margin(4, 4, 4, 4), &note);
    }
    let (y_lo, y_hi) = y_extent(panel);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FONT, 18))
        .margin(6)
        .margin_right(24)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
        .map_err(err)?;
    let mirrored = panel.mirrored;
    let y_fmt = move |v: &f64| if mirrored { tick(v.abs()) } else { tick(*v) };
    let x_fmt = move |v: &f64| if log_x { tick_si(10f64.powf(*v)) } else { tick(*v) };
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(&panel.y_label)
        .x_labels(12)
        .y_labels(7)
        .max_light_lines(0)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .bold_line_style(GRID)
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 14))
        .draw()
        .map_err(err)?;

    let marker_text =
        |h: HPos, v: VPos| TextStyle::from((FONT, 14).into_font()).color(&GREY).pos(Pos::new(h, v));
    let dashed = ShapeStyle::from(&GREY).stroke_width(1);
    for m in panel.hlines.iter().filter(|m| m.at.is_finite()) {
        let pts = vec![(x_lo, m.at), (x_hi, m.at)];
        chart.draw_series(DashedLineSeries::new(pts, 6, 4, dashed)).map_err(err)?;
        if let Some(label) = &m.label {
            let v = if m.at >= 0.0 { VPos::Bottom } else { VPos::Top };
            let style = marker_text(HPos::Left, v);
            let x = x_lo + (x_hi - x_lo) * 0.005;
            chart.plotting_area().draw(&Text::new(label.clone(), (x, m.at), style)).map_err(err)?;
        }
    }
    for m in panel.vlines.iter().filter(|m| m.at.is_finite()) {
        let pts = vec![(m.at, y_lo), (m.at, y_hi)];
        chart.draw_series(DashedLineSeries::new(pts, 6, 4, dashed)).map_err(err)?;
        if let Some(label) = &m.label {
            // Right of the line, or left of it near the right edge.
            let (h, text) = if m.at > x_lo + (x_hi - x_lo) * 0.85 {
                (HPos::Right, format!("{label} "))
            } else {
                (HPos::Left, format!(" {label}"))
            };
            let y = y_lo + (y_hi - y_lo) * 0.02;
            chart
                .plotting_area()
                .draw(&Text::new(text, (m.at, y), marker_text(h, VPos::Bottom)))
                .map_err(err)?;
        }
    }

    for line in panel.lines.iter().filter(|l| !l.points.is_empty()) {
        let c = color(line.color);
        let style = ShapeStyle::from(&c).stroke_width(2);
        let points = line.points.iter().copied();
        let drawn = match line.kind {
            LineKind::Solid => chart.draw_series(LineSeries::new(points, style)),
            LineKind::Dashed => chart.draw_series(DashedLineSeries::new(points, 8, 5, style)),
            LineKind::Filled => {
                let base = 0.0f64.clamp(y_lo, y_hi);
                chart.draw_series(AreaSeries::new(points, base, c.mix(0.25)).border_style(style))
            }
        };
        let legend = move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style);
        drawn.map_err(err)?.label(&line.label).legend(legend);
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(GRID)
        .label_font((FONT, 14))
        .draw()
        .map_err(err)?;
    Ok(())
}

#[cfg(test)]
#[path = "plot_tests.rs"]
pub(crate) mod tests;
