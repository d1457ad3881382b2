//! The process's own figures, read from `/proc/self` at scrape time, under the names
//! Prometheus client libraries use (`process_*`), plus anonymous memory and threads.
//! Elsewhere than Linux the collector writes nothing.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::families::{emit_one, Family, Kind};

/// `/proc` counts CPU time in USER_HZ ticks, fixed at 100 per second by the kernel's ABI
/// whatever its internal tick rate.
const TICKS_PER_SECOND: f64 = 100.0;

/// What `/proc/self` says about the process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessFigures {
    /// Resident memory.
    pub resident_bytes: u64,
    /// Resident anonymous memory (heap and stacks, not mapped files such as the CommitLog).
    pub anon_bytes: u64,
    /// Virtual memory.
    pub virtual_bytes: u64,
    /// User plus system CPU time.
    pub cpu_seconds: f64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// The soft limit of open files.
    pub max_fds: u64,
    /// Threads.
    pub threads: u64,
    /// When the process started (Unix seconds).
    pub start_time_seconds: f64,
}

fn status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].trim().trim_end_matches("kB").trim().parse::<u64>().ok().map(|k| k * 1024)
}

/// Reads the figures (zeros where `/proc` is missing or unreadable).
pub fn read() -> ProcessFigures {
    let mut f = ProcessFigures::default();
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        f.resident_bytes = status_kib(&status, "VmRSS:").unwrap_or(0);
        f.anon_bytes = status_kib(&status, "RssAnon:").unwrap_or(0);
        f.virtual_bytes = status_kib(&status, "VmSize:").unwrap_or(0);
        f.threads =
            status.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    }
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
        // The command name (field 2) may hold spaces and parentheses: fields count from the
        // last ')'. utime and stime are fields 14 and 15, starttime field 22.
        if let Some((_, rest)) = stat.rsplit_once(')') {
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            f.cpu_seconds = (field(14) + field(15)) as f64 / TICKS_PER_SECOND;
            let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
                s.lines().find_map(|l| l.strip_prefix("btime ")).and_then(|v| v.trim().parse::<u64>().ok())
            });
            if let Some(boot) = boot {
                f.start_time_seconds = boot as f64 + field(22) as f64 / TICKS_PER_SECOND;
            }
        }
    }
    f.open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
    if let Ok(limits) = std::fs::read_to_string("/proc/self/limits") {
        f.max_fds = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
    }
    f
}

/// Writes the `process_*` families on every scrape.
#[derive(Debug, Default)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        if !cfg!(target_os = "linux") {
            return Ok(());
        }
        let f = read();
        let gauge = |name, help, unit| Family { name, help, unit, kind: Kind::Gauge };
        emit_one(
            &mut encoder,
            gauge("process_resident_memory", "Resident memory size", Some("bytes")),
            f.resident_bytes,
        )?;
        emit_one(
            &mut encoder,
            gauge("process_anon_memory", "Resident anonymous memory (not mapped files)", Some("bytes")),
            f.anon_bytes,
        )?;
        emit_one(&mut encoder, gauge("process_virtual_memory", "Virtual memory size", Some("bytes")), f.virtual_bytes)?;
        emit_one(
            &mut encoder,
            Family {
                name: "process_cpu",
                help: "User and system CPU time spent",
                unit: Some("seconds"),
                kind: Kind::Counter,
            },
            f.cpu_seconds,
        )?;
        emit_one(&mut encoder, gauge("process_open_fds", "Open file descriptors", None), f.open_fds)?;
        emit_one(&mut encoder, gauge("process_max_fds", "Limit of open file descriptors", None), f.max_fds)?;
        emit_one(&mut encoder, gauge("process_threads", "Threads of the process", None), f.threads)?;
        emit_one(
            &mut encoder,
            gauge("process_start_time", "Start time of the process since the Unix epoch", Some("seconds")),
            f.start_time_seconds,
        )
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn figures_of_this_process_are_plausible() {
        let f = super::read();
        assert!(f.resident_bytes > 0 && f.anon_bytes > 0 && f.anon_bytes <= f.resident_bytes, "{f:?}");
        assert!(f.virtual_bytes >= f.resident_bytes, "{f:?}");
        assert!(f.open_fds >= 3 && f.max_fds >= f.open_fds, "{f:?}");
        assert!(f.threads >= 1, "{f:?}");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        assert!(f.start_time_seconds > now - 3600.0 && f.start_time_seconds <= now + 1.0, "{f:?}");
    }
}
