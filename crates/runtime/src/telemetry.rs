//! Tracing set-up: human-readable text for terminals, JSON lines for log pipelines.

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The filter in the log-level flag does not parse.
#[derive(Debug, thiserror::Error)]
#[error("invalid log filter {filter:?}: {source}")]
pub struct InvalidLogFilter {
    filter: String,
    source: tracing_subscriber::filter::ParseError,
}

/// Installs the global subscriber. Calling it twice keeps the first one, so tests that start
/// several components in one process do not fail.
pub fn init(filter: &str, format: LogFormat) -> Result<(), InvalidLogFilter> {
    let env_filter = EnvFilter::try_new(filter).map_err(|source| InvalidLogFilter {
        filter: filter.to_owned(),
        source,
    })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_writer(std::io::stderr);
    // A second initialisation in the same process is not an error worth failing over.
    let _already_set = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_filter_is_reported_with_its_text() {
        let err = init("info,[", LogFormat::Text).unwrap_err();
        assert!(err.to_string().contains("info,["), "{err}");
    }
}
