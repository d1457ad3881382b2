//! What the tests that drive `compat/python/e2e.py` share: finding the repository and the
//! compat venv, the client runs' JSON event lines, and log tails for failure messages.

#![allow(dead_code)] // each test file uses its own part

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Runs `compat/setup.sh` once per test process (cheap when the venv exists) and returns the
/// venv's python.
pub fn compat_python() -> &'static PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let root = repo_root();
        let out = Command::new("bash").arg(root.join("compat/setup.sh")).output().expect("run compat/setup.sh");
        assert!(
            out.status.success(),
            "compat/setup.sh failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let venv =
            std::env::var_os("FERROMQ_COMPAT_VENV").map_or_else(|| root.join("target/compat-venv"), PathBuf::from);
        venv.join("bin/python")
    })
}

/// The python of the 5.x Python client's venv (`compat/setup.sh` prepares it with the rest).
pub fn compat_python5() -> PathBuf {
    compat_python();
    std::env::var_os("FERROMQ_COMPAT_VENV5")
        .map_or_else(|| repo_root().join("target/compat-venv5"), PathBuf::from)
        .join("bin/python")
}

/// The `node_modules` of the 5.x Node.js client (`compat/setup.sh` prepares it with the rest).
pub fn compat_node5_modules() -> PathBuf {
    compat_python();
    std::env::var_os("FERROMQ_COMPAT_NODE5")
        .map_or_else(|| repo_root().join("target/compat-node5"), PathBuf::from)
        .join("node_modules")
}

/// Chromium and the dashboard's browser-test directory (its `node_modules` holds
/// playwright-core); `compat/setup.sh` prepares both with the rest.
pub fn dashboard_browser() -> (PathBuf, PathBuf) {
    compat_python();
    let chromium = std::env::var_os("CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    (chromium, repo_root().join("crates/dashboard/browser-tests"))
}

pub fn file_tail(path: &Path, lines: usize) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read: {e})"),
    }
}

pub fn dir_tail(dir: &Path, lines: usize) -> String {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return "(no log)".into();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| format!("{}:\n{}", e.path().display(), file_tail(&e.path(), lines)))
        .collect()
}

/// Runs `compat/python/e2e.py <args> --namesrv <namesrv> --timeout-s <timeout_s>` with its own
/// client home `home` to its end, in its own process group (killed as a whole if it outlives
/// its own deadline by 15 s). Returns the run and, when its stdout had lines that are not
/// JSON, what is wrong.
pub fn run_e2e(label: &str, home: &Path, args: &[&str], namesrv: &str, timeout_s: u64) -> (ClientRun, Option<String>) {
    let started = Instant::now();
    let mut child = Command::new(compat_python())
        .arg(repo_root().join("compat/python/e2e.py"))
        .args(args)
        .args(["--namesrv", namesrv, "--timeout-s", &timeout_s.to_string()])
        .arg("--client-home")
        .arg(home)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run compat/python/e2e.py");
    let mut stdout = child.stdout.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let mut stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + Duration::from_secs(timeout_s + 15);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let mut events = Vec::new();
    let mut bad = Vec::new();
    for line in BufReader::new(stdout.as_bytes()).lines().map_while(Result::ok).filter(|l| !l.trim().is_empty()) {
        match Json::parse(&line) {
            Ok(v) => events.push(v),
            Err(e) => bad.push(format!("{e}: {line}")),
        }
    }
    let run = ClientRun {
        label: label.to_owned(),
        status,
        events,
        stdout,
        stderr,
        client_log_dir: home.join("logs/rocketmq-cpp"),
        elapsed: started.elapsed(),
    };
    let problem = (!bad.is_empty()).then(|| format!("e2e.py printed lines that are not JSON: {bad:?}"));
    (run, problem)
}

/// The outcome of one `e2e.py` run.
pub struct ClientRun {
    pub label: String,
    pub status: ExitStatus,
    pub events: Vec<Json>,
    pub stdout: String,
    pub stderr: String,
    pub client_log_dir: PathBuf,
    pub elapsed: Duration,
}

impl ClientRun {
    pub fn events<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Json> + 'a {
        self.events.iter().filter(move |e| e.str("event") == Some(kind))
    }

    /// The parent's final line.
    pub fn done(&self) -> Option<&Json> {
        self.events("done").last()
    }
}

