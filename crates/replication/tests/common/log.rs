//! A minimal `tracing` subscriber for tests: records every event as one line (level, target,
//! fields) so a test can assert what was logged, and echoes it to stderr when
//! `FERROMQ_TEST_LOG` is set.

use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());
static INSTALLED: OnceLock<()> = OnceLock::new();

struct Capture {
    echo: bool,
}

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={:?}", field.name(), value);
    }
}

impl Subscriber for Capture {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("ferromq")
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = Line(format!("{} {}:", event.metadata().level(), event.metadata().target()));
        event.record(&mut line);
        if self.echo {
            eprintln!("{}", line.0);
        }
        LINES.lock().unwrap_or_else(|e| e.into_inner()).push(line.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Installs the capturing subscriber for the whole test binary (once).
pub fn install() {
    INSTALLED.get_or_init(|| {
        let echo = std::env::var_os("FERROMQ_TEST_LOG").is_some();
        tracing::subscriber::set_global_default(Capture { echo }).expect("no other subscriber");
    });
}

/// Lines logged so far that contain every one of `parts`.
pub fn lines_with(parts: &[&str]) -> Vec<String> {
    LINES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|l| parts.iter().all(|p| l.contains(p)))
        .cloned()
        .collect()
}
