//! Prometheus metrics (through `prometheus-client`, in the Prometheus text format 0.0.4):
//! request counts by status, token counters, latency histograms and the scheduler's gauges
//! (published by the engine thread after every step).
//!
//! The same series are exported a second time under vLLM's names with its `model_name`
//! label (`vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc`, ...: `register_vllm`), the
//! names that routers and autoscalers read (Kubernetes' Gateway API Inference Extension,
//! llm-d, KEDA, the vLLM production stack): a replica drops into a fleet built for vLLM.

use std::borrow::Cow;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use superinfer_runtime::core::model::PoolStats;

/// The `Content-Type` of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Status {
    status: u16,
}

/// vLLM's `finished_reason` label of `vllm:request_success_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Finished {
    finished_reason: &'static str,
}

/// A latency histogram in seconds.
#[derive(Clone)]
pub struct Seconds(Histogram);

impl Seconds {
    fn new(bounds: &[f64]) -> Seconds {
        Seconds(Histogram::new(bounds.iter().copied()))
    }

    pub fn observe(&self, d: Duration) {
        self.0.observe(d.as_secs_f64());
    }
}

pub struct Metrics {
    registry: Registry,
    by_status: Family<Status, Counter>,
    pub prompt_tokens: Counter,
    pub generation_tokens: Counter,
    pub cached_tokens: Counter,
    pub draft_tokens: Counter,
    pub draft_accepted_tokens: Counter,
    pub ttft: Seconds,
    pub itl: Seconds,
    pub e2e: Seconds,
    /// KV blocks the running requests hold, over the pool (vLLM's `kv_cache_usage_perc`:
    /// cached blocks are evictable, so they count as free).
    kv_usage: Gauge<f64, AtomicU64>,
    /// Requests that ended (vLLM's `request_success_total`, by finish reason).
    finished: Family<Finished, Counter>,
    /// Requests that gave their KV blocks back to be recomputed later.
    pub preemptions: Counter,
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
        Metrics::new("model")
    }
}

impl Metrics {
    /// The registry, with vLLM's series labelled `model_name = model` (the served name).
    pub fn new(model: &str) -> Self {
        let mut m = Metrics {
            registry: Registry::default(),
            by_status: Family::default(),
            prompt_tokens: Counter::default(),
            generation_tokens: Counter::default(),
            cached_tokens: Counter::default(),
            draft_tokens: Counter::default(),
            draft_accepted_tokens: Counter::default(),
            ttft: Seconds::new(TTFT),
            itl: Seconds::new(ITL),
            e2e: Seconds::new(E2E),
            kv_usage: Gauge::default(),
            finished: Family::default(),
            preemptions: Counter::default(),
            running: Gauge::default(),
            waiting: Gauge::default(),
            blocks_used: Gauge::default(),
            blocks_cached: Gauge::default(),
            blocks_free: Gauge::default(),
            blocks_total: Gauge::default(),
        };
        // counters are registered without their `_total`, help texts without their final
        // period: the encoder adds both
        let r = &mut m.registry;
        r.register(
            "superinfer_requests",
            "HTTP requests answered, by status",
            m.by_status.clone(),
        );
        let counters = [
            (
                "superinfer_prompt_tokens",
                "Prompt tokens of finished requests (cached ones included)",
                &m.prompt_tokens,
            ),
            (
                "superinfer_generation_tokens",
                "Tokens generated",
                &m.generation_tokens,
            ),
            (
                "superinfer_prompt_tokens_cached",
                "Prompt tokens whose keys and values came from the prefix cache",
                &m.cached_tokens,
            ),
            (
                "superinfer_spec_decode_draft_tokens",
                "Tokens drafted by speculative decoding (draft model or prompt lookup) and verified",
                &m.draft_tokens,
            ),
            (
                "superinfer_spec_decode_accepted_tokens",
                "Drafted tokens the model accepted",
                &m.draft_accepted_tokens,
            ),
        ];
        for (name, help, c) in counters {
            r.register(name, help, c.clone());
        }
        let histograms = [
            (
                "superinfer_time_to_first_token_seconds",
                "From a request's arrival to its first generated token",
                &m.ttft,
            ),
            (
                "superinfer_inter_token_latency_seconds",
                "Between consecutive tokens of a stream",
                &m.itl,
            ),
            (
                "superinfer_request_duration_seconds",
                "From a generation request's arrival to its last token",
                &m.e2e,
            ),
        ];
        for (name, help, h) in histograms {
            r.register(name, help, h.0.clone());
        }
        let gauges = [
            (
                "superinfer_requests_running",
                "Requests in a slot",
                &m.running,
            ),
            (
                "superinfer_requests_waiting",
                "Requests waiting for a slot",
                &m.waiting,
            ),
            (
                "superinfer_kv_blocks_used",
                "KV cache blocks held by running requests",
                &m.blocks_used,
            ),
            (
                "superinfer_kv_blocks_cached",
                "KV cache blocks kept for the prefix cache (evictable)",
                &m.blocks_cached,
            ),
            (
                "superinfer_kv_blocks_free",
                "KV cache blocks neither held nor cached",
                &m.blocks_free,
            ),
            (
                "superinfer_kv_blocks_total",
                "KV cache blocks in the pool",
                &m.blocks_total,
            ),
        ];
        for (name, help, g) in gauges {
            r.register(name, help, g.clone());
        }
        r.register(
            "superinfer_preemptions",
            "Requests that gave their KV blocks back to be recomputed later",
            m.preemptions.clone(),
        );
        m.register_vllm(model);
        m
    }