/// A JSON value: just enough to read e2e.py's output (this crate has no JSON dependency).
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    pub fn parse(text: &str) -> Result<Json, String> {
        let mut p = JsonParser { s: text.as_bytes(), i: 0 };
        let v = p.value()?;
        p.ws();
        if p.i != p.s.len() {
            return Err(format!("trailing characters at byte {}", p.i));
        }
        Ok(v)
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn str(&self, key: &str) -> Option<&str> {
        match self.get(key) {
            Some(Json::Str(s)) => Some(s),
            _ => None,
        }
    }

    pub fn int(&self, key: &str) -> Option<i64> {
        match self.get(key) {
            Some(Json::Num(n)) if n.fract() == 0.0 => Some(*n as i64),
            _ => None,
        }
    }

    pub fn bool(&self, key: &str) -> Option<bool> {
        match self.get(key) {
            Some(Json::Bool(b)) => Some(*b),
            _ => None,
        }
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Num(n) => write!(f, "{n}"),
            Json::Str(s) => write!(f, "{s:?}"),
            Json::Arr(items) => {
                f.write_str("[")?;
                for (n, item) in items.iter().enumerate() {
                    if n > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Json::Obj(fields) => {
                f.write_str("{")?;
                for (n, (k, v)) in fields.iter().enumerate() {
                    if n > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k:?}: {v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

struct JsonParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl JsonParser<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Result<(), String> {
        self.ws();
        if self.s.get(self.i) == Some(&byte) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at byte {}", byte as char, self.i))
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        self.ws();
        match self.s.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut fields = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Json::Obj(fields));
                }
                loop {
                    self.ws();
                    let key = self.string()?;
                    self.eat(b':')?;
                    fields.push((key, self.value()?));
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Json::Obj(fields));
                        }
                        _ => return Err(format!("expected ',' or '}}' at byte {}", self.i)),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(Json::Arr(items));
                }
                loop {
                    items.push(self.value()?);
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Json::Arr(items));
                        }
                        _ => return Err(format!("expected ',' or ']' at byte {}", self.i)),
                    }
                }
            }
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b't') if self.s[self.i..].starts_with(b"true") => {
                self.i += 4;
                Ok(Json::Bool(true))
            }
            Some(b'f') if self.s[self.i..].starts_with(b"false") => {
                self.i += 5;
                Ok(Json::Bool(false))
            }
            Some(b'n') if self.s[self.i..].starts_with(b"null") => {
                self.i += 4;
                Ok(Json::Null)
            }
            Some(_) => {
                let start = self.i;
                while self.s.get(self.i).is_some_and(|b| b.is_ascii_digit() || b"+-.eE".contains(b)) {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default();
                text.parse().map(Json::Num).map_err(|_| format!("bad value at byte {start}"))
            }
            None => Err("unexpected end".into()),
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self.s.get(self.i..self.i + 4).ok_or("short \\u escape")?;
        let text = std::str::from_utf8(digits).map_err(|e| e.to_string())?;
        self.i += 4;
        u32::from_str_radix(text, 16).map_err(|e| e.to_string())
    }

    fn string(&mut self) -> Result<String, String> {
        self.eat(b'"')?;
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.s.get(self.i) else {
                return Err("unterminated string".into());
            };
            self.i += 1;
            match b {
                b'"' => return String::from_utf8(out).map_err(|e| e.to_string()),
                b'\\' => {
                    let Some(&esc) = self.s.get(self.i) else {
                        return Err("unterminated escape".into());
                    };
                    self.i += 1;
                    let c = match esc {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let mut code = self.hex4()?;
                            if (0xD800..0xDC00).contains(&code) && self.s[self.i..].starts_with(b"\\u") {
                                self.i += 2;
                                let low = self.hex4()?;
                                code = 0x10000 + ((code - 0xD800) << 10) + (low.wrapping_sub(0xDC00) & 0x3FF);
                            }
                            char::from_u32(code).unwrap_or('\u{FFFD}')
                        }
                        other => return Err(format!("bad escape \\{}", other as char)),
                    };
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                _ => out.push(b),
            }
        }
    }
}
