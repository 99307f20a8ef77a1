//! A download's progress on stderr: on a terminal one line redrawn (bytes, rate, ETA) at most
//! ten times a second; otherwise a line at every 10% (logs stay short).

use std::io::Write;
use std::time::{Duration, Instant};

/// How a download reports itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Progress {
    /// A bar on a terminal, a line per 10% otherwise.
    #[default]
    Auto,
    /// Nothing.
    Quiet,
}

pub struct Bar {
    name: String,
    total: Option<u64>,
    start_bytes: u64,
    started: Instant,
    last_draw: Option<Instant>,
    last_decile: u64,
    tty: bool,
    on: bool,
}

fn bytes(n: u64) -> String {
    let n = n as f64;
    if n >= 1e9 {
        format!("{:.2} GB", n / 1e9)
    } else if n >= 1e6 {
        format!("{:.1} MB", n / 1e6)
    } else {
        format!("{:.0} kB", n / 1e3)
    }
}

fn duration(s: f64) -> String {
    let s = s.round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

impl Bar {
    /// A bar for `name` of `total` bytes (when known), `done` of them already on disk.
    pub fn new(name: &str, total: Option<u64>, done: u64, mode: Progress) -> Bar {
        use std::io::IsTerminal;
        let tty = std::io::stderr().is_terminal();
        let on = mode == Progress::Auto;
        if on && !tty {
            let from = if done > 0 {
                format!(", resuming at {}", bytes(done))
            } else {
                String::new()
            };
            let size = total.map_or("size unknown".to_string(), bytes);
            eprintln!("downloading {name} ({size}{from})");
        }
        Bar {
            name: name.to_string(),
            total,
            start_bytes: done,
            started: Instant::now(),
            last_draw: None,
            last_decile: total.map_or(0, |t| done * 10 / t.max(1)),
            tty,
            on,
        }
    }

    /// `done` bytes are on disk now.
    pub fn update(&mut self, done: u64) {
        if !self.on {
            return;
        }
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = done.saturating_sub(self.start_bytes) as f64 / secs;
        if self.tty {
            let now = Instant::now();
            if self
                .last_draw
                .is_some_and(|t| now - t < Duration::from_millis(100))
                && Some(done) != self.total
            {
                return;
            }
            self.last_draw = Some(now);
            let line = match self.total {
                Some(t) if t > 0 => {
                    let pct = done as f64 / t as f64 * 100.0;
                    let width = 24usize;
                    let fill = ((done as f64 / t as f64) * width as f64) as usize;
                    let eta = if rate > 0.0 {
                        duration(t.saturating_sub(done) as f64 / rate)
                    } else {
                        "?".into()
                    };
                    format!(
                        "{} [{}{}] {pct:5.1}% {} / {} {}/s ETA {eta}",
                        self.name,
                        "=".repeat(fill.min(width)),
                        " ".repeat(width - fill.min(width)),
                        bytes(done),
                        bytes(t),
                        bytes(rate as u64)
                    )
                }
                _ => format!("{} {} {}/s", self.name, bytes(done), bytes(rate as u64)),
            };
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r{line}\x1b[K");
            let _ = e.flush();
        } else if let Some(t) = self.total.filter(|&t| t > 0) {
            let decile = done * 10 / t;
            if decile > self.last_decile && decile < 10 {
                self.last_decile = decile;
                eprintln!(
                    "{}: {}% ({} of {}, {}/s)",
                    self.name,
                    decile * 10,
                    bytes(done),
                    bytes(t),
                    bytes(rate as u64)
                );
            }
        }
    }

    /// The download ended (well or not).
    pub fn finish(&mut self, done: u64, ok: bool) {
        if !self.on {
            return;
        }
        if self.tty {
            self.last_draw = None;
            self.update(done);
            eprintln!();
        }
        if ok && !self.tty {
            let secs = self.started.elapsed().as_secs_f64();
            eprintln!("{}: {} in {}", self.name, bytes(done), duration(secs));
        }
    }
}
