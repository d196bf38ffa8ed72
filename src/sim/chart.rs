//! A run's report as one SVG: breaker state per provider over time, latency
//! over time, the share of requests each provider served (and those the
//! response cache answered, and those that failed), and, when any run of the report got a 429 from a provider,
//! the 429s each provider answered; and, when the scenario models the
//! fleet's objects, the calls per second its busiest owner and relay took;
//! drawn with plotters' SVG backend.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::report::{FleetFigures, Report, Run};

const WIDTH: u32 = 960;
const PANEL: u32 = 300;
/// Colour-blind-safe (Okabe–Ito) colours for the providers, in order.
const PALETTE: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
];
const FAILED: RGBColor = RGBColor(200, 30, 30);
/// Answers from the response cache.
const CACHED: RGBColor = RGBColor(120, 120, 120);

fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// The SVG of run `run` of `report`.
pub fn svg(report: &Report, run: &Run) -> Result<String, String> {
    let mut out = String::new();
    let limited = report.runs.iter().any(|r| r.figures.provider_429s > 0);
    let fleet = run.figures.fleet.as_ref();
    let rows = 3 + u32::from(limited) + u32::from(fleet.is_some());
    {
        let root =
            SVGBackend::with_string(&mut out, (WIDTH, PANEL * rows + 40)).into_drawing_area();
        root.fill(&WHITE).map_err(text)?;
        let title = format!("{}: {}", report.scenario, run.policy);
        let root = root
            .titled(&title, ("sans-serif", 26).into_font().color(&BLACK))
            .map_err(text)?;
        let panels = root.split_evenly((rows as usize, 1));
        breakers(&panels[0], report, run).map_err(text)?;
        latency(&panels[1], report, run).map_err(text)?;
        shares(&panels[2], report, run).map_err(text)?;
        if limited {
            provider_429s(&panels[3], report, run).map_err(text)?;
        }
        if let Some(fleet) = fleet {
            let panel = &panels[rows as usize - 1];
            objects(panel, report, run, fleet).map_err(text)?;
        }
        root.present().map_err(text)?;
    }
    Ok(out)
}

fn text(e: impl std::fmt::Display) -> String {
    format!("drawing the chart: {e}")
}

/// Which percentile a latency line draws.
type Pick = fn(&super::Percentiles) -> Option<u32>;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Drawn = Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// Where bucket `b` starts, in seconds.
fn seconds(report: &Report) -> impl Fn(usize) -> f64 + '_ {
    move |b| (b as u64 * report.bucket_ms) as f64 / 1000.0
}

/// Points of a step line over the buckets.
fn steps(values: impl Iterator<Item = f64>, x: &dyn Fn(usize) -> f64) -> Vec<(f64, f64)> {
    let mut pts = Vec::new();
    for (b, v) in values.enumerate() {
        pts.push((x(b), v));
        pts.push((x(b + 1), v));
    }
    pts
}

fn end_s(report: &Report, run: &Run) -> f64 {
    (run.series.failed.len() as u64 * report.bucket_ms) as f64 / 1000.0
}

