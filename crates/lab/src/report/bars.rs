//! Grouped horizontal bars (the summary table per unit), drawn with plotters' SVG backend.

use std::ops::Range;

use anyhow::Result;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::plot::*;

/// Grouped horizontal bars: one group per category (a row label on the left), one bar per
/// member.
#[derive(Debug, Clone)]
pub struct Bars {
    /// Title at the top.
    pub title: String,
    /// Value axis description, with unit.
    pub value_label: String,
    /// Category labels, top to bottom.
    pub categories: Vec<String>,
    /// The members of every group (alternatives, the paper).
    pub groups: Vec<BarGroup>,
    /// Dashed reference values (vertical lines).
    pub refs: Vec<Marker>,
    /// Force this value range.
    pub value_range: Option<(f64, f64)>,
    /// Width in pixels (the height follows from the number of bars).
    pub width: u32,
}

/// One member of every bar group (an alternative, or the paper).
#[derive(Debug, Clone)]
pub struct BarGroup {
    /// Legend text.
    pub label: String,
    /// Index into [`PALETTE`].
    pub color: usize,
    /// One value per category; `None` leaves the slot empty, marked "n/a".
    pub values: Vec<Option<f64>>,
}

impl Bars {
    /// An empty chart, 900 px wide.
    pub fn new(title: impl Into<String>, value_label: impl Into<String>) -> Self {
        Bars {
            title: title.into(),
            value_label: value_label.into(),
            categories: Vec::new(),
            groups: Vec::new(),
            refs: Vec::new(),
            value_range: None,
            width: 900,
        }
    }
}

/// A value axis whose range is fixed, used for categories: category `i` of `n` spans
/// `n - i - 1 .. n - i` (the first category on top), its tick sits in the middle.
struct CategoryAxis(usize);

impl Ranged for CategoryAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let frac = value / self.0.max(1) as f64;
        limit.0 + ((limit.1 - limit.0) as f64 * frac).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, _hint: H) -> Vec<f64> {
        (0..self.0).map(|i| i as f64 + 0.5).collect()
    }

    fn range(&self) -> Range<f64> {
        0.0..self.0 as f64
    }
}

/// Height of one bar, pixels.
const BAR_PX: u32 = 13;

/// Renders grouped horizontal bars as an SVG document: categories top to bottom with their
/// labels on the left, one bar per group member, one legend above.
pub fn render_bars(bars: &Bars) -> Result<String> {
    let width = bars.width.max(400);
    let has_data = bars
        .groups
        .iter()
        .any(|g| g.values.iter().flatten().any(|v| v.is_finite()));
    let n = bars.categories.len();
    let members = bars.groups.len().max(1) as u32;
    let entries: Vec<LegendEntry> = bars
        .groups
        .iter()
        .map(|g| LegendEntry {
            label: g.label.clone(),
            color: g.color,
            swatch: Swatch::Box,
        })
        .collect();
    let rows = legend_rows(&entries, width);
    let legend_h = rows.len() as u32 * LEGEND_ROW + 6;
    let plot_h = if has_data && n > 0 {
        n as u32 * (members * BAR_PX + 16) + 70
    } else {
        NOTE_HEIGHT
    };
    let height = 40 + legend_h + plot_h;
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let body = root
            .titled(&bars.title, (FONT, 24).into_font().color(&BLACK))
            .map_err(err)?;
        if n == 0 || !has_data {
            draw_note(&body, "no data: nothing was measured for this chart")?;
        } else {
            let (legend, rest) = body.split_vertically(legend_h);
            draw_legend(&legend, &rows)?;
            draw_bars(&rest, bars)?;
        }
        root.present().map_err(err)?;
    }
    Ok(buf)
}

fn draw_bars<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, bars: &Bars) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let n = bars.categories.len();
    let (v_lo, v_hi) = match bars.value_range {
        Some((lo, hi)) if lo.is_finite() && hi.is_finite() && lo < hi => (lo, hi),
        _ => {
            let (lo, hi) = bars
                .groups
                .iter()
                .flat_map(|g| g.values.iter().flatten().copied())
                .chain(bars.refs.iter().map(|m| m.at))
                .filter(|v| v.is_finite())
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                    (a.min(v), b.max(v))
                });
            pad_range(lo, hi, true)
        }
    };
    let longest = bars
        .categories
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(1);
    let label_px = (longest as f64 * 7.4) as u32 + 16;
    let cats = bars.categories.clone();
    let mut chart = ChartBuilder::on(area)
        .margin(8)
        .margin_right(28)
        .x_label_area_size(44)
        .y_label_area_size(label_px.clamp(60, area.dim_in_pixel().0 / 2))
        .build_cartesian_2d(v_lo..v_hi, CategoryAxis(n))
        .map_err(err)?;
    let y_fmt = move |v: &f64| {
        let from_top = n as f64 - v.floor() - 1.0;
        cats.get(from_top.max(0.0) as usize).cloned().unwrap_or_default()
    };
    let x_fmt = |v: &f64| tick(*v);
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc(&bars.value_label)
        .x_labels(10)
        .max_light_lines(0)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .bold_line_style(GRID)
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 14))
        .draw()
        .map_err(err)?;
    let members = bars.groups.len().max(1);
    let slot = 0.8 / members as f64;
    // Value labels at the bar ends, unless they would not fit (many members).
    let show_values = members <= 8;
    let base = 0.0f64.clamp(v_lo, v_hi);
    let na = TextStyle::from((FONT, 12).into_font())
        .color(&GREY)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (gi, g) in bars.groups.iter().enumerate() {
        let c = color(g.color);
        for (ci, v) in g.values.iter().enumerate().take(n) {
            let top = (n - ci) as f64 - 0.1 - gi as f64 * slot;
            let bottom = top - slot * 0.88;
            match v.filter(|v| v.is_finite()) {
                Some(v) => {
                    let shown = v.clamp(v_lo, v_hi);
                    chart
                        .draw_series(std::iter::once(Rectangle::new(
                            [(base, bottom), (shown, top)],
                            c.filled(),
                        )))
                        .map_err(err)?;
                    if show_values {
                        chart
                            .plotting_area()
                            .draw(&Text::new(
                                format!(" {}", tick(v)),
                                (shown, (top + bottom) / 2.0),
                                na.clone(),
                            ))
                            .map_err(err)?;
                    }
                }
                None => {
                    let x = base + (v_hi - v_lo) * 0.005;
                    chart
                        .plotting_area()
                        .draw(&Text::new("n/a", (x, (top + bottom) / 2.0), na.clone()))
                        .map_err(err)?;
                }
            }
        }
    }
    for m in bars.refs.iter().filter(|m| m.at.is_finite()) {
        chart
            .draw_series(DashedLineSeries::new(
                vec![(m.at, 0.0), (m.at, n as f64)],
                6,
                4,
                ShapeStyle::from(&GREY).stroke_width(1),
            ))
            .map_err(err)?;
        if let Some(label) = &m.label {
            let style = TextStyle::from((FONT, 13).into_font())
                .color(&GREY)
                .pos(Pos::new(HPos::Right, VPos::Top));
            chart
                .plotting_area()
                .draw(&Text::new(format!("{label} "), (m.at, n as f64), style))
                .map_err(err)?;
        }
    }
    Ok(())
}