    /// vLLM's names for the same series (shared, not copied: each update shows in both).
    fn register_vllm(&mut self, model: &str) {
        let v = self
            .registry
            .sub_registry_with_label((Cow::Borrowed("model_name"), Cow::Owned(model.into())));
        let gauges = [
            (
                "vllm:num_requests_running",
                "Requests in a slot",
                &self.running,
            ),
            (
                "vllm:num_requests_waiting",
                "Requests waiting for a slot",
                &self.waiting,
            ),
        ];
        for (name, help, g) in gauges {
            v.register(name, help, g.clone());
        }
        v.register(
            "vllm:kv_cache_usage_perc",
            "KV cache usage: 1 means every block is held by a running request",
            self.kv_usage.clone(),
        );
        let counters = [
            (
                "vllm:prompt_tokens",
                "Prompt tokens of finished requests",
                &self.prompt_tokens,
            ),
            (
                "vllm:generation_tokens",
                "Tokens generated",
                &self.generation_tokens,
            ),
            (
                "vllm:prefix_cache_queries",
                "Prompt tokens looked up in the prefix cache",
                &self.prompt_tokens,
            ),
            (
                "vllm:prefix_cache_hits",
                "Prompt tokens found in the prefix cache",
                &self.cached_tokens,
            ),
            (
                "vllm:num_preemptions",
                "Requests preempted to free KV blocks",
                &self.preemptions,
            ),
        ];
        for (name, help, c) in counters {
            v.register(name, help, c.clone());
        }
        v.register(
            "vllm:request_success",
            "Requests that finished, by finish reason",
            self.finished.clone(),
        );
        let histograms = [
            (
                "vllm:time_to_first_token_seconds",
                "From a request's arrival to its first generated token",
                &self.ttft,
            ),
            (
                "vllm:inter_token_latency_seconds",
                "Between consecutive tokens of a stream",
                &self.itl,
            ),
            (
                "vllm:e2e_request_latency_seconds",
                "From a generation request's arrival to its last token",
                &self.e2e,
            ),
        ];
        for (name, help, h) in histograms {
            v.register(name, help, h.0.clone());
        }
    }
}

fn set(g: &Gauge, v: usize) {
    g.set(i64::try_from(v).unwrap_or(i64::MAX));
}

