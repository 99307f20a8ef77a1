//! `superinfer chat` as a person uses it, in a terminal under tmux: two turns, Ctrl-C in the
//! middle of an answer, and the second turn evaluating only its new tokens (the first
//! turn's are reused from the cache). Needs tmux (CI installs it).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use superinfer_tests::{require_model, QWEN_05B};

struct Tmux {
    session: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(args)
            .output()
            .expect("tmux runs (apt-get install tmux)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&[
            "capture-pane",
            "-p",
            "-J",
            "-S",
            "-200",
            "-t",
            &self.session,
        ])
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.session];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Waits until `f(screen)` holds; panics with the screen after `secs`.
    fn wait(&self, secs: u64, what: &str, f: impl Fn(&str) -> bool) -> String {
        let t = Instant::now();
        loop {
            let s = self.screen();
            if f(&s) {
                return s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(secs),
                "timed out waiting for {what}; the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.session])
            .output();
    }
}

/// The "(N reused)" counts of the turns' statistics lines, in order.
fn reused(screen: &str) -> Vec<(usize, usize)> {
    screen
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("[prompt: ")?;
            let (new, rest) = rest.split_once(" new tokens (")?;
            let (reused, _) = rest.split_once(" reused)")?;
            Some((new.parse().ok()?, reused.parse().ok()?))
        })
        .collect()
}

#[test]
fn chat_under_tmux_two_turns_ctrl_c_and_reused_prefix() {
    let model = require_model(QWEN_05B);
    let bin = Path::new(env!("CARGO_BIN_EXE_superinfer"));
    let session = format!("superinfer-chat-{}", std::process::id());
    let t = Tmux { session };
    let cmd = format!(
        "SUPERINFER_CACHE={} {} chat -m {} -t 2 --temp 0 -c 2048",
        std::env::temp_dir().display(),
        bin.display(),
        model.display()
    );
    let out = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-x",
            "160",
            "-y",
            "60",
            "-s",
            &t.session,
            &cmd,
        ])
        .output()
        .expect("tmux is installed (apt-get install tmux)");
    assert!(
        out.status.success(),
        "tmux: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    t.wait(60, "the chat banner", |s| {
        s.contains("Ctrl-C stops an answer")
    });

    // turn 1: a long answer, stopped with Ctrl-C once it is under way
    t.keys(&["Count from 1 to 200, one number per line.", "Enter"]);
    t.wait(60, "the answer to start", |s| {
        s.contains("\n5\n") || s.contains("5\n6")
    });
    t.keys(&["C-c"]);
    let s = t.wait(30, "the stopped turn's statistics", |s| {
        s.contains("(stopped)")
    });
    assert_eq!(reused(&s).len(), 1, "{s}");
    assert!(
        !s.contains("\n200\n"),
        "Ctrl-C did not stop the answer:\n{s}"
    );

    // turn 2: only the new turn is evaluated
    t.keys(&["Now say hello.", "Enter"]);
    let s = t.wait(60, "the second turn's statistics", |s| reused(s).len() == 2);
    let turns = reused(&s);
    let (new1, reused1) = turns[0];
    let (new2, reused2) = turns[1];
    assert_eq!(reused1, 0, "{s}");
    assert!(
        reused2 >= new1,
        "turn 2 reused {reused2} tokens, but turn 1's prompt alone was {new1}:\n{s}"
    );
    assert!(
        new2 < reused2,
        "turn 2 evaluated {new2} tokens again (reused {reused2}):\n{s}"
    );

    // Ctrl-D ends the chat
    t.keys(&["C-d"]);
    let t0 = Instant::now();
    let alive = || {
        Command::new("tmux")
            .args(["has-session", "-t", &t.session])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    while alive() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "Ctrl-D did not end the chat:\n{}",
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
