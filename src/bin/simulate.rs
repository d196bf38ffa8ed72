//! `cargo simulate SCENARIO.json [--out DIR]` (an alias of `cargo run
//! --release --features simulate --bin simulate --`): runs every policy of the
//! scenario on virtual time, prints their figures side by side and the
//! simulation's speed, and writes DIR/NAME.report.json (the report) and
//! DIR/NAME-POLICY.svg (one chart per policy). DIR defaults to the scenario
//! file's own directory.

#![allow(clippy::disallowed_methods)] // the speed printed is wall time, on purpose

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use resilient_llm::sim::{simulate, svg, Scenario};

// A simulated request allocates some fifty times: mimalloc's allocations
// cost less than glibc's (docs/benchmarks.md, "Figures at a
// glance": the simulator's row).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "simulate: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut file = None;
    let mut out = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = Some(PathBuf::from(args.next().ok_or("--out needs a directory")?)),
            "-h" | "--help" => {
                say(format_args!("usage: simulate SCENARIO.json [--out DIR]\n"))?;
                return Ok(());
            }
            _ if file.is_none() => file = Some(PathBuf::from(a)),
            _ => return Err(format!("unexpected argument {a:?}")),
        }
    }
    let file = file.ok_or("usage: simulate SCENARIO.json [--out DIR]")?;
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let scenario = Scenario::parse(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let dir = out.unwrap_or_else(|| file.parent().unwrap_or(Path::new(".")).to_path_buf());

    let (started, cpu_before) = (Instant::now(), cpu_ns());
    let report = simulate(&scenario)?;
    let secs = started.elapsed().as_secs_f64();
    let cpu = cpu_ns()
        .zip(cpu_before)
        .map(|(a, b)| a.saturating_sub(b) as f64 / 1e9);
    let requests: u64 = report.runs.iter().map(|r| r.figures.requests).sum();

    say(format_args!("{}", report.table()))?;
    let per = |s: f64| requests as f64 / s.max(1e-9);
    match cpu {
        Some(cpu) => say(format_args!(
            "simulated {requests} requests in {cpu:.3} s of CPU ({:.0} requests/s on one core), {secs:.3} s of wall time ({:.0}/s)\n",
            per(cpu),
            per(secs)
        ))?,
        None => say(format_args!(
            "simulated {requests} requests in {secs:.3} s of wall time: {:.0} requests/s\n",
            per(secs)
        ))?,
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let json = serde_json::to_string(&report).map_err(|e| e.to_string())?;
    write(
        &dir.join(format!("{}.report.json", report.scenario)),
        &(json + "\n"),
    )?;
    for run in &report.runs {
        let name = format!("{}-{}.svg", report.scenario, slug(&run.policy));
        write(&dir.join(name), &svg(&report, run)?)?;
    }
    Ok(())
}

/// This thread's time on a CPU, in ns (Linux: the first field of
/// /proc/thread-self/schedstat). On a busy machine wall time also counts
/// other processes' turns; the simulation runs on this one thread.
fn cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    say(format_args!("wrote {}\n", path.display()))
}

/// Writes to stdout; a closed one (`| head`) is an error, not a panic.
fn say(text: std::fmt::Arguments<'_>) -> Result<(), String> {
    use std::io::Write as _;
    std::io::stdout()
        .lock()
        .write_fmt(text)
        .map_err(|e| format!("stdout: {e}"))
}

/// A policy name as a file name: lower case, runs of anything else as `-`.
fn slug(name: &str) -> String {
    let mut s = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    s.trim_matches('-').to_string()
}
