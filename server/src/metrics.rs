//! Prometheus metrics: request counts by status, token counters, latency histograms and the
//! scheduler's gauges (published by the engine thread after every step).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use superinfer_runtime::core::model::PoolStats;

/// A histogram with fixed upper bounds (seconds).
pub struct Histogram {
    bounds: &'static [f64],
    state: Mutex<(Vec<u64>, f64, u64)>,
}

impl Histogram {
    const fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            state: Mutex::new((Vec::new(), 0.0, 0)),
        }
    }

    pub fn observe(&self, d: Duration) {
        let x = d.as_secs_f64();
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.0.is_empty() {
            s.0 = vec![0; self.bounds.len()];
        }
        if let Some(i) = self.bounds.iter().position(|&b| x <= b) {
            s.0[i] += 1;
        }
        s.1 += x;
        s.2 += 1;
    }

    fn render(&self, name: &str, help: &str, out: &mut String) {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cum = 0;
        for (i, b) in self.bounds.iter().enumerate() {
            cum += s.0.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cum}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", s.2);
        let _ = writeln!(out, "{name}_sum {}", s.1);
        let _ = writeln!(out, "{name}_count {}", s.2);
    }
}

#[derive(Default)]
struct Gauge(AtomicUsize);

impl Gauge {
    fn set(&self, v: usize) {
        self.0.store(v, Ordering::Relaxed)
    }
    fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

pub struct Metrics {
    by_status: Mutex<BTreeMap<u16, u64>>,
    pub prompt_tokens: AtomicU64,
    pub generation_tokens: AtomicU64,
    pub cached_tokens: AtomicU64,
    pub draft_tokens: AtomicU64,
    pub draft_accepted_tokens: AtomicU64,
    pub ttft: Histogram,
    pub itl: Histogram,
    pub e2e: Histogram,
    running: Gauge,
    waiting: Gauge,
    blocks_used: Gauge,
    blocks_cached: Gauge,
    blocks_free: Gauge,
    blocks_total: Gauge,
}

const TTFT: &[f64] = &[
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
const ITL: &[f64] = &[
    0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0, 2.5,
];
const E2E: &[f64] = &[
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            by_status: Mutex::new(BTreeMap::new()),
            prompt_tokens: AtomicU64::new(0),
            generation_tokens: AtomicU64::new(0),
            cached_tokens: AtomicU64::new(0),
            draft_tokens: AtomicU64::new(0),
            draft_accepted_tokens: AtomicU64::new(0),
            ttft: Histogram::new(TTFT),
            itl: Histogram::new(ITL),
            e2e: Histogram::new(E2E),
            running: Gauge::default(),
            waiting: Gauge::default(),
            blocks_used: Gauge::default(),
            blocks_cached: Gauge::default(),
            blocks_free: Gauge::default(),
            blocks_total: Gauge::default(),
        }
    }
}

impl Metrics {
    pub fn count_status(&self, status: u16) {
        *self
            .by_status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(status)
            .or_default() += 1;
    }

    /// The scheduler's state after a step (called on the engine thread).
    pub fn publish(&self, running: usize, waiting: usize, pool: PoolStats) {
        self.running.set(running);
        self.waiting.set(waiting);
        self.blocks_used.set(pool.held);
        self.blocks_cached.set(pool.cached);
        self.blocks_free.set(pool.free);
        self.blocks_total.set(pool.blocks);
    }

    /// Requests waiting, as the handlers see it between steps.
    pub fn set_waiting(&self, waiting: usize) {
        self.waiting.set(waiting);
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP superinfer_requests_total HTTP requests answered, by status.\n\
             # TYPE superinfer_requests_total counter"
        );
        for (status, n) in self
            .by_status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            let _ = writeln!(out, "superinfer_requests_total{{status=\"{status}\"}} {n}");
        }
        let counters = [
            (
                "superinfer_prompt_tokens_total",
                "Prompt tokens of finished requests (cached ones included).",
                &self.prompt_tokens,
            ),
            (
                "superinfer_generation_tokens_total",
                "Tokens generated.",
                &self.generation_tokens,
            ),
            (
                "superinfer_prompt_tokens_cached_total",
                "Prompt tokens whose keys and values came from the prefix cache.",
                &self.cached_tokens,
            ),
            (
                "superinfer_spec_decode_draft_tokens_total",
                "Tokens drafted by speculative decoding (draft model or prompt lookup) and verified.",
                &self.draft_tokens,
            ),
            (
                "superinfer_spec_decode_accepted_tokens_total",
                "Drafted tokens the model accepted.",
                &self.draft_accepted_tokens,
            ),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                v.load(Ordering::Relaxed)
            );
        }
        self.ttft.render(
            "superinfer_time_to_first_token_seconds",
            "From a request's arrival to its first generated token.",
            &mut out,
        );
        self.itl.render(
            "superinfer_inter_token_latency_seconds",
            "Between consecutive tokens of a stream.",
            &mut out,
        );
        self.e2e.render(
            "superinfer_request_duration_seconds",
            "From a generation request's arrival to its last token.",
            &mut out,
        );
        let gauges = [
            (
                "superinfer_requests_running",
                "Requests in a slot.",
                &self.running,
            ),
            (
                "superinfer_requests_waiting",
                "Requests waiting for a slot.",
                &self.waiting,
            ),
            (
                "superinfer_kv_blocks_used",
                "KV cache blocks held by running requests.",
                &self.blocks_used,
            ),
            (
                "superinfer_kv_blocks_cached",
                "KV cache blocks kept for the prefix cache (evictable).",
                &self.blocks_cached,
            ),
            (
                "superinfer_kv_blocks_free",
                "KV cache blocks neither held nor cached.",
                &self.blocks_free,
            ),
            (
                "superinfer_kv_blocks_total",
                "KV cache blocks in the pool.",
                &self.blocks_total,
            ),
        ];
        for (name, help, g) in gauges {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {}",
                g.get()
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = Metrics::default();
        m.ttft.observe(Duration::from_millis(20));
        m.ttft.observe(Duration::from_millis(200));
        m.ttft.observe(Duration::from_secs(100));
        m.count_status(200);
        m.count_status(400);
        m.count_status(200);
        let t = m.render();
        assert!(
            t.contains("superinfer_time_to_first_token_seconds_bucket{le=\"0.025\"} 1\n"),
            "{t}"
        );
        assert!(t.contains("superinfer_time_to_first_token_seconds_bucket{le=\"0.25\"} 2\n"));
        assert!(t.contains("superinfer_time_to_first_token_seconds_bucket{le=\"60\"} 2\n"));
        assert!(t.contains("superinfer_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3\n"));
        assert!(t.contains("superinfer_requests_total{status=\"200\"} 2\n"));
        assert!(t.contains("superinfer_requests_total{status=\"400\"} 1\n"));
    }
}