impl Metrics {
    pub fn count_status(&self, status: u16) {
        self.by_status.get_or_create(&Status { status }).inc();
    }

    /// Adds `n` to a token counter.
    pub fn add(counter: &Counter, n: usize) {
        counter.inc_by(n as u64);
    }

    /// A request ended with an OpenAI `finish_reason` (`stop`, `length`, `tool_calls`; a
    /// request that failed is not counted): vLLM's `stop`, `length` or `abort`.
    pub fn count_finished(&self, finish_reason: &str) {
        let finished_reason = match finish_reason {
            "length" => "length",
            "stop" | "tool_calls" | "function_call" => "stop",
            "error" => return,
            _ => "abort",
        };
        self.finished
            .get_or_create(&Finished { finished_reason })
            .inc();
    }

    /// The scheduler's state after a step (called on the engine thread).
    pub fn publish(&self, running: usize, waiting: usize, pool: PoolStats) {
        let usage = if pool.blocks == 0 {
            0.0
        } else {
            pool.held as f64 / pool.blocks as f64
        };
        self.kv_usage.set(usage);
        set(&self.running, running);
        set(&self.waiting, waiting);
        set(&self.blocks_used, pool.held);
        set(&self.blocks_cached, pool.cached);
        set(&self.blocks_free, pool.free);
        set(&self.blocks_total, pool.blocks);
    }

    /// Requests waiting, as the handlers see it between steps.
    pub fn set_waiting(&self, waiting: usize) {
        set(&self.waiting, waiting);
    }

