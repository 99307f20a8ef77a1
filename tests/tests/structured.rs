//! Structured output on the real models through the scheduler: ten schemas (nested
//! objects, bounded arrays, enums, anyOf, string patterns, number ranges, optional
//! properties), greedy and sampled, every output parsed and validated against its schema
//! by an independent validator; tokens the schema fixes are fed as a draft; a pathological
//! grammar is refused or bounded, and never holds up a plain request beside it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use superinfer_runtime::core::sampler::SamplerConfig;
use superinfer_runtime::scheduler::{Completion, ConstraintFactory, Request};
use superinfer_runtime::{Engine, EngineOptions, Scheduler, SchedulerOptions, StopReason};
use superinfer_structured::{Compiled, Grammar, Grammars};
use superinfer_tests::json_schema::validate;
use superinfer_tests::{require_model, GEMMA3_270M, QWEN_05B};

fn engine(model: (&str, &str, &str)) -> Engine {
    Engine::load(
        &require_model(model),
        &EngineOptions {
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap()
}

fn chat(model: &str, user: &str) -> String {
    if model.starts_with("gemma") {
        format!("<start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n")
    } else {
        format!("<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")
    }
}

/// (what to ask, the schema)
fn cases() -> Vec<(&'static str, Value)> {
    let name = json!({"type": "string", "minLength": 1, "maxLength": 24});
    vec![
        (
            "Give a person as JSON.",
            json!({"type": "object", "properties": {"name": name, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
                   "required": ["name", "age"], "additionalProperties": false}),
        ),
        (
            "Give a user record as JSON.",
            json!({"type": "object", "properties": {
                "user": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 9999},
                         "email": {"type": "string", "pattern": "^[a-z]{1,12}@[a-z]{1,12}\\.com$"}},
                         "required": ["id", "email"], "additionalProperties": false},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "minItems": 1, "maxItems": 3}},
                "required": ["user", "tags"], "additionalProperties": false}),
        ),
        (
            "Pick a color and a count, as JSON.",
            json!({"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]},
                   "count": {"type": "integer", "minimum": 1, "maximum": 10}},
                   "required": ["color", "count"], "additionalProperties": false}),
        ),
        (
            "Give a value, a number or a word, as JSON.",
            json!({"type": "object", "properties": {"value": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 1000},
                   {"type": "string", "maxLength": 10}]}}, "required": ["value"], "additionalProperties": false}),
        ),
        (
            "When was the first moon landing? Answer as JSON.",
            json!({"type": "object", "properties": {"date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}},
                   "required": ["date"], "additionalProperties": false}),
        ),
        (
            "Give today's weather as JSON.",
            json!({"type": "object", "properties": {"temperature": {"type": "number", "minimum": -50, "maximum": 50},
                   "humidity": {"type": "integer", "minimum": 0, "maximum": 100}},
                   "required": ["temperature", "humidity"], "additionalProperties": false}),
        ),
        (
            "Give a book title as JSON.",
            json!({"type": "object", "properties": {"title": name, "subtitle": name},
                   "required": ["title"], "additionalProperties": false}),
        ),
        (
            "List two products with prices as JSON.",
            json!({"type": "object", "properties": {"items": {"type": "array", "maxItems": 2, "minItems": 1,
                   "items": {"type": "object", "properties": {"name": name, "price": {"type": "integer", "minimum": 0, "maximum": 999}},
                             "required": ["name", "price"], "additionalProperties": false}}},
                   "required": ["items"], "additionalProperties": false}),
        ),
        (
            "Report a status as JSON.",
            json!({"type": "object", "properties": {"ok": {"type": "boolean"}, "version": {"const": "1.0"}},
                   "required": ["ok", "version"], "additionalProperties": false}),
        ),
        (
            "Give three small numbers as a JSON array.",
            json!({"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 9}, "minItems": 2, "maxItems": 4}),
        ),
    ]
}

fn pattern_ok(p: &str, s: &str) -> bool {
    regex::Regex::new(p).unwrap().is_match(s)
}

fn factory(c: &Arc<Compiled>) -> ConstraintFactory {
    let c = c.clone();
    ConstraintFactory::new(Arc::new(move || c.constraint()))
}

/// Every schema through the scheduler, greedy and sampled, all at once; each output must
/// end by itself and validate.
fn schemas_on(model: (&str, &str, &str)) {
    let e = engine(model);
    let grammars = Grammars::new(e.tokenizer());
    let mut sched = Scheduler::new(
        &e,
        &SchedulerOptions {
            n_parallel: 10,
            n_ctx: 256,
            ..Default::default()
        },
    )
    .unwrap();
    let mut handles = Vec::new();
    for (i, (ask, schema)) in cases().into_iter().enumerate() {
        let compiled = grammars
            .compile(&Grammar::JsonSchema(schema.clone()))
            .unwrap();
        let prompt = e.encode_prompt(&chat(model.0, ask)).unwrap();
        for sampled in [false, true] {
            let mut r = Request::greedy(prompt.clone(), 120);
            if sampled {
                r.sampling = SamplerConfig {
                    temperature: 0.8,
                    seed: i as u64 + 1,
                    ..SamplerConfig::greedy()
                };
            }
            r.constraint = Some(factory(&compiled));
            handles.push((schema.clone(), sampled, sched.submit(r).unwrap()));
        }
    }
    sched.run_until_idle().unwrap();
    for (schema, sampled, h) in handles {
        let (_, text, done) = h.wait().unwrap();
        assert_eq!(
            done.stop,
            StopReason::EndOfGeneration,
            "{} (sampled {sampled}): did not end: {text:?}",
            model.0
        );
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|err| panic!("{} (sampled {sampled}): {text:?}: {err}", model.0));
        if let Some(err) = validate(&schema, &v, &pattern_ok) {
            panic!(
                "{} (sampled {sampled}): {text} against {schema}: {err}",
                model.0
            );
        }
        let m = done.mask.expect("a constrained request reports its masks");
        assert!(m.masks > 0 && m.p99_us >= m.median_us, "{m:?}");
    }
}

