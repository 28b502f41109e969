//! SVG plots drawn with plotters: a load-test run (rate and lateness, CPU and memory, the
//! detection CDF against its bound) and a peer comparison from `bench/peers/probe-cost.sh` results.
//!
//! Text is left to the SVG viewer (plotters without a font backend writes `<text>`
//! elements), so no font library is built.

use std::collections::BTreeMap;

use plotters::prelude::*;

use crate::report::{quantile, Report};

const WIDTH: u32 = 960;
const PANEL_HEIGHT: u32 = 320;
const TITLE: (&str, u32) = ("sans-serif", 18);
const LEFT: RGBColor = RGBColor(31, 119, 180);
const RIGHT: RGBColor = RGBColor(214, 39, 40);

/// The legend mark of a line series drawn in `color`.
fn legend_line(color: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2))
}

/// Largest value, or 1 when there is none (an axis needs a range).
fn top(values: impl Iterator<Item = f64>) -> f64 {
    let max = values.fold(0.0, f64::max);
    if max > 0.0 {
        max * 1.1
    } else {
        1.0
    }
}

/// Draws one panel: `left` on the left axis and `right` on the right one, over seconds.
fn two_axes(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    left: (&str, &[(f64, f64)]),
    right: (&str, &[(f64, f64)]),
) -> anyhow::Result<()> {
    let x_max = top(left.1.iter().chain(right.1).map(|p| p.0));
    let mut chart = ChartBuilder::on(area)
        .caption(title, TITLE)
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .right_y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..top(left.1.iter().map(|p| p.1)))?
        .set_secondary_coord(0.0..x_max, 0.0..top(right.1.iter().map(|p| p.1)));
    chart
        .configure_mesh()
        .x_desc("seconds into the measured window")
        .y_desc(left.0)
        .draw()?;
    chart.configure_secondary_axes().y_desc(right.0).draw()?;
    chart
        .draw_series(LineSeries::new(
            left.1.iter().copied(),
            LEFT.stroke_width(2),
        ))?
        .label(left.0)
        .legend(legend_line(LEFT));
    chart
        .draw_secondary_series(LineSeries::new(
            right.1.iter().copied(),
            RIGHT.stroke_width(2),
        ))?
        .label(right.0)
        .legend(legend_line(RIGHT));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Three panels of one run: probes/s with late p99, CPU with RSS, detection CDF.
pub fn run_svg(report: &Report) -> anyhow::Result<String> {
    let per_second = |values: &[f64]| -> Vec<(f64, f64)> {
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| (i as f64 + 1.0, v))
            .collect()
    };
    let s = &report.series;
    let late: Vec<(f64, f64)> = s
        .late_p99_ms
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((i as f64 + 1.0, (*v)?)))
        .collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 3 * PANEL_HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let panels = root.split_evenly((3, 1));
        two_axes(
            &panels[0],
            &format!(
                "{} endpoints every {} ms: probes per second and late p99",
                report.endpoints, report.interval_ms
            ),
            ("probes/s", &per_second(&s.probes_per_sec)),
            ("late p99 (ms)", &late),
        )?;
        two_axes(
            &panels[1],
            "Engine CPU and resident memory",
            ("CPU (% of one core)", &per_second(&s.cpu_pct)),
            ("RSS (MiB)", &per_second(&s.rss_mib)),
        )?;
        detection_cdf(&panels[2], report)?;
        root.present()?;
    }
    Ok(svg)
}

