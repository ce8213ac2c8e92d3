//! Plot primitives over plain `(t, y)` slices, rendered to SVG with `plotters`.
//!
//! Only the SVG backend is used: it writes text as `<text>` elements, so no font files, freetype
//! or fontconfig are needed to build or render. Non-finite points are dropped and empty or
//! degenerate ranges widened, so odd data never fails a report.

use anyhow::{anyhow, Result};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Colours for series, chosen to stay apart when printed in grey (Tableau 10, its grey last).
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(127, 127, 127),
];

/// Colour of the best-effort flow in every goodput plot.
pub const BE_COLOR: usize = 0;
/// Colour of the background (less-than-best-effort) flow in every goodput plot.
pub const BG_COLOR: usize = 1;
/// Grey, used for the paper's reference values.
pub const PAPER_COLOR: usize = 9;

const FONT: &str = "sans-serif";
const GREY: RGBColor = RGBColor(90, 90, 90);
const GRID: RGBColor = RGBColor(225, 225, 225);
/// Width of every figure, pixels.
const WIDTH: u32 = 900;

/// A colour from [`PALETTE`], wrapping around.
pub fn color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// The colour of the `index`th alternative: the palette without the paper's grey.
pub fn alt_color(index: usize) -> usize {
    index % (PALETTE.len() - 1)
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
    /// Finite points only ([`Line::new`] drops the others).
    pub points: Vec<(f64, f64)>,
    /// Index into [`PALETTE`].
    pub color: usize,
    /// How it is drawn.
    pub kind: LineKind,
}

impl Line {
    /// A line over the finite points of `points`.
    pub fn new(label: impl Into<String>, points: &[(f64, f64)], color: usize, kind: LineKind) -> Self {
        let points = points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
        Line { label: label.into(), points, color, kind }
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
}

impl Panel {
    /// An empty panel.
    pub fn new(title: impl Into<String>, y_label: impl Into<String>) -> Self {
        Panel { title: title.into(), y_label: y_label.into(), ..Panel::default() }
    }
}

/// Panels stacked vertically that share one time axis.
#[derive(Debug, Clone, Default)]
pub struct Figure {
    /// Title at the top.
    pub title: String,
    /// The panels, top to bottom.
    pub panels: Vec<Panel>,
    /// The time range, s; `None` fits the data of all panels.
    pub x_range: Option<(f64, f64)>,
}

/// `points` with every y negated (to draw a flow upside down).
pub fn negate(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    points.iter().map(|(x, y)| (*x, -*y)).collect()
}

/// A range over `values` and zero, with 5% headroom; never empty.
fn fit(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = crate::analysis::min_max(values.chain([0.0])).unwrap_or((0.0, 0.0));
    let pad = if hi > lo { (hi - lo) * 0.05 } else { 1.0 };
    (if lo < 0.0 { lo - pad } else { lo }, hi + pad)
}

/// A tick label: few digits, no trailing zeros.
pub fn tick(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e6).contains(&a) {
        return format!("{v:.1e}");
    }
    let decimals = if a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        3
    };
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { &s };
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plot: {e}")
}

/// Renders `fig` as an SVG document: the title, then the panels top to bottom, each with its own
/// legend; a lone panel is drawn taller.
pub fn render_figure(fig: &Figure) -> Result<String> {
    let panel_height = if fig.panels.len() == 1 { 420 } else { 240 };
    let height = 40 + panel_height * (fig.panels.len().max(1) as u32);
    let x_range = fig.x_range.filter(|(lo, hi)| lo < hi).unwrap_or_else(|| {
        fit(fig.panels.iter().flat_map(|p| &p.lines).flat_map(|l| l.points.iter().map(|p| p.0)))
    });
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut rest = root.titled(&fig.title, (FONT, 24).into_font().color(&BLACK)).map_err(err)?;
        for panel in &fig.panels {
            let (area, below) = rest.split_vertically(panel_height);
            draw_panel(&area, panel, x_range)?;
            rest = below;
        }
        root.present().map_err(err)?;
    }
    Ok(buf)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    (x_lo, x_hi): (f64, f64),
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let (y_lo, y_hi) = panel.y_range.filter(|(lo, hi)| lo < hi).unwrap_or_else(|| {
        let ys = panel.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
        fit(ys.chain(panel.hlines.iter().map(|m| m.at)))
    });
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
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc(&panel.y_label)
        .x_labels(12)
        .y_labels(7)
        .max_light_lines(0)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&y_fmt)
        .bold_line_style(GRID)
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 14))
        .draw()
        .map_err(err)?;

    // Markers: dashed grey across the chart, the label beside the line's start (above a
    // horizontal line at or above zero, below one under zero).
    let dashed = ShapeStyle::from(&GREY).stroke_width(1);
    let horizontal = panel.hlines.iter().map(|m| {
        let v = if m.at >= 0.0 { VPos::Bottom } else { VPos::Top };
        (m, [(x_lo, m.at), (x_hi, m.at)], v)
    });
    let vertical = panel.vlines.iter().map(|m| (m, [(m.at, y_lo), (m.at, y_hi)], VPos::Bottom));
    for (m, [from, to], v) in horizontal.chain(vertical).filter(|(m, ..)| m.at.is_finite()) {
        chart.draw_series(DashedLineSeries::new([from, to], 6, 4, dashed)).map_err(err)?;
        if let Some(label) = &m.label {
            let style = TextStyle::from((FONT, 14).into_font()).color(&GREY).pos(Pos::new(HPos::Left, v));
            chart.plotting_area().draw(&Text::new(format!(" {label}"), from, style)).map_err(err)?;
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
