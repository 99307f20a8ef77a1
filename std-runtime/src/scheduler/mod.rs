//! The scheduler: many requests advancing together, one batched step at a time (continuous
//! batching, as vLLM and llama-server do it).
//!
//! - **Slots**: at most `n_parallel` requests run at once; the rest wait in a bounded
//!   first-come first-served queue ([`Client::submit`] refuses at once when it is full).
//! - **Steps**: each step is one forward pass over a token budget (`n_batch`): every running
//!   request's next decode token first, then prompt chunks, oldest request first, fill the
//!   rest (chunked prefill: a long prompt holds the running streams up for one step's worth
//!   of tokens at most). A sequence's logits do not depend on what shares its step, so
//!   batching never changes an answer.
//! - **KV cache**: one paged pool ([`KvPool`]) for all requests; a prompt that begins with
//!   blocks already cached (a shared system prompt, an earlier turn of a chat) takes them
//!   instead of computing them, and a request whose prompt shares whole blocks with a prompt
//!   still being processed waits for those blocks rather than computing them twice.
//! - **Streams**: each request gets its own sampler and stop rules and a channel of
//!   [`Event`]s; cancellation (or dropping the [`Handle`]) takes effect at the next step
//!   boundary and frees the request's blocks. A request that cannot go on (its blocks cannot
//!   be had) ends with a typed error; the others go on.
//!
//! There is no thread per request: the caller drives [`Scheduler::step`] (or
//! [`Scheduler::run`] on a thread of its own) and the engine's thread pool works inside each
//! step.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use superinfer_runtime::scheduler::Request;
//! use superinfer_runtime::{Engine, EngineOptions, Scheduler, SchedulerOptions};
//!
//! let engine = Engine::load("model.gguf".as_ref(), &EngineOptions::default())?;
//! let opts = SchedulerOptions { n_parallel: 8, ..Default::default() };
//! let mut sched = Scheduler::new(&engine, &opts)?;
//! let prompt = engine.tokenizer().encode("The capital of France is", true, true)?;
//! let handle = sched.submit(Request::greedy(prompt, 32))?; // from any thread: sched.client()
//! sched.run_until_idle()?; // or sched.run(&stop) on a thread
//! let (ids, text, done) = handle.wait()?;
//! # let _ = (ids, text, done);
//! # Ok(()) }
//! ```
//!
//! (`docs/usage.md` shows the same; `examples/batch.rs` is a runnable version.)

mod active;
mod request;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use superinfer_core::model::{forward, KvPool, Logits, PoolOptions, PoolStats, Scratch, Step};
use superinfer_core::ops::attention::{KvType, BLOCK};
use superinfer_core::sampler::Sampler;

use self::active::Active;
pub use self::request::{
    Canceller, Client, Completion, ConstraintFactory, Event, EventSink, Handle, Lookup, MaskStats,
    Request, RequestError, RequestId, Ticket, TokenLogprob, MAX_DRAFT_TOKENS, MAX_LOOKUP_NGRAM,
    MAX_TOP_LOGPROBS, TEXT_ONLY,
};
use self::request::{Limits, Submission};
use crate::engine::Engine;
use crate::session::{StopReason, UBATCH};
use crate::speculative::{check_vocab, DraftModel, DraftOptions};
use crate::Error;

#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// Requests that run at once (llama.cpp's `-np`).
    pub n_parallel: usize,
    /// Tokens per step (llama.cpp's `-b`): decode tokens first, prompt chunks fill the rest.
    pub n_batch: usize,
    /// Most prompt tokens in a step while requests are decoding (0: up to `n_batch`): a
    /// step's prompt chunk delays every running stream's next token, so a smaller chunk
    /// keeps streams smooth, while a prompt with nobody decoding still gets `n_batch`.
    pub prefill_chunk: usize,
    /// One sequence's context (prompt + generated); 0 = min(4096, the trained context).
    pub n_ctx: usize,
    /// Positions the KV pool holds for all sequences; 0 = `n_ctx × n_parallel`.
    pub kv_size: usize,
    pub cache_type_k: KvType,
    pub cache_type_v: KvType,
    /// Requests that may wait for a slot; more are refused with `QueueFull`.
    pub max_queue: usize,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            n_parallel: 4,
            n_batch: 512,
            prefill_chunk: 0,
            n_ctx: 0,
            kv_size: 0,
            cache_type_k: KvType::F16,
            cache_type_v: KvType::F16,
            max_queue: 64,
        }
    }
}