/// Share of faulted endpoints detected by each time, and the bound the timing allows.
fn detection_cdf(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    report: &Report,
) -> anyhow::Result<()> {
    let n = report.detect_ms.len().max(1) as f64;
    let cdf: Vec<(f64, f64)> = report
        .detect_ms
        .iter()
        .enumerate()
        .map(|(i, &ms)| (ms, 100.0 * (i + 1) as f64 / n))
        .collect();
    let bound = report.detect_bound_ms;
    let x_max = top(report.detect_ms.iter().copied().chain([bound]));
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "Detection: fault -> recording sink ({} of {} faulted endpoints)",
                report.detected, report.faulted
            ),
            TITLE,
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..100.0)?;
    chart
        .configure_mesh()
        .x_desc("ms from fault to the sink's write")
        .y_desc("% of faulted endpoints")
        .draw()?;
    chart
        .draw_series(LineSeries::new(cdf, LEFT.stroke_width(2)))?
        .label("detected by then")
        .legend(legend_line(LEFT));
    chart
        .draw_series(LineSeries::new(
            [(bound, 0.0), (bound, 100.0)],
            RIGHT.stroke_width(2),
        ))?
        .label(format!("bound from the check timing: {bound:.0} ms"))
        .legend(legend_line(RIGHT));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// One peer result line (`bench/peers/probe-cost.sh` writes one per peer and round).
#[derive(serde::Deserialize)]
pub struct PeerResult {
    /// `haproxy`, `ours`, ...
    pub peer: String,
    /// Endpoints.
    pub n: u64,
    /// CPU per 1,000 probes.
    pub cpu_ms_per_1k_probes: f64,
    /// Peak resident memory.
    pub rss_mb_peak: f64,
}

/// One number of a peer result.
type Measure = fn(&PeerResult) -> f64;

/// Grouped bars per farm size, one bar per peer: CPU per 1,000 probes and peak RSS, each
/// the median over the runs given (the harness's own numbers, not re-measured here).
pub fn peers_svg(results: &[PeerResult]) -> anyhow::Result<String> {
    let mut by: BTreeMap<(u64, &str), Vec<&PeerResult>> = BTreeMap::new();
    for r in results {
        by.entry((r.n, &r.peer)).or_default().push(r);
    }
    let sizes: Vec<u64> = by
        .keys()
        .map(|k| k.0)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let peers: Vec<&str> = by
        .keys()
        .map(|k| k.1)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    anyhow::ensure!(!sizes.is_empty(), "no peer results");
    let median = |rs: &[&PeerResult], f: Measure| {
        let mut v: Vec<f64> = rs.iter().map(|r| f(r)).collect();
        v.sort_by(f64::total_cmp);
        quantile(&v, 0.5).unwrap_or(0.0)
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 2 * PANEL_HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let panels = root.split_evenly((2, 1));
        let metrics: [(&str, Measure); 2] = [
            ("CPU ms per 1,000 probes", |r| r.cpu_ms_per_1k_probes),
            ("peak RSS (MB)", |r| r.rss_mb_peak),
        ];
        for (panel, (what, value)) in panels.iter().zip(metrics) {
            let bars: Vec<(usize, usize, f64)> = by
                .iter()
                .map(|((n, peer), rs)| {
                    let size = sizes.iter().position(|s| s == n).expect("listed");
                    let p = peers.iter().position(|q| q == peer).expect("listed");
                    (size, p, median(rs, value))
                })
                .collect();
            let y_max = top(bars.iter().map(|b| b.2));
            let mut chart = ChartBuilder::on(panel)
                .caption(format!("{what}, median per peer and farm size"), TITLE)
                .margin(10)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(0.0..sizes.len() as f64, 0.0..y_max)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(sizes.len() * 2 + 1)
                .x_label_formatter(&|x| {
                    let i = x.floor() as usize;
                    if (x - x.floor() - 0.5).abs() < 0.01 && i < sizes.len() {
                        format!("{} endpoints", sizes[i])
                    } else {
                        String::new()
                    }
                })
                .y_desc(what)
                .draw()?;
            let width = 0.8 / peers.len() as f64;
            for (p, peer) in peers.iter().enumerate() {
                let color = Palette99::pick(p).to_rgba();
                chart
                    .draw_series(bars.iter().filter(|b| b.1 == p).map(|&(size, _, v)| {
                        let x0 = size as f64 + 0.1 + p as f64 * width;
                        Rectangle::new([(x0, 0.0), (x0 + width * 0.9, v)], color.filled())
                    }))?
                    .label(*peer)
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                    });
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()?;
        }
        root.present()?;
    }
    Ok(svg)
}
