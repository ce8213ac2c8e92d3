//! Tests of the SVG primitives (and helpers the report tests share).

use super::*;

/// A tiny well-formedness check: one `<svg` root, every tag closed in order, no stray `<`.
pub(crate) fn assert_svg(svg: &str) {
    if let Ok(dir) = std::env::var("SLIPSTREAM_REPORT_DUMP") {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let t = std::thread::current().name().unwrap_or("t").replace("::", "_");
        let _ = std::fs::write(format!("{dir}/{t}-{n}.svg"), svg);
    }
    let s = svg.trim_start();
    let s = s.strip_prefix("<?xml").map_or(s, |rest| rest.split_once("?>").expect("xml decl").1.trim_start());
    assert!(s.starts_with("<svg"), "does not start with <svg: {}", &s[..s.len().min(80)]);
    let mut stack: Vec<String> = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find('<') {
        let after = &rest[i + 1..];
        let end = after.find('>').expect("unterminated tag");
        let tag = &after[..end];
        assert!(!tag.contains('<'), "'<' inside a tag: {tag}");
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack.pop().unwrap_or_else(|| panic!("close </{name}> without open"));
            assert_eq!(open, name.trim(), "mismatched tags");
        } else if !tag.ends_with('/') && !tag.starts_with('!') && !tag.starts_with('?') {
            let name = tag.split_whitespace().next().unwrap_or("").to_string();
            stack.push(name);
        }
        rest = &after[end + 1..];
    }
    assert!(stack.is_empty(), "unclosed tags: {stack:?}");
    assert!(svg.trim_end().ends_with("</svg>"));
}

/// The unescaped contents of every `<text>` element.
pub(crate) fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|s| s.split_once('>').and_then(|(_, rest)| rest.split_once("</text>")))
        .map(|(t, _)| {
            t.trim()
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&apos;", "'")
                .replace("&quot;", "\"")
                .replace("&amp;", "&")
        })
        .collect()
}

fn square(lo: f64, hi: f64) -> Vec<(f64, f64)> {
    (0..180).map(|t| (t as f64, if (t / 30) % 2 == 0 { hi } else { lo })).collect()
}

#[test]
fn figure_renders_titles_legend_and_units() {
    let mut fig = Figure { title: "Goodput & <friends>".into(), ..Figure::default() };
    let mut p = Panel::new("slipstream", "goodput (Mbit/s)");
    p.mirrored = true;
    p.lines.push(Line::new("best-effort", &square(1.0, 6.0), BE_COLOR, LineKind::Filled));
    p.lines.push(Line::new("background", &negate(&square(8.0, 3.0)), BG_COLOR, LineKind::Filled));
    p.hlines.push(Marker { at: 9.41, label: Some("link 9.41".into()) });
    p.hlines.push(Marker { at: -9.41, label: None });
    p.vlines.push(Marker { at: 45.0, label: Some("LBE on".into()) });
    fig.panels.push(p);
    let svg = render_figure(&fig).unwrap();
    assert_svg(&svg);
    for needle in [
        "Goodput &amp; &lt;friends&gt;",
        "time (s)",
        "goodput (Mbit/s)",
        "best-effort",
        "background",
        "LBE on",
    ] {
        assert!(svg.contains(needle), "missing {needle}");
    }
    // Mirrored ticks: no negative tick labels.
    assert!(svg_texts(&svg).iter().all(|t| !t.starts_with('-')), "negative tick label in mirrored panel");
}

#[test]
fn degenerate_inputs_do_not_panic() {
    let mut fig = Figure { title: "t".into(), ..Figure::default() };
    let mut p = Panel::new("p", "y");
    p.lines.push(Line::new("one", &[(1.0, 1.0)], 0, LineKind::Solid));
    p.lines.push(Line::new("nan", &[(f64::NAN, 1.0), (2.0, f64::INFINITY)], 1, LineKind::Dashed));
    p.y_range = Some((5.0, 5.0));
    fig.panels.push(p);
    assert_svg(&render_figure(&fig).unwrap());
    assert_svg(&render_figure(&Figure::default()).unwrap());
}

#[test]
fn ticks() {
    assert_eq!(tick(9.41), "9.41");
    assert_eq!(tick(12.34), "12.3");
    assert_eq!(tick(-2.5), "-2.5");
    assert_eq!(tick(0.0004), "4.0e-4");
    assert_eq!(tick(-0.0), "0");
    assert_eq!(tick(120.0), "120");
    assert_eq!(tick(0.5), "0.5");
}
