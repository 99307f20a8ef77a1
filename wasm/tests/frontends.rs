//! One set of per-token rules for every frontend: the same greedy requests on Qwen2.5-0.5B
//! (a chat prompt the model answers in a few tokens and ends), with and without
//! `ignore_eos`, with a stop string and `max_tokens`, give the same tokens, text and finish
//! reason through the three loops that drive core's `Generation`:
//! - `Session::generate_with` (what `superinfer run` / `chat` / `bench` call),
//! - the `Scheduler` (the server, `bench -np`), with other requests sharing its steps,
//! - the npm package's engine (`wasm/src/engine.rs`), natively here.

mod common;

use std::ops::ControlFlow;

use serde_json::{json, Value};
use superinfer_core::generate::{GenerateParams, StopReason, Token};
use superinfer_core::sampler::Sampler;
use superinfer_runtime::scheduler::Request;
use superinfer_runtime::{Engine as Native, Scheduler, SchedulerOptions};
use superinfer_wasm::engine::Engine as Package;

const N_CTX: usize = 256;
const PROMPT: &str = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n\
    <|im_start|>user\nWhat is the capital of France? One short sentence.<|im_end|>\n\
    <|im_start|>assistant\n";

/// What a frontend produced: the tokens, the text and OpenAI's finish reason.
#[derive(Debug, PartialEq)]
struct Answer {
    ids: Vec<u32>,
    text: String,
    finish: &'static str,
}

fn finish_reason(s: StopReason) -> &'static str {
    match s {
        StopReason::Length | StopReason::ContextFull => "length",
        _ => "stop",
    }
}

fn session(e: &Native, prompt: &[u32], p: &GenerateParams) -> (Answer, StopReason) {
    let mut s = e
        .session(&superinfer_runtime::SessionOptions::with_ctx(N_CTX))
        .unwrap();
    let (mut ids, mut text) = (Vec::new(), String::new());
    let stats = s
        .generate_with(prompt, p, &mut Sampler::greedy(), None, |t| {
            if t.id != Token::FLUSH {
                ids.push(t.id);
            }
            text.push_str(t.text);
            ControlFlow::Continue(())
        })
        .unwrap();
    // an end-of-generation token is sampled, not part of the answer
    let eog = usize::from(stats.stop == StopReason::EndOfGeneration);
    assert_eq!(stats.generated_tokens, ids.len() + eog);
    let a = Answer {
        ids,
        text,
        finish: finish_reason(stats.stop),
    };
    (a, stats.stop)
}

/// The request in a scheduler of 3 slots, beside two other requests (a sampled one and a
/// long greedy one), with a small step budget that cuts the prompts into chunks.
fn scheduled(e: &Native, prompt: &[u32], p: &GenerateParams) -> (Answer, StopReason) {
    let mut sched = Scheduler::new(
        e,
        &SchedulerOptions {
            n_parallel: 3,
            n_batch: 16,
            n_ctx: N_CTX,
            ..Default::default()
        },
    )
    .unwrap();
    let mut other = Request::greedy(prompt[..prompt.len() / 2].to_vec(), 6);
    other.sampling.temperature = 0.9;
    other.sampling.seed = 3;
    let h1 = sched.submit(other).unwrap();
    let h2 = sched
        .submit(Request {
            ignore_eos: true,
            ..Request::greedy(prompt[3..].to_vec(), 8)
        })
        .unwrap();
    let h = sched
        .submit(Request {
            max_tokens: p.max_tokens,
            ignore_eos: p.ignore_eos,
            stop: p.stop.clone(),
            ..Request::greedy(prompt.to_vec(), 0)
        })
        .unwrap();
    while !sched.is_idle() {
        sched.step().unwrap();
    }
    h1.wait().unwrap();
    h2.wait().unwrap();
    let (ids, text, done) = h.wait().unwrap();
    let eog = usize::from(done.stop == StopReason::EndOfGeneration);
    assert_eq!(done.generated_tokens, ids.len() + eog);
    let a = Answer {
        ids,
        text,
        finish: finish_reason(done.stop),
    };
    (a, done.stop)
}