#[test]
fn schemas_qwen() {
    schemas_on(QWEN_05B);
}

#[test]
fn schemas_gemma() {
    schemas_on(GEMMA3_270M);
}

fn run_one(sched: &mut Scheduler<'_>, r: Request) -> (String, Completion) {
    let h = sched.submit(r).unwrap();
    sched.run_until_idle().unwrap();
    let (_, text, done) = h.wait().unwrap();
    (text, done)
}

/// Keys and punctuation the schema fixes are verified as a draft, several tokens a step.
#[test]
fn forced_tokens_are_a_draft() {
    let e = engine(QWEN_05B);
    let grammars = Grammars::new(e.tokenizer());
    let mut sched = Scheduler::new(
        &e,
        &SchedulerOptions {
            n_parallel: 2,
            n_ctx: 256,
            ..Default::default()
        },
    )
    .unwrap();
    let schema = json!({"type": "object", "properties": {
        "first_name": {"type": "string", "maxLength": 12},
        "last_name": {"type": "string", "maxLength": 12},
        "year_of_birth": {"type": "integer", "minimum": 1900, "maximum": 2020}},
        "required": ["first_name", "last_name", "year_of_birth"], "additionalProperties": false});
    let c = grammars
        .compile(&Grammar::JsonSchema(schema.clone()))
        .unwrap();
    let prompt = e
        .encode_prompt(&chat("qwen", "Name a famous scientist as JSON."))
        .unwrap();
    let mut r = Request::greedy(prompt, 80);
    r.constraint = Some(factory(&c));
    let (text, done) = run_one(&mut sched, r);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|err| panic!("{text:?}: {err}"));
    assert!(validate(&schema, &v, &pattern_ok).is_none(), "{text}");
    // `{"first_name": "`, `", "last_name": "`, `", "year_of_birth": ` are forced
    assert!(
        done.drafted_tokens >= 6 && done.accepted_tokens == done.drafted_tokens,
        "{done:?}"
    );
}

