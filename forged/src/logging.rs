//! Logs go to `$FORGE_HOME/logs/forged.log` (rotated daily), and to stderr
//! with `--foreground`. Nothing logged carries an API key: providers never
//! log headers, their errors are redacted before they are logged, and
//! every line is scrubbed on its way out (`forge_core::redact`).

use std::path::Path;

use anyhow::Context;
use forge_core::redact::ScrubbingWriter;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt;
use tracing_subscriber::prelude::*;

/// Writes go straight to the file: the daemon logs little, and a
/// background writer would delay every exit by its flush timeout.
pub fn init(home: &Path, foreground: bool) -> anyhow::Result<()> {
    let dir = home.join("logs");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let appender = tracing_appender::rolling::Builder::new()
        .rotation(tracing_appender::rolling::Rotation::DAILY)
        .filename_prefix("forged")
        .filename_suffix("log")
        .max_log_files(7)
        .build(&dir)
        .with_context(|| format!("cannot open a log file in {}", dir.display()))?;
    let filter = || EnvFilter::try_from_env("FORGE_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let file_layer = fmt::layer().with_writer(Scrubbed(appender)).with_ansi(false).with_filter(filter());
    let stderr_layer =
        foreground.then(|| fmt::layer().with_writer(|| ScrubbingWriter(std::io::stderr())).with_filter(filter()));
    tracing_subscriber::registry().with(file_layer).with(stderr_layer).init();
    Ok(())
}

/// The log file, every write scrubbed of secrets.
struct Scrubbed(tracing_appender::rolling::RollingFileAppender);

impl<'a> fmt::MakeWriter<'a> for Scrubbed {
    type Writer = ScrubbingWriter<<tracing_appender::rolling::RollingFileAppender as fmt::MakeWriter<'a>>::Writer>;
    fn make_writer(&'a self) -> Self::Writer {
        ScrubbingWriter(self.0.make_writer())
    }
}
