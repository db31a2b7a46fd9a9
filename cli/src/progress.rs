//! A job's progress while `weir run` or `weir submit --wait` waits for it:
//! a live line on a terminal, a plain line every few seconds otherwise (logs,
//! pipes).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How often a plain progress line is printed when stderr is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(2);

/// Shows a job's progress on stderr.
pub struct Progress {
    bar: Option<ProgressBar>,
    name: String,
    started: Instant,
    printed: Instant,
    last: Option<(Instant, u64)>,
    rate: f64,
}

impl Progress {
    /// Progress of job `name`: live on a terminal, plain lines otherwise.
    pub fn new(name: &str) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg}").expect("a valid template"),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        let now = Instant::now();
        Progress {
            bar,
            name: name.to_owned(),
            started: now,
            printed: now,
            last: None,
            rate: 0.0,
        }
    }

    /// The job is in `state` and its sources have read `records` so far.
    pub fn update(&mut self, state: &str, records: u64) {
        let now = Instant::now();
        match self.last {
            Some((then, before)) if now.duration_since(then) >= Duration::from_millis(500) => {
                self.rate =
                    records.saturating_sub(before) as f64 / now.duration_since(then).as_secs_f64();
                self.last = Some((now, records));
            }
            None => self.last = Some((now, records)),
            _ => {}
        }
        let line = format!(
            "job {} {state}: {} records read, {}/s, {:.0} s",
            self.name,
            thousands(records),
            thousands(self.rate as u64),
            self.started.elapsed().as_secs_f64()
        );
        match &self.bar {
            Some(bar) => bar.set_message(line),
            None if self.printed.elapsed() >= PLAIN_EVERY => {
                self.printed = now;
                eprintln!("{line}");
            }
            None => {}
        }
    }

    /// The job ended: clear the live line.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands() {
        assert_eq!(super::thousands(0), "0");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(1000), "1,000");
        assert_eq!(super::thousands(1234567), "1,234,567");
    }
}
