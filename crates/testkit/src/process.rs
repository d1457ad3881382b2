//! Child processes of the `ferromq` binary, for process-level tests (crash tests, the CLI).

use std::io::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A child process that is killed (SIGKILL) and reaped when dropped, pass or fail. The child
/// is public so a crash test can kill it at a moment of its choosing.
#[derive(Debug)]
pub struct ChildProcess(pub Child);

impl Drop for ChildProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes `config` to `conf` and starts `bin args... -c conf`. Its output is discarded (and
/// `RUST_LOG` is `warn` unless set) unless `FERROMQ_TEST_LOGS` is set, which shows it.
///
/// # Panics
/// When the file cannot be written or the process not started: a test cannot go on.
pub fn spawn_with_config(bin: &str, args: &[&str], conf: &Path, config: &str) -> ChildProcess {
    std::fs::File::create(conf)
        .and_then(|mut f| f.write_all(config.as_bytes()))
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", conf.display()));
    let logs = std::env::var_os("FERROMQ_TEST_LOGS").is_some();
    let output = || if logs { Stdio::inherit() } else { Stdio::null() };
    let mut command = Command::new(bin);
    command.args(args).arg("-c").arg(conf).stdout(output()).stderr(output());
    if std::env::var_os("RUST_LOG").is_none() {
        command.env("RUST_LOG", "warn");
    }
    ChildProcess(command.spawn().unwrap_or_else(|e| panic!("cannot start {bin}: {e}")))
}
