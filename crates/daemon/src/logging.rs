//! Where the daemon's log lines go, and in what form.
//!
//! On a terminal: tracing's usual lines on stderr (colour, timestamp, level, module).
//!
//! Anywhere else (OpenWrt's procd, a service manager, a file): plain lines for a system log,
//! which adds its own timestamp and tag: no colour codes, no timestamp, no module path; INFO and
//! DEBUG on stdout, WARN and ERROR on stderr with `warning: ` / `error: ` in front. procd reads
//! the two streams of an instance with `stdout 1` / `stderr 1` and hands each line to logd as
//! it is, stdout at LOG_INFO and stderr at LOG_ERR, facility daemon, tag `slipstreamd[pid]`
//! (procd's `service/instance.c`, `instance_stdout` / `instance_stderr`), so `logread` shows
//! `daemon.info` and `daemon.err`. A `<6>`-style priority prefix would reach the log as text:
//! procd does not parse it. Writing to `/dev/log` ourselves would file every level exactly, but
//! would depend on the socket being inside procd's jail for the instance; the two streams reach
//! logd whatever the jail, and a warning filed as `err` is seen rather than missed.

use std::fmt;
use std::io::IsTerminal;

use tracing::level_filters::LevelFilter;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::writer::MakeWriterExt;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;

/// The level filter from `RUST_LOG`: a level (`debug`) and/or `target=level` directives
/// (`warn,slipstreamd=debug`), as `tracing_subscriber::filter::Targets` reads them; `info` when
/// unset or unreadable. `Targets` rather than `EnvFilter`: the latter's span and field filters
/// bring a regex engine, about a tenth of the router's binary, for what a household never sets.
fn filter_from(rust_log: Option<&str>) -> Targets {
    rust_log
        .and_then(|s| s.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(Level::INFO))
}

/// Installs the daemon's logger (level from `RUST_LOG`, default `info`).
pub(crate) fn init() {
    let filter = filter_from(std::env::var("RUST_LOG").ok().as_deref());
    if std::io::stderr().is_terminal() {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_max_level(LevelFilter::TRACE) // the filter decides
            .finish()
            .with(filter);
        tracing::subscriber::set_global_default(subscriber).expect("the logger is installed once");
    } else {
        tracing::subscriber::set_global_default(plain(std::io::stdout, std::io::stderr, filter))
            .expect("the logger is installed once");
    }
}

/// Plain lines for a system log: INFO and below to `info`, WARN and ERROR to `err`.
fn plain<I, E>(info: I, err: E, filter: Targets) -> impl Subscriber + Send + Sync
where
    I: for<'w> MakeWriter<'w> + Send + Sync + 'static,
    E: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_ansi(false)
        .event_format(PlainLine)
        .with_writer(err.with_max_level(Level::WARN).or_else(info))
        .with_max_level(LevelFilter::TRACE) // the filter decides
        .finish()
        .with(filter)
}

/// One event as one line: `warning: `, `error: `, `debug: ` or nothing (INFO) before the message.
struct PlainLine;

impl<S, N> FormatEvent<S, N> for PlainLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let prefix = match *event.metadata().level() {
            Level::ERROR => "error: ",
            Level::WARN => "warning: ",
            Level::INFO => "",
            Level::DEBUG => "debug: ",
            Level::TRACE => "trace: ",
        };
        writer.write_str(prefix)?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Stream(Arc<Mutex<Vec<u8>>>);

    impl Write for Stream {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Stream {
        fn lines(&self) -> Vec<String> {
            String::from_utf8(self.0.lock().unwrap().clone())
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect()
        }
    }

    /// What `logread` shows for the instance's lines, filed as procd files them: each stdout
    /// line at daemon.info, each stderr line at daemon.err, tag `slipstreamd[pid]`.
    fn logread(stdout: &Stream, stderr: &Stream) -> Vec<String> {
        let tag = "slipstreamd[1234]";
        stdout
            .lines()
            .into_iter()
            .map(|l| format!("daemon.info {tag}: {l}"))
            .chain(
                stderr
                    .lines()
                    .into_iter()
                    .map(|l| format!("daemon.err {tag}: {l}")),
            )
            .collect()
    }

    #[test]
    fn plain_lines_filed_by_level_as_procd_and_logd_show_them() {
        let (out, err) = (Stream::default(), Stream::default());
        let (o, e) = (out.clone(), err.clone());
        let subscriber = plain(move || o.clone(), move || e.clone(), filter_from(Some("debug")));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!("slipstreamd running: {} rules", 3);
            tracing::debug!("a detail");
            tracing::warn!("cannot mark the window updates");
            tracing::error!("installing firewall rules: failed");
        });
        let shown = logread(&out, &err);
        assert_eq!(
            shown,
            [
                "daemon.info slipstreamd[1234]: slipstreamd running: 3 rules",
                "daemon.info slipstreamd[1234]: debug: a detail",
                "daemon.err slipstreamd[1234]: warning: cannot mark the window updates",
                "daemon.err slipstreamd[1234]: error: installing firewall rules: failed",
            ]
        );
        for line in out.lines().iter().chain(err.lines().iter()) {
            assert!(!line.contains('\x1b'), "colour code in {line:?}");
            assert!(
                !line.chars().next().is_some_and(|c| c.is_ascii_digit()),
                "timestamp in {line:?}"
            );
        }
    }

    #[test]
    fn the_level_filter_still_applies() {
        let (out, err) = (Stream::default(), Stream::default());
        let (o, e) = (out.clone(), err.clone());
        let subscriber = plain(move || o.clone(), move || e.clone(), filter_from(Some("info")));
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!("hidden");
            tracing::info!("shown");
        });
        assert_eq!(out.lines(), ["shown"]);
        assert!(err.lines().is_empty());
    }

    #[test]
    fn rust_log_directives() {
        assert_eq!(filter_from(None).default_level(), Some(LevelFilter::INFO));
        assert_eq!(
            filter_from(Some("debug")).default_level(),
            Some(LevelFilter::DEBUG)
        );
        let per_target = filter_from(Some("warn,slipstreamd=debug"));
        assert!(per_target.would_enable("slipstreamd::reload", &Level::DEBUG));
        assert!(!per_target.would_enable("aya::maps", &Level::INFO));
        // Not a level: the default stands.
        assert_eq!(
            filter_from(Some("slipstreamd=loud")).default_level(),
            Some(LevelFilter::INFO)
        );
    }
}