/// What one step did.
#[derive(Debug, Clone, Copy, Default)]
pub struct StepStats {
    pub prompt_tokens: usize,
    /// Decode tokens, drafted tokens verified with them included.
    pub decode_tokens: usize,
    /// Requests running after the step.
    pub running: usize,
    pub time: Duration,
}

/// The scheduler's draft model: requests that ask for it (`Request::draft_model`) each get
/// a [`DraftModel`] (its own session over `engine`), kept idle between requests so the next
/// one reuses its cache and buffers.
struct Drafts<'e> {
    engine: &'e Engine,
    opts: DraftOptions,
    idle: Vec<DraftModel<'e>>,
}

pub struct Scheduler<'e> {
    engine: &'e Engine,
    draft: Option<Drafts<'e>>,
    n_parallel: usize,
    n_batch: usize,
    prefill_chunk: usize,
    pool: KvPool,
    scratch: Scratch,
    step: Step,
    /// Per entry of the step: the index in `active` of its request.
    owner: Vec<usize>,
    /// A decode span being built (the pending token and its draft), reused.
    span: Vec<u32>,
    rx: Receiver<Submission>,
    client: Client,
    queue: VecDeque<Submission>,
    /// Running requests, oldest first.
    active: Vec<Active<'e>>,
}

impl<'e> Scheduler<'e> {
    pub fn new(engine: &'e Engine, o: &SchedulerOptions) -> Result<Scheduler<'e>, Error> {
        let c = engine.config();
        if c.arch.is_encoder() {
            return Err(Error::Usage(format!(
                "{} is an encoder (sentence embeddings): it does not generate text (use \
                 `superinfer embed`)",
                c.arch.name()
            )));
        }
        let n_ctx = engine.context_size(o.n_ctx)?;
        if o.n_parallel == 0 {
            return Err(Error::Usage("-np must be at least 1".into()));
        }
        if o.n_batch < o.n_parallel {
            return Err(Error::Usage(format!(
                "-b {} must be at least -np {} (each running sequence decodes one token per step)",
                o.n_batch, o.n_parallel
            )));
        }
        let kv_size = if o.kv_size == 0 {
            n_ctx * o.n_parallel
        } else {
            o.kv_size
        };
        if kv_size < n_ctx {
            return Err(Error::Usage(format!(
                "--kv-size {kv_size} must hold at least one context of {n_ctx} tokens"
            )));
        }
        let pool = KvPool::new(
            engine.weights(),
            &PoolOptions {
                n_ctx,
                n_positions: kv_size,
                k_type: o.cache_type_k,
                v_type: o.cache_type_v,
            },
        )
        .map_err(Error::Core)?;
        let (tx, rx) = std::sync::mpsc::channel();
        let client = Client {
            tx,
            waiting: Arc::new(AtomicUsize::new(0)),
            next_id: Arc::new(AtomicUsize::new(1)),
            limits: Limits {
                n_ctx,
                n_vocab: c.n_vocab,
                max_queue: o.max_queue,
                draft_model: false,
            },
        };
        Ok(Scheduler {
            engine,
            draft: None,
            n_parallel: o.n_parallel,
            n_batch: o.n_batch,
            prefill_chunk: o.prefill_chunk,
            pool,
            scratch: Scratch::new(UBATCH.min(o.n_batch)),
            step: Step::new(),
            owner: Vec::new(),
            span: Vec::new(),
            rx,
            client,
            queue: VecDeque::new(),
            active: Vec::new(),
        })
    }

    /// Adds a draft model for speculative decoding: requests with `draft_model: Some(n)`
    /// draft up to `n` tokens a step with it (`opts` gives the other settings). Checked here
    /// to share the target's vocabulary. Call before taking [`Self::client`]s: clients made
    /// earlier refuse draft requests.
    pub fn with_draft(mut self, draft: &'e Engine, opts: DraftOptions) -> Result<Self, Error> {
        check_vocab(self.engine, draft)?;
        self.client.limits.draft_model = true;
        self.draft = Some(Drafts {
            engine: draft,
            opts,
            idle: Vec::new(),
        });
        Ok(self)
    }

    /// A handle to submit requests from any thread.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Queues a request (as [`Client::submit`]).
    pub fn submit(&self, r: Request) -> Result<Handle, RequestError> {
        self.client.submit(r)
    }

    /// One sequence's context.
    pub fn n_ctx(&self) -> usize {
        self.pool.n_ctx()
    }

    /// Bytes of the KV pool.
    pub fn kv_cache_bytes(&self) -> usize {
        self.pool.bytes()
    }

    /// Block counts of the KV pool (held, cached, free).
    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    /// Cancels request `id` (waiting or running) at this step boundary; false when no such
    /// request is here (it ended, or was never received).
    pub fn cancel(&mut self, id: RequestId) -> bool {
        self.receive();
        let waiting = self.queue.iter().filter(|s| s.id == id).map(|s| &*s.cancel);
        let running = self.active.iter().filter(|a| a.id == id && !a.ended);
        let mut found = false;
        for flag in waiting.chain(running.map(Active::cancel_flag)) {
            flag.store(true, Ordering::Relaxed);
            found = true;
        }
        if found {
            self.drop_cancelled();
        }
        found
    }

    /// Requests running now.
    pub fn running(&self) -> usize {
        self.active.len()
    }

    /// Requests waiting for a slot (those already received).
    pub fn waiting(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing runs or waits (after taking in what was submitted).
    pub fn is_idle(&mut self) -> bool {
        self.receive();
        self.active.is_empty() && self.queue.is_empty()
    }

    fn receive(&mut self) {
        while let Ok(s) = self.rx.try_recv() {
            self.queue.push_back(s);
        }
    }

    /// Runs steps until no request runs or waits.
    pub fn run_until_idle(&mut self) -> Result<(), Error> {
        while !self.is_idle() {
            self.step()?;
        }
        Ok(())
    }

    /// Serves until `stop` is set: steps while there is work, waits for submissions when
    /// there is none. Requests still running or waiting at the end get `Closed`.
    pub fn run(&mut self, stop: &AtomicBool) -> Result<(), Error> {
        self.run_observed(stop, |_, _| {})
    }

    /// [`run`](Self::run), calling `observe` after every step (a server's metrics) and
    /// after it took in requests while idle.
    pub fn run_observed(
        &mut self,
        stop: &AtomicBool,
        mut observe: impl FnMut(&Scheduler<'e>, &StepStats),
    ) -> Result<(), Error> {
        while !stop.load(Ordering::Relaxed) {
            if self.is_idle() {
                match self.rx.recv_timeout(Duration::from_millis(50)) {
                    Ok(s) => self.queue.push_back(s),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => break,
                }
                continue;
            }
            let stats = self.step()?;
            observe(self, &stats);
        }
        for mut a in self.active.drain(..) {
            a.fail(RequestError::Closed);
            let _ = self.pool.remove_seq(a.seq);
        }
        for mut s in self.queue.drain(..) {
            s.events.send(Event::Error(RequestError::Closed));
        }
        Ok(())
    }

    /// One step: takes in new requests, drops cancelled ones, admits waiting ones to free
    /// slots, runs one forward pass over the planned tokens and streams what it sampled.
    pub fn step(&mut self) -> Result<StepStats, Error> {
        let t0 = Instant::now();
        self.receive();
        self.settle(false);
        self.drop_cancelled();
        self.admit();
        let (mut prompt_tokens, mut decode_tokens) = self.plan();
        if self.step.is_empty() && self.active.iter().any(Active::has_deferred) {
            // nothing else to run: wait for the late masks
            self.settle(true);
            (prompt_tokens, decode_tokens) = self.plan();
        }
        if !self.step.is_empty() {
            let e = self.engine;
            let tok = e.tokenizer();
            let (active, owner) = (&mut self.active, &self.owner);
            let result = forward(
                e.weights(),
                &mut self.pool,
                &mut self.scratch,
                e.kernels(),
                e.parallel(),
                &self.step,
                |i, logits| active[owner[i]].on_logits(logits, tok),
            );
            match result {
                Ok(()) => {
                    for sp in self.step.spans() {
                        let a = &mut self.active[self.owner[sp.first]];
                        if a.prompt_left() > 0 {
                            a.fed += sp.n;
                            a.follow_prompt();
                            continue;
                        }
                        if a.has_deferred() {
                            // its rows wait for the constraint's mask
                            a.deferred_span = Some(sp.n);
                            continue;
                        }
                        // a decode span: the pending token and the drafted tokens accepted
                        // stay, the rest of the span is rolled back
                        let keep = a.end_verify();
                        a.fed += keep;
                        if keep < sp.n {
                            let _ = self.pool.truncate(a.seq, a.fed);
                        }
                    }
                }
                // the step's requests end with the error; the others go on
                Err(err) => {
                    for sp in self.step.spans() {
                        let a = &mut self.active[self.owner[sp.first]];
                        a.fail(RequestError::Engine(err.to_string()));
                    }
                }
            }
        }
        // the late masks had the other sequences' sampling to finish in
        self.settle(false);
        self.retire();
        Ok(StepStats {
            prompt_tokens,
            decode_tokens,
            running: self.active.len(),
            time: t0.elapsed(),
        })
    }

    /// Samples the rows set aside for constraints whose masks are now computed (all of
    /// them with `wait`), and ends their decode spans as the step would have.
    fn settle(&mut self, wait: bool) {
        let tok = self.engine.tokenizer();
        for a in &mut self.active {
            if !a.has_deferred() || !(wait || a.mask_ready()) {
                continue;
            }
            a.replay(tok);
            if let Some(n) = a.deferred_span.take() {
                let keep = a.end_verify();
                a.fed += keep;
                if keep < n {
                    let _ = self.pool.truncate(a.seq, a.fed);
                }
            }
        }
    }

    fn drop_cancelled(&mut self) {
        let waiting = &self.client.waiting;
        self.queue.retain_mut(|s| {
            if s.cancelled() {
                waiting.fetch_sub(1, Ordering::AcqRel);
                s.events.send(Event::Error(RequestError::Cancelled));
            }
            !s.cancelled()
        });
        for a in &mut self.active {
            if a.cancelled() {
                a.finish(StopReason::Cancelled);
            }
        }
        self.retire();
    }

    /// Frees the blocks of requests that ended.
    fn retire(&mut self) {
        let pool = &mut self.pool;
        let mut idle = self.draft.as_mut().map(|d| &mut d.idle);
        self.active.retain_mut(|a| {
            if a.ended {
                let _ = pool.remove_seq(a.seq);
                if let (Some(idle), Some(d)) = (idle.as_mut(), a.take_draft_model()) {
                    idle.push(d);
                }
            }
            !a.ended
        });
    }

    /// A draft model for a request drafting up to `max` tokens with `sampling`: an idle one
    /// (the one whose cache shares most of `prompt`), else a new one.
    fn draft_model(
        &mut self,
        prompt: &[u32],
        sampling: &superinfer_core::sampler::SamplerConfig,
        max: usize,
    ) -> Result<DraftModel<'e>, Error> {
        let target = self.engine;
        let n_ctx = self.pool.n_ctx();
        let d = self
            .draft
            .as_mut()
            .ok_or_else(|| Error::Usage("no draft model".into()))?;
        // the time between two drafts of a request is a batched step of every request
        let opts = DraftOptions {
            max,
            adaptive: false,
            ..d.opts
        };
        let best = (0..d.idle.len()).max_by_key(|&i| d.idle[i].shared_prefix(prompt));
        match best {
            Some(i) => {
                let mut m = d.idle.swap_remove(i);
                m.reconfigure(sampling, opts)?;
                Ok(m)
            }
            None => DraftModel::new(target, d.engine, n_ctx, sampling, opts),
        }
    }

    /// Moves waiting requests into free slots, oldest first. A request whose prompt shares
    /// whole blocks with a prompt still being processed waits until those blocks are in the
    /// cache, then takes them from there.
    fn admit(&mut self) {
        while self.active.len() < self.n_parallel {
            let Some(front) = self.queue.front() else {
                break;
            };
            let prompt = &front.request.prompt;
            let key = lora_key(front.request.lora.as_ref());
            let pending = self.active.iter().any(|a| {
                if lora_key(a.lora.as_ref()) != key {
                    return false;
                }
                let shared = shared_blocks(prompt, &a.history()[..a.prompt_len()]) * BLOCK;
                a.prompt_left() > 0 && a.fed < shared
            });
            if pending {
                break;
            }
            let mut sub = self.queue.pop_front().expect("front exists");
            self.client.waiting.fetch_sub(1, Ordering::AcqRel);
            let sampler = match Sampler::new(sub.request.sampling.clone()) {
                Ok(s) => s,
                Err(e) => {
                    sub.events
                        .send(Event::Error(RequestError::InvalidSampling(e.to_string())));
                    continue;
                }
            };
            let drafter = match sub.request.draft_model {
                Some(max) => {
                    let r = &sub.request;
                    match self.draft_model(&r.prompt, &r.sampling, max) {
                        Ok(d) => Some(d),
                        Err(e) => {
                            sub.events.send(Event::Error(RequestError::Engine(format!(
                                "draft model: {e}"
                            ))));
                            continue;
                        }
                    }
                }
                None => None,
            };
            let seq = self.pool.add_seq();
            // blocks computed under other adapters are never taken, nor given
            let key = lora_key(sub.request.lora.as_ref());
            let _ = self.pool.set_prefix_key(seq, key);
            let cached = self
                .pool
                .reuse_prefix(seq, &sub.request.prompt)
                .unwrap_or(0);
            let tok = self.engine.tokenizer();
            let n_ctx = self.pool.n_ctx();
            let mut a = Active::new(sub, seq, cached, sampler, drafter, tok, n_ctx);
            // what the prefix cache gave the target, the draft evaluates now
            if cached > 0 {
                a.follow_prompt();
            }
            self.active.push(a);
        }
    }

    /// Fills the step: decode tokens first, then prompt chunks within the budget. Returns
    /// the prompt and decode tokens planned.
    fn plan(&mut self) -> (usize, usize) {
        self.step.clear();
        self.owner.clear();
        let mut budget = self.n_batch;
        let mut decoded = 0;
        let mut left = self
            .active
            .iter()
            .filter(|a| a.decode_token().is_some())
            .count();
        let mut span = std::mem::take(&mut self.span);
        for (i, a) in self.active.iter_mut().enumerate() {
            let Some(t) = a.decode_token() else { continue };
            left -= 1;
            // a request that decodes speculatively drafts into what of the budget the other
            // decode tokens leave; without room in the pool for the draft it decodes plainly
            span.clear();
            span.push(t);
            span.extend_from_slice(a.draft(budget.saturating_sub(left + 1)));
            if span.len() > 1 && self.pool.reserve(a.seq, span.len()).is_err() {
                span.truncate(1);
            }
            match self.pool.reserve(a.seq, span.len()) {
                Ok(()) => {
                    let logits = if span.len() > 1 {
                        Logits::From(0)
                    } else {
                        Logits::Last
                    };
                    a.begin_verify(span.len() - 1);
                    let slot = a.lora.as_ref().map(|l| self.step.add_lora_set(l));
                    self.step.add_with(a.seq, a.fed, &span, logits, slot);
                    self.owner.extend(std::iter::repeat_n(i, span.len()));
                    budget -= span.len();
                    decoded += span.len();
                }
                Err(e) => a.fail(pool_error(e)),
            }
        }
        self.span = span;
        if decoded > 0 && self.prefill_chunk > 0 {
            budget = budget.min(self.prefill_chunk);
        }
        let mut prompted = 0;
        let mut blocked = None;
        for (i, a) in self.active.iter_mut().enumerate() {
            if budget == 0 {
                break;
            }
            if a.ended || a.prompt_left() == 0 {
                continue;
            }
            let mut n = a.prompt_left().min(budget);
            if self.pool.reserve(a.seq, n).is_err() {
                // as much as the free blocks hold
                n = n.min(self.pool.room(a.seq).unwrap_or(0));
                if n == 0 || self.pool.reserve(a.seq, n).is_err() {
                    blocked = Some(i);
                    continue;
                }
            }
            let chunk = &a.history()[a.fed..a.fed + n];
            let logits = if n == a.prompt_left() {
                Logits::Last
            } else {
                Logits::None
            };
            let slot = a.lora.as_ref().map(|l| self.step.add_lora_set(l));
            self.step.add_with(a.seq, a.fed, chunk, logits, slot);
            self.owner.extend(std::iter::repeat_n(i, n));
            budget -= n;
            prompted += n;
        }
        if self.step.is_empty() {
            // nothing can move: the youngest blocked prompt gives its blocks back
            if let Some(i) = blocked {
                let a = &mut self.active[i];
                let needed = self.pool.blocks_needed(a.seq, a.prompt_left()).unwrap_or(0);
                a.fail(RequestError::KvPoolFull {
                    needed,
                    available: self.pool.available_blocks(),
                });
            }
        }
        (prompted, decoded)
    }
}

/// Whole blocks at the start of `a` that `b` starts with too (not counting `a`'s last token,
/// which always runs).
/// The prefix cache's key of a request's adapter set (0: none).
fn lora_key(set: Option<&superinfer_core::model::lora::LoraSet>) -> u64 {
    set.map_or(0, |s| s.key())
}

fn shared_blocks(a: &[u32], b: &[u32]) -> usize {
    let n = a[..a.len().saturating_sub(1)]
        .iter()
        .zip(b)
        .take_while(|(x, y)| x == y)
        .count();
    n / BLOCK
}

fn pool_error(e: superinfer_core::Error) -> RequestError {
    match e {
        superinfer_core::Error::KvPoolFull { needed, available } => {
            RequestError::KvPoolFull { needed, available }
        }
        e => RequestError::Engine(e.to_string()),
    }
}