fn breakers(area: &Area<'_>, report: &Report, run: &Run) -> Drawn {
    let x = seconds(report);
    let mut chart = ChartBuilder::on(area)
        .caption("Breaker state", ("sans-serif", 21))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..end_s(report, run), -0.3..2.5)?;
    chart
        .configure_mesh()
        .y_labels(3)
        .y_label_formatter(&|v: &f64| {
            match v.round() as i64 {
                0 => "closed",
                1 => "half-open",
                2 => "open",
                _ => "",
            }
            .to_string()
        })
        .x_desc("time (s)")
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 15))
        .light_line_style(WHITE)
        .draw()?;
    for (i, id) in report.providers.iter().enumerate() {
        // Each provider a little higher, so equal states stay visible.
        let lift = i as f64 * 0.08;
        let pts = steps(
            run.series.breaker[i].iter().map(|&s| f64::from(s) + lift),
            &x,
        );
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
            .label(id.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    legend(&mut chart)
}

fn latency(area: &Area<'_>, report: &Report, run: &Run) -> Drawn {
    let x = seconds(report);
    let top = run
        .series
        .latency_ms
        .iter()
        .filter_map(|p| p.p95)
        .max()
        .unwrap_or(1000);
    let mut chart = ChartBuilder::on(area)
        .caption("Latency of answered requests", ("sans-serif", 21))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..end_s(report, run), 0.0..f64::from(top) * 1.1)?;
    mesh(&mut chart, "ms")?;
    let lines: [(&str, Pick, RGBColor); 2] =
        [("p50", |p| p.p50, colour(0)), ("p95", |p| p.p95, colour(5))];
    for (name, pick, c) in lines {
        let pts: Vec<(f64, f64)> = run
            .series
            .latency_ms
            .iter()
            .enumerate()
            .filter_map(|(b, p)| {
                pick(p).map(|v| (x(b) + report.bucket_ms as f64 / 2000.0, f64::from(v)))
            })
            .collect();
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    legend(&mut chart)
}

fn shares(area: &Area<'_>, report: &Report, run: &Run) -> Drawn {
    let x = seconds(report);
    let s = &run.series;
    let share = |count: u64, b: usize| {
        let n = s.requests(b);
        if n == 0 {
            0.0
        } else {
            count as f64 * 100.0 / n as f64
        }
    };
    let mut chart = ChartBuilder::on(area)
        .caption(
            "Share of requests served by each provider",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..end_s(report, run), 0.0..105.0)?;
    mesh(&mut chart, "% of requests")?;
    for (i, id) in report.providers.iter().enumerate() {
        let pts = steps((0..s.failed.len()).map(|b| share(s.served[i][b], b)), &x);
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
            .label(id.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    if s.cached.iter().any(|n| *n > 0) {
        let pts = steps((0..s.failed.len()).map(|b| share(s.cached[b], b)), &x);
        chart
            .draw_series(LineSeries::new(pts, CACHED.stroke_width(2)))?
            .label("response cache")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], CACHED.stroke_width(2)));
    }
    let pts = steps((0..s.failed.len()).map(|b| share(s.failed[b], b)), &x);
    chart
        .draw_series(LineSeries::new(pts, FAILED.stroke_width(2)))?
        .label("failed")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], FAILED.stroke_width(2)));
    legend(&mut chart)
}

/// The calls each provider answered 429, per bucket; on the same scale in
/// every run of the report, so that runs compare at a glance.
fn provider_429s(area: &Area<'_>, report: &Report, run: &Run) -> Drawn {
    let x = seconds(report);
    let top = report
        .runs
        .iter()
        .flat_map(|r| r.series.provider_429s.iter().flatten())
        .max()
        .copied()
        .unwrap_or(0)
        .max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "Calls answered 429, per {} s",
                report.bucket_ms as f64 / 1000.0
            ),
            ("sans-serif", 21),
        )
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..end_s(report, run), 0.0..top as f64 * 1.1)?;
    mesh(&mut chart, "429s")?;
    for (i, id) in report.providers.iter().enumerate() {
        let Some(counts) = run.series.provider_429s.get(i) else {
            continue;
        };
        let pts = steps(counts.iter().map(|&n| n as f64), &x);
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
            .label(id.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    legend(&mut chart)
}

/// Calls per second at the busiest owner and the busiest relay, against
/// one object's service rate and half of it (each run on its own scale:
/// today's protocol can take twenty times what a relayed one does).
fn objects(area: &Area<'_>, report: &Report, run: &Run, fleet: &FleetFigures) -> Drawn {
    let series = [
        ("busiest owner", &fleet.owner),
        ("busiest relay", &fleet.relay),
    ];
    let peak = series
        .iter()
        .filter_map(|(_, l)| l.as_ref())
        .map(|l| f64::from(l.peak_per_sec))
        .fold(0.0, f64::max);
    let rate = fleet.service_rate.unwrap_or(0.0);
    let top = peak.max(rate).max(1.0) * 1.1;
    let end = end_s(report, run);
    let mut chart = ChartBuilder::on(area)
        .caption(
            "Calls per second at the fleet's objects",
            ("sans-serif", 21),
        )
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..end, 0.0..top)?;
    mesh(&mut chart, "calls/s")?;
    for (i, (name, load)) in series.iter().enumerate() {
        let Some(load) = load else {
            continue;
        };
        let seconds = load.per_sec.iter().take(end.ceil() as usize);
        let pts = steps(seconds.map(|&n| f64::from(n)), &|s| s as f64);
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    if rate > 0.0 {
        for (label, y, c) in [
            ("service rate", rate, FAILED),
            ("half of it", rate / 2.0, BLACK),
        ] {
            chart
                .draw_series(DashedLineSeries::new(
                    [(0.0, y), (end, y)],
                    6,
                    4,
                    c.stroke_width(1),
                ))?
                .label(label)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(1)));
        }
    }
    legend(&mut chart)
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A panel's grid and axes over time, its values described as `y`.
fn mesh<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>, y: &str) -> Drawn {
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 15))
        .y_desc(y)
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
}

fn legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>) -> Drawn {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
}