fn package(e: &mut Package, prompt: &[u32], p: &GenerateParams) -> Answer {
    e.begin(&json!({
        "prompt": prompt,
        "max_tokens": p.max_tokens,
        "temperature": 0,
        "stop": p.stop,
        "ignore_eos": p.ignore_eos,
    }))
    .unwrap();
    while e.prefill(64).unwrap() > 0 {}
    let (mut ids, mut text) = (Vec::new(), String::new());
    loop {
        let t = e.next_token().unwrap();
        ids.extend(
            t["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32),
        );
        text.push_str(t["text"].as_str().unwrap());
        if let Value::String(f) = &t["finish"] {
            let finish = if f == "stop" { "stop" } else { "length" };
            // the usage's completion_tokens: the answer's tokens
            assert_eq!(t["generated"].as_u64(), Some(ids.len() as u64));
            return Answer { ids, text, finish };
        }
    }
}

#[test]
fn every_frontend_applies_the_same_rules() {
    let (native, mut pkg) = common::load_both(2, N_CTX);
    let prompt = native.encode_prompt(PROMPT).unwrap();
    let tok = native.tokenizer();

    let run = |p: &GenerateParams, pkg: &mut Package| {
        let (a, why) = session(&native, &prompt, p);
        let (b, why_b) = scheduled(&native, &prompt, p);
        let c = package(pkg, &prompt, p);
        assert_eq!(a, b, "run and the scheduler, {p:?}");
        assert_eq!(why, why_b, "run and the scheduler, {p:?}");
        assert_eq!(a, c, "run and the package, {p:?}");
        (a, why)
    };

    // the model answers and ends: an end-of-generation token, which is not part of the
    // answer (each frontend's count of sampled tokens includes it: asserted above)
    let (ends, why) = run(&GenerateParams::from(48), &mut pkg);
    assert_eq!(why, StopReason::EndOfGeneration, "{ends:?}");
    assert!(ends.text.contains("Paris"), "{ends:?}");

    // ignore_eos: end-of-generation tokens are masked, the answer goes on to max_tokens
    // from where the model would have ended
    let on = GenerateParams {
        max_tokens: ends.ids.len() + 12,
        ignore_eos: true,
        ..GenerateParams::default()
    };
    let (longer, why) = run(&on, &mut pkg);
    assert_eq!(why, StopReason::Length);
    assert_eq!(longer.ids.len(), on.max_tokens);
    assert_eq!(longer.ids[..ends.ids.len()], ends.ids[..]);
    assert!(longer.ids.iter().all(|&t| !tok.is_eog(t)), "{longer:?}");

    // a stop string that only the text past the model's own end contains: cut before it,
    // held back while it could begin (a prefix of it in the streamed text is never shown)
    let from = ends.text.len();
    let (stop, cut) = longer.text[from..]
        .char_indices()
        .map(|(i, _)| longer.text[from + i..].chars().take(3).collect::<String>())
        .filter(|s| s.chars().count() == 3)
        .find_map(|s| {
            let at = longer.text.find(&s)?;
            (at > from).then_some((s, at))
        })
        .expect("a stop string past the model's own end");
    let stopped = GenerateParams {
        stop: vec!["never in the text \u{1F600}".into(), stop.clone()],
        ..on.clone()
    };
    let (s, why) = run(&stopped, &mut pkg);
    assert_eq!(why, StopReason::StopSequence, "stop {stop:?}: {s:?}");
    assert_eq!(s.text, longer.text[..cut], "stop {stop:?}");
    assert_eq!(s.ids[..], longer.ids[..s.ids.len()]);

    // max_tokens ends it first when it comes before the stop string
    let short = GenerateParams {
        max_tokens: 3,
        ..stopped
    };
    let (m, why) = run(&short, &mut pkg);
    assert_eq!(why, StopReason::Length);
    assert_eq!(m.ids[..], ends.ids[..3]);
}
