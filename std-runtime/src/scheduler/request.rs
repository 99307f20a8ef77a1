//! What a client hands the scheduler and what it gets back: a [`Request`] (prompt tokens,
//! sampling, stop rules), a [`Handle`] with the request's [`Event`] stream and a cancel switch,
//! and typed [`RequestError`]s for what is refused or fails.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use superinfer_core::generate::Constraint;
use superinfer_core::sampler::SamplerConfig;

use crate::session::StopReason;

/// One generation request.
#[derive(Debug, Clone)]
pub struct Request {
    /// Prompt tokens (not empty; BOS already added if the model wants one).
    pub prompt: Vec<u32>,
    /// Tokens to generate at most.
    pub max_tokens: usize,
    pub sampling: SamplerConfig,
    /// Texts that end generation when the output contains them (not included in the
    /// output).
    pub stop: Vec<String>,
    /// Keep generating through end-of-generation tokens (benchmarks).
    pub ignore_eos: bool,
    /// Report each generated token's log-probability and this many most likely
    /// alternatives (at most [`MAX_TOP_LOGPROBS`]); `None`: no log-probabilities.
    pub logprobs: Option<usize>,
    /// Speculative decoding by prompt lookup for this request (`None`: plain decoding).
    pub lookup: Option<Lookup>,
    /// Speculative decoding with the scheduler's draft model ([`Scheduler::with_draft`]),
    /// at most this many tokens per step (1 to [`MAX_DRAFT_TOKENS`]); takes precedence over
    /// `lookup`. `None`: no draft model.
    ///
    /// [`Scheduler::with_draft`]: super::Scheduler::with_draft
    pub draft_model: Option<usize>,
    /// Constrains the output (a grammar, a JSON schema, a tool-call format): makes the
    /// request's [`Constraint`] when it is admitted. `None`: free output.
    pub constraint: Option<ConstraintFactory>,
    /// LoRA adapters this request runs under (`None`: the base model): rows of different
    /// adapter sets share a step (the base products once, each set's low-rank terms per
    /// group), and the prefix cache is keyed by the set.
    pub lora: Option<superinfer_core::model::lora::LoraSet>,
}

/// Makes a request's [`Constraint`] (one per sequence; a request cloned makes its own).
#[derive(Clone)]
pub struct ConstraintFactory(Arc<dyn Fn() -> Box<dyn Constraint> + Send + Sync>);

impl ConstraintFactory {
    pub fn new(f: Arc<dyn Fn() -> Box<dyn Constraint> + Send + Sync>) -> ConstraintFactory {
        ConstraintFactory(f)
    }

    /// A new sequence's constraint.
    pub fn make(&self) -> Box<dyn Constraint> {
        (self.0)()
    }
}

impl fmt::Debug for ConstraintFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ConstraintFactory")
    }
}

/// Prompt lookup drafting (`LookupDrafter`): the request's text so far is searched for its
/// last `ngram` (down to 2) tokens, and what followed is verified as a draft of up to
/// `draft_max` tokens in the request's next step. The output is the same as without it
/// (the same tokens for greedy sampling, the same distribution otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lookup {
    pub ngram: usize,
    pub draft_max: usize,
}

pub use superinfer_core::generate::{MaskStats, TokenLogprob, MAX_TOP_LOGPROBS};

/// The longest n-gram prompt lookup matches, and the longest draft it may verify in a step.
pub const MAX_LOOKUP_NGRAM: usize = 16;
pub const MAX_DRAFT_TOKENS: usize = 64;

impl Request {
    /// Greedy decoding of `prompt` for up to `max_tokens` tokens.
    pub fn greedy(prompt: Vec<u32>, max_tokens: usize) -> Request {
        Request {
            prompt,
            max_tokens,
            sampling: SamplerConfig::greedy(),
            stop: Vec::new(),
            ignore_eos: false,
            logprobs: None,
            lookup: None,
            draft_model: None,
            constraint: None,
            lora: None,
        }
    }
}

/// Why a request was refused or failed. Each has a stable [`code`](Self::code) for frontends
/// (an HTTP error object, a JS error code); a request's error never affects another's.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestError {
    /// The prompt has no tokens.
    EmptyPrompt,
    /// The prompt leaves no room to generate in a sequence's context.
    PromptTooLong { tokens: usize, n_ctx: usize },
    /// A token id outside the vocabulary.
    InvalidToken { id: u32, n_vocab: usize },
    /// Invalid sampling parameters.
    InvalidSampling(String),
    /// More top log-probabilities asked for than [`MAX_TOP_LOGPROBS`].
    InvalidLogprobs(usize),
    /// The wait queue is full: try again later.
    QueueFull { capacity: usize },
    /// The KV pool has no room for this request's positions (other requests hold it).
    KvPoolFull { needed: usize, available: usize },
    /// Cancelled while it waited for a slot (a running request that is cancelled ends
    /// with `Done` and `StopReason::Cancelled` instead, keeping what it generated).
    Cancelled,
    /// The scheduler has shut down.
    Closed,
    /// The engine failed on this request's step.
    Engine(String),
}