    /// The exposition, in the Prometheus text format ([`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // writing into a String cannot fail
        let _ = prometheus_text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(name, labels) -> value` of every sample line.
    fn samples(text: &str) -> Vec<(String, f64)> {
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').expect("a sample line");
                (k.to_string(), v.parse().expect("a number"))
            })
            .collect()
    }

    fn value(text: &str, key: &str) -> Option<f64> {
        samples(text)
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

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
        let ttft = "superinfer_time_to_first_token_seconds";
        for (le, want) in [("0.01", 0.0), ("0.025", 1.0), ("0.25", 2.0), ("60", 2.0)] {
            assert_eq!(
                value(&t, &format!("{ttft}_bucket{{le=\"{le}\"}}")),
                Some(want),
                "le={le}: {t}"
            );
        }
        assert_eq!(
            value(&t, &format!("{ttft}_bucket{{le=\"+Inf\"}}")),
            Some(3.0)
        );
        assert_eq!(value(&t, &format!("{ttft}_count")), Some(3.0));
        let sum = value(&t, &format!("{ttft}_sum")).unwrap();
        assert!((sum - 100.22).abs() < 1e-9, "{sum}");
        assert_eq!(
            value(&t, "superinfer_requests_total{status=\"200\"}"),
            Some(2.0)
        );
        assert_eq!(
            value(&t, "superinfer_requests_total{status=\"400\"}"),
            Some(1.0)
        );
    }

    /// The names, types and labels the exposition had before it went through
    /// prometheus-client (dashboards and tests/server read them).
    #[test]
    fn names_and_types_are_kept() {
        let m = Metrics::default();
        m.count_status(503);
        Metrics::add(&m.generation_tokens, 7);
        m.publish(
            2,
            3,
            PoolStats {
                blocks: 10,
                held: 4,
                cached: 1,
                free: 5,
            },
        );
        let t = m.render();
        let types: Vec<(&str, &str)> = t
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| l.split_once(' ').unwrap())
            .collect();
        let want = [
            ("superinfer_requests_total", "counter"),
            ("superinfer_prompt_tokens_total", "counter"),
            ("superinfer_generation_tokens_total", "counter"),
            ("superinfer_prompt_tokens_cached_total", "counter"),
            ("superinfer_spec_decode_draft_tokens_total", "counter"),
            ("superinfer_spec_decode_accepted_tokens_total", "counter"),
            ("superinfer_time_to_first_token_seconds", "histogram"),
            ("superinfer_inter_token_latency_seconds", "histogram"),
            ("superinfer_request_duration_seconds", "histogram"),
            ("superinfer_requests_running", "gauge"),
            ("superinfer_requests_waiting", "gauge"),
            ("superinfer_kv_blocks_used", "gauge"),
            ("superinfer_kv_blocks_cached", "gauge"),
            ("superinfer_kv_blocks_free", "gauge"),
            ("superinfer_kv_blocks_total", "gauge"),
            ("superinfer_preemptions_total", "counter"),
        ];
        let ours: Vec<_> = types
            .iter()
            .copied()
            .filter(|(n, _)| n.starts_with("superinfer_"))
            .collect();
        assert_eq!(ours, want, "{t}");
        for (key, v) in [
            ("superinfer_requests_total{status=\"503\"}", 1.0),
            ("superinfer_generation_tokens_total", 7.0),
            ("superinfer_prompt_tokens_total", 0.0),
            ("superinfer_requests_running", 2.0),
            ("superinfer_requests_waiting", 3.0),
            ("superinfer_kv_blocks_used", 4.0),
            ("superinfer_kv_blocks_cached", 1.0),
            ("superinfer_kv_blocks_free", 5.0),
            ("superinfer_kv_blocks_total", 10.0),
        ] {
            assert_eq!(value(&t, key), Some(v), "{key}: {t}");
        }
    }

    /// The names exported under vLLM's scheme, each beside the `superinfer_` series it mirrors
    /// (counters without the `_total` the encoder adds).
    const VLLM_NAMES: &[&str] = &[
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
        "vllm:prefix_cache_queries",
        "vllm:prefix_cache_hits",
        "vllm:num_preemptions",
        "vllm:request_success",
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:e2e_request_latency_seconds",
    ];

    /// vLLM's names carry the same values as ours, labelled with the served model's name.
    #[test]
    fn vllm_names_mirror_ours() {
        let m = Metrics::new("qwen");
        Metrics::add(&m.prompt_tokens, 12);
        Metrics::add(&m.cached_tokens, 8);
        Metrics::add(&m.generation_tokens, 5);
        m.ttft.observe(Duration::from_millis(30));
        m.count_finished("stop");
        m.count_finished("tool_calls");
        m.count_finished("length");
        m.count_finished("cancelled");
        m.count_finished("error");
        m.publish(
            3,
            4,
            PoolStats {
                blocks: 8,
                held: 2,
                cached: 3,
                free: 3,
            },
        );
        let t = m.render();
        for name in VLLM_NAMES {
            assert!(
                t.lines().any(|l| l.starts_with(&format!("# TYPE {name}"))),
                "{name} missing: {t}"
            );
        }
        let l = "{model_name=\"qwen\"}";
        for (key, v) in [
            (format!("vllm:num_requests_running{l}"), 3.0),
            (format!("vllm:num_requests_waiting{l}"), 4.0),
            (format!("vllm:kv_cache_usage_perc{l}"), 0.25),
            (format!("vllm:prompt_tokens_total{l}"), 12.0),
            (format!("vllm:prefix_cache_queries_total{l}"), 12.0),
            (format!("vllm:prefix_cache_hits_total{l}"), 8.0),
            (format!("vllm:generation_tokens_total{l}"), 5.0),
            (format!("vllm:num_preemptions_total{l}"), 0.0),
            (format!("vllm:time_to_first_token_seconds_count{l}"), 1.0),
            (
                "vllm:request_success_total{model_name=\"qwen\",finished_reason=\"stop\"}".into(),
                2.0,
            ),
            (
                "vllm:request_success_total{model_name=\"qwen\",finished_reason=\"length\"}".into(),
                1.0,
            ),
            (
                "vllm:request_success_total{model_name=\"qwen\",finished_reason=\"abort\"}".into(),
                1.0,
            ),
        ] {
            assert_eq!(value(&t, &key), Some(v), "{key}: {t}");
        }
    }
}
