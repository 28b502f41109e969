//! Log output: `tracing` to stderr, filtered by `RUST_LOG` (default `info`), as text
//! (coloured only on a terminal: a file or a pipe gets no escape codes) or one JSON object
//! per line (`[telemetry] log_format`, or `--log-format`). Transition and publish lines
//! carry the `trace_id` of their span when traces are on, so logs and traces join.
//! (`HO_*` variables are configuration, so the filter does not use that prefix.)

use ho_config::LogFormat;
use tracing_subscriber::EnvFilter;

/// Installs the subscriber. The demo shows transitions but not every publish detail.
pub fn init(demo: bool, format: LogFormat) {
    let default = if demo {
        "warn,ho_engine::tracker=info"
    } else {
        "info"
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    match format {
        LogFormat::Pretty => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}