impl RequestError {
    /// A short stable identifier.
    pub fn code(&self) -> &'static str {
        match self {
            RequestError::EmptyPrompt => "empty_prompt",
            RequestError::PromptTooLong { .. } => "context_length_exceeded",
            RequestError::InvalidToken { .. } => "invalid_token",
            RequestError::InvalidSampling(_) => "invalid_sampling",
            RequestError::InvalidLogprobs(_) => "invalid_logprobs",
            RequestError::QueueFull { .. } => "queue_full",
            RequestError::KvPoolFull { .. } => "kv_cache_full",
            RequestError::Cancelled => "cancelled",
            RequestError::Closed => "closed",
            RequestError::Engine(_) => "engine_error",
        }
    }

    /// Whether the client is at fault (as opposed to the server being busy or failing).
    pub fn is_client_error(&self) -> bool {
        matches!(
            self,
            RequestError::EmptyPrompt
                | RequestError::PromptTooLong { .. }
                | RequestError::InvalidToken { .. }
                | RequestError::InvalidSampling(_)
                | RequestError::InvalidLogprobs(_)
        )
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::EmptyPrompt => f.write_str("the prompt is empty"),
            RequestError::PromptTooLong { tokens, n_ctx } => write!(
                f,
                "the prompt has {tokens} tokens, but a sequence's context holds {n_ctx} \
                 (prompt + generated): shorten the prompt or raise -c"
            ),
            RequestError::InvalidToken { id, n_vocab } => {
                write!(f, "token id {id} is outside the vocabulary ({n_vocab})")
            }
            RequestError::InvalidSampling(m) => write!(f, "invalid sampling parameters: {m}"),
            RequestError::InvalidLogprobs(n) => write!(
                f,
                "{n} top log-probabilities asked for; at most {MAX_TOP_LOGPROBS} are given"
            ),
            RequestError::QueueFull { capacity } => write!(
                f,
                "the server is busy: {capacity} requests are already waiting; retry later"
            ),
            RequestError::KvPoolFull { needed, available } => write!(
                f,
                "the KV cache is full: {needed} more blocks needed, {available} available \
                 (raise --kv-size or lower -np)"
            ),
            RequestError::Cancelled => f.write_str("the request was cancelled"),
            RequestError::Closed => f.write_str("the scheduler has shut down"),
            RequestError::Engine(m) => write!(f, "engine error: {m}"),
        }
    }
}

impl std::error::Error for RequestError {}

/// The end of a request that completed (stopped by a rule or cancelled).
#[derive(Debug, Clone)]
pub struct Completion {
    pub stop: StopReason,
    pub prompt_tokens: usize,
    /// Prompt tokens whose keys and values came from the prefix cache.
    pub cached_tokens: usize,
    pub generated_tokens: usize,
    /// From admission to the first generated token (prompt processing).
    pub prompt_time: Duration,
    /// From the first generated token to the end.
    pub generate_time: Duration,
    /// From submission to admission.
    pub queue_time: Duration,
    /// Speculative decoding: tokens drafted, and drafted tokens accepted (0 without).
    pub drafted_tokens: usize,
    pub accepted_tokens: usize,
    /// With a constraint: what its masks cost (tokens it forced count in
    /// `drafted_tokens`).
    pub mask: Option<MaskStats>,
}

/// The id of a [`Event::Token`] that carries only text held back until the end of a request
/// (no token of its own).
pub const TEXT_ONLY: u32 = u32::MAX;

/// What a request's stream carries, in order: tokens, then one `Done` or `Error`.
#[derive(Debug, Clone)]
pub enum Event {
    /// A generated token and the text it completes (empty while a character is split
    /// across tokens or the text might be the start of a stop string).
    Token {
        id: u32,
        text: String,
        /// When the request asked for log-probabilities (never on [`TEXT_ONLY`] events).
        logprob: Option<Box<TokenLogprob>>,
    },
    Done(Completion),
    Error(RequestError),
}

/// Where a request's events go: a channel's sender, or anything a frontend delivers them
/// with (an async channel in a server). `send` returns false once nobody listens, which
/// cancels the request.
pub trait EventSink: Send + 'static {
    fn send(&mut self, event: Event) -> bool;
}

impl EventSink for Sender<Event> {
    fn send(&mut self, event: Event) -> bool {
        Sender::send(self, event).is_ok()
    }
}

/// Identifies a request within its scheduler.
pub type RequestId = u64;

/// A client's side of a request: its events and a way to cancel it.
pub struct Handle {
    pub id: RequestId,
    pub events: Receiver<Event>,
    ticket: Ticket,
}

impl Handle {
    /// Asks the scheduler to stop the request at its next step boundary (its blocks are
    /// freed; the stream ends with `Done` and `StopReason::Cancelled`). Dropping the handle
    /// cancels too.
    pub fn cancel(&self) {
        self.ticket.cancel();
    }

    /// A switch that cancels this request from any thread (the handle's receiver is not
    /// `Sync`: another thread cannot borrow the handle while its owner waits on it).
    pub fn canceller(&self) -> Canceller {
        Canceller(self.ticket.cancel.clone())
    }