/// A grammar that is pathological is refused, or its masks are bounded, and a plain
/// request in the same steps is not held up.
#[test]
fn pathological_grammar_is_bounded() {
    let e = engine(QWEN_05B);
    let grammars = Grammars::new(e.tokenizer());
    // deep recursion and exponential ambiguity
    let nested = format!("start: {}\"x\"{}\n", "(\"a\" ".repeat(60), " )".repeat(60));
    let t0 = Instant::now();
    let mut ok = Vec::new();
    for g in [
        Grammar::Lark("start: x\nx: \"a\" | x x | x x x\n".into()),
        Grammar::Lark(nested),
        Grammar::Regex("(a|aa|aaa)*(b|bb)*c{0,40}".into()),
    ] {
        match grammars.compile(&g) {
            Ok(c) => ok.push(c),
            Err(err) => assert_eq!(err.code, "grammar_too_large", "{err}"),
        }
    }
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    let mut sched = Scheduler::new(
        &e,
        &SchedulerOptions {
            n_parallel: 4,
            n_ctx: 128,
            ..Default::default()
        },
    )
    .unwrap();
    let prompt = e.encode_prompt(&chat("qwen", "Say a word.")).unwrap();
    let plain = sched.submit(Request::greedy(prompt.clone(), 24)).unwrap();
    let mut hs = Vec::new();
    for c in &ok {
        let mut r = Request::greedy(prompt.clone(), 24);
        r.constraint = Some(factory(c));
        hs.push(sched.submit(r).unwrap());
    }
    let t = Instant::now();
    sched.run_until_idle().unwrap();
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    let (_, _, done) = plain.wait().unwrap();
    assert!(done.generated_tokens > 0);
    for h in hs {
        let (_, _, done) = h.wait().unwrap();
        let m = done.mask.unwrap();
        // each mask within llguidance's fuel: tens of milliseconds at most
        assert!(m.max_us < 200_000, "{m:?}");
    }
}

/// A constraint that allows everything, its mask ready only `delay` after each commit.
struct Late {
    ready_at: Instant,
    delay: Duration,
}

impl superinfer_runtime::core::generate::Constraint for Late {
    fn mask(&mut self, _logits: &mut [f32]) -> bool {
        while Instant::now() < self.ready_at {
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    fn commit(&mut self, _id: u32) {
        self.ready_at = Instant::now() + self.delay;
    }

    fn ready(&self) -> bool {
        Instant::now() >= self.ready_at
    }
}

/// A sequence whose mask is late sets its rows aside: the plain request beside it is not
/// held up, and the late one's output is what it is without the constraint.
#[test]
fn a_late_mask_does_not_hold_up_the_step() {
    let e = engine(QWEN_05B);
    let mut sched = Scheduler::new(
        &e,
        &SchedulerOptions {
            n_parallel: 2,
            n_ctx: 128,
            ..Default::default()
        },
    )
    .unwrap();
    let prompt = e
        .encode_prompt(&chat("qwen", "Count from one to twenty."))
        .unwrap();
    let (expected, _) = run_one(&mut sched, Request::greedy(prompt.clone(), 12));
    let mut late = Request::greedy(prompt.clone(), 12);
    late.constraint = Some(ConstraintFactory::new(Arc::new(|| {
        Box::new(Late {
            ready_at: Instant::now(),
            delay: Duration::from_millis(300),
        })
    })));
    let late = sched.submit(late).unwrap();
    let plain = sched.submit(Request::greedy(prompt, 12)).unwrap();
    sched.run_until_idle().unwrap();
    let (_, late_text, late_done) = late.wait().unwrap();
    let (_, plain_text, plain_done) = plain.wait().unwrap();
    assert_eq!(late_text, expected);
    assert_eq!(plain_text, expected);
    // 11 masks of 300 ms for the late one; the plain one goes at the model's pace
    assert!(
        late_done.generate_time > Duration::from_secs(3),
        "{late_done:?}"
    );
    assert!(
        plain_done.generate_time * 2 < late_done.generate_time,
        "plain {:?}, late {:?}",
        plain_done.generate_time,
        late_done.generate_time
    );
}
