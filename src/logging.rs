//! Log output: `tracing` to stderr, filtered by `RUST_LOG` (default `info`).
//! (`HO_*` variables are configuration, so the filter does not use that prefix.)

use tracing_subscriber::EnvFilter;

/// Installs the subscriber. The demo shows transitions but not every publish detail.
pub fn init(demo: bool) {
    let default = if demo {
        "warn,ho_engine::tracker=info"
    } else {
        "info"
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}