    /// Waits for the whole request: the generated tokens and its completion.
    pub fn wait(self) -> Result<(Vec<u32>, String, Completion), RequestError> {
        let (mut ids, mut text) = (Vec::new(), String::new());
        for ev in self.events.iter() {
            match ev {
                Event::Token { id, text: t, .. } => {
                    if id != TEXT_ONLY {
                        ids.push(id);
                    }
                    text.push_str(&t);
                }
                Event::Done(c) => return Ok((ids, text, c)),
                Event::Error(e) => return Err(e),
            }
        }
        Err(RequestError::Closed)
    }
}

/// Cancels a request from any thread: [`Handle::canceller`].
#[derive(Clone)]
pub struct Canceller(Arc<AtomicBool>);

impl Canceller {
    /// As [`Handle::cancel`].
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A request submitted with its own [`EventSink`]: its id and cancel switch. Dropping it
/// cancels the request (a server drops it when its client goes away).
pub struct Ticket {
    pub id: RequestId,
    cancel: Arc<AtomicBool>,
}

impl Ticket {
    /// Asks the scheduler to stop the request at its next step boundary.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// A request on its way to the scheduler.
pub(super) struct Submission {
    pub id: RequestId,
    pub request: Request,
    pub events: Box<dyn EventSink>,
    pub cancel: Arc<AtomicBool>,
    pub submitted: Instant,
}

impl Submission {
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// Limits a [`Client`] checks before a request is queued.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub n_ctx: usize,
    pub n_vocab: usize,
    pub max_queue: usize,
    /// Whether requests may ask for the draft model.
    pub draft_model: bool,
}

/// Submits requests to a scheduler from any thread (cheap to clone).
#[derive(Clone)]
pub struct Client {
    pub(super) tx: Sender<Submission>,
    /// Requests submitted and not yet admitted to a slot.
    pub(super) waiting: Arc<AtomicUsize>,
    pub(super) next_id: Arc<AtomicUsize>,
    pub(super) limits: Limits,
}

impl Client {
    /// Requests submitted and not yet admitted to a slot.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// One sequence's context (prompt + generated tokens).
    pub fn n_ctx(&self) -> usize {
        self.limits.n_ctx
    }

    /// Queues `request`; refused at once (typed) when it can never run or the queue is full.
    pub fn submit(&self, request: Request) -> Result<Handle, RequestError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let ticket = self.submit_to(request, tx)?;
        Ok(Handle {
            id: ticket.id,
            events: rx,
            ticket,
        })
    }

    /// Queues `request` with its events delivered to `sink` (as [`submit`](Self::submit)).
    pub fn submit_to(
        &self,
        request: Request,
        sink: impl EventSink,
    ) -> Result<Ticket, RequestError> {
        let l = self.limits;
        if request.prompt.is_empty() {
            return Err(RequestError::EmptyPrompt);
        }
        if request.prompt.len() >= l.n_ctx {
            return Err(RequestError::PromptTooLong {
                tokens: request.prompt.len(),
                n_ctx: l.n_ctx,
            });
        }
        if let Some(&id) = request.prompt.iter().find(|&&t| t as usize >= l.n_vocab) {
            return Err(RequestError::InvalidToken {
                id,
                n_vocab: l.n_vocab,
            });
        }
        request
            .sampling
            .validate()
            .map_err(|e| RequestError::InvalidSampling(e.to_string()))?;
        if let Some(n) = request.logprobs.filter(|&n| n > MAX_TOP_LOGPROBS) {
            return Err(RequestError::InvalidLogprobs(n));
        }
        if let Some(l) = request.lookup {
            if !(1..=MAX_LOOKUP_NGRAM).contains(&l.ngram)
                || !(1..=MAX_DRAFT_TOKENS).contains(&l.draft_max)
            {
                return Err(RequestError::InvalidSampling(format!(
                    "prompt lookup needs an n-gram of 1 to {MAX_LOOKUP_NGRAM} tokens and drafts \
                     of 1 to {MAX_DRAFT_TOKENS} (got {} and {})",
                    l.ngram, l.draft_max
                )));
            }
        }
        if let Some(n) = request.draft_model {
            if !l.draft_model {
                return Err(RequestError::InvalidSampling(
                    "this scheduler has no draft model (a server takes one with \
                     --model-draft FILE)"
                        .into(),
                ));
            }
            if !(1..=MAX_DRAFT_TOKENS).contains(&n) {
                return Err(RequestError::InvalidSampling(format!(
                    "a draft model drafts 1 to {MAX_DRAFT_TOKENS} tokens per step (got {n})"
                )));
            }
        }
        let queued = self.waiting.fetch_add(1, Ordering::AcqRel);
        if queued >= l.max_queue {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(RequestError::QueueFull {
                capacity: l.max_queue,
            });
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) as RequestId;
        let sub = Submission {
            id,
            request,
            events: Box::new(sink),
            cancel: cancel.clone(),
            submitted: Instant::now(),
        };
        if self.tx.send(sub).is_err() {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(RequestError::Closed);
        }
        Ok(Ticket { id, cancel })
    }
}
