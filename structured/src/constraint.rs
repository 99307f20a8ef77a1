//! A sequence's grammar constraint, its next mask computed beside the forward pass.
//!
//! [`commit`](Constraint::commit) hands the token to a worker thread (one per sequence)
//! and returns: the worker advances the parser, computes the tokens the grammar forces
//! and, when there are none, the next mask, while the frontend runs the next forward pass.
//! [`mask`](Constraint::mask) waits for that mask (usually long done) and applies it.
//! Forced tokens are handed out by [`forced`](Constraint::forced) as the next step's
//! draft; the mask at each of their positions allows that token alone, known without the
//! worker. Where no thread can be made (wasm), the same work runs inline, on demand.

use llguidance::Instant;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

use llguidance::Matcher;
use superinfer_core::generate::{Constraint, MaskStats};
use toktrie::SimpleVob;

/// How long [`Constraint::forced`] waits for the worker's forced tokens (computing them
/// takes microseconds; the mask after them may take longer and is not waited for there).
const FORCED_WAIT: Duration = Duration::from_millis(2);

/// What the parser allows at the next position (the first one, computed at compile).
#[derive(Clone)]
pub(crate) struct Step {
    /// Tokens the grammar forces from here (then `mask` is not computed).
    forced: Vec<u32>,
    /// The allowed tokens (None: none, the grammar is complete or failed).
    mask: Option<Arc<SimpleVob>>,
    us: u32,
}

impl Step {
    /// The parser's next step: its forced tokens, else its mask.
    pub fn compute(m: &mut Matcher) -> Step {
        let t0 = Instant::now();
        let forced = forced_of(m);
        let mask = if forced.is_empty() { mask_of(m) } else { None };
        Step {
            forced,
            mask,
            us: micros(t0),
        }
    }
}

fn micros(t0: Instant) -> u32 {
    t0.elapsed().as_micros().min(u32::MAX as u128) as u32
}

fn forced_of(m: &mut Matcher) -> Vec<u32> {
    if m.is_stopped() {
        Vec::new()
    } else {
        m.compute_ff_tokens()
    }
}

fn mask_of(m: &mut Matcher) -> Option<Arc<SimpleVob>> {
    if m.is_stopped() || m.is_error() {
        return None;
    }
    m.compute_mask().ok().map(Arc::new)
}

/// What the worker is asked: consume a token, then (`compute`) work out the next step.
struct Job {
    token: u32,
    compute: bool,
}

/// What the worker answers a job that computes: the forced tokens first, then (when there
/// are none) the mask; each with the microseconds since the job's token was consumed.
enum Msg {
    Forced(Vec<u32>, u32),
    Mask(Option<Arc<SimpleVob>>, u32),
}

/// Runs a job, handing its messages to `out`.
fn run(m: &mut Matcher, job: Job, out: &mut dyn FnMut(Msg) -> bool) {
    // an error leaves the matcher failed: its next step allows nothing
    let _ = m.consume_token(job.token);
    if !job.compute {
        return;
    }
    let t0 = Instant::now();
    let forced = forced_of(m);
    let done = !forced.is_empty();
    if !out(Msg::Forced(forced, micros(t0))) || done {
        return;
    }
    let mask = mask_of(m);
    out(Msg::Mask(mask, micros(t0)));
}

enum Backend {
    Thread {
        jobs: Sender<Job>,
        msgs: Receiver<Msg>,
        /// Jobs the worker has finished.
        done: Arc<AtomicUsize>,
    },
    Inline {
        matcher: Box<Matcher>,
        jobs: VecDeque<Job>,
        msgs: VecDeque<Msg>,
    },
    /// The grammar could not be set up, or its worker is gone: nothing is allowed.
    Failed,
}

impl Backend {
    /// The next message, waiting at most `wait` (`None`: as long as it takes); `Err(())`
    /// when none will come.
    fn recv(&mut self, wait: Option<Duration>) -> Result<Option<Msg>, ()> {
        match self {
            Backend::Thread { msgs, .. } => match wait {
                None => msgs.recv().map(Some).map_err(|_| ()),
                Some(d) => match msgs.recv_timeout(d) {
                    Ok(m) => Ok(Some(m)),
                    Err(RecvTimeoutError::Timeout) => Ok(None),
                    Err(RecvTimeoutError::Disconnected) => Err(()),
                },
            },
            Backend::Inline {
                matcher,
                jobs,
                msgs,
            } => {
                while msgs.is_empty() {
                    let job = jobs.pop_front().ok_or(())?;
                    run(matcher, job, &mut |m| {
                        msgs.push_back(m);
                        true
                    });
                }
                Ok(msgs.pop_front())
            }
            Backend::Failed => Err(()),
        }
    }
}

/// What is owed by the worker for the next position.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Owed {
    Nothing,
    Forced,
    Mask,
}

/// The grammar constraint of one sequence ([`crate::Compiled::constraint`]).
pub(crate) struct Pipelined {
    backend: Backend,
    /// Jobs sent to the worker.
    sent: usize,
    owed: Owed,
    /// The next position's mask, once known (with nothing owed and no forced token: None
    /// means nothing is allowed).
    mask: Option<Arc<SimpleVob>>,
    /// Forced tokens still to come, the next position's first.
    queue: VecDeque<u32>,
    /// Microseconds of each step computed (forced tokens, or the mask).
    times: Vec<u32>,
    first_us: u32,
    compile_us: u32,
}

impl Pipelined {
    pub fn new(matcher: Matcher, first: Step, compile_us: u32) -> Pipelined {
        Pipelined {
            backend: spawn(matcher),
            sent: 0,
            owed: Owed::Nothing,
            queue: first.forced.into_iter().collect(),
            mask: first.mask,
            times: Vec::new(),
            first_us: first.us,
            compile_us,
        }
    }

    pub fn failed() -> Pipelined {
        Pipelined {
            backend: Backend::Failed,
            sent: 0,
            owed: Owed::Nothing,
            queue: VecDeque::new(),
            mask: None,
            times: Vec::new(),
            first_us: 0,
            compile_us: 0,
        }
    }

    /// Takes what the worker owes, if it comes within `wait` (`None`: waits for it all,
    /// the mask included).
    fn settle(&mut self, wait: Option<Duration>) {
        while self.owed != Owed::Nothing {
            match self.backend.recv(wait) {
                Ok(Some(Msg::Forced(f, us))) => {
                    if f.is_empty() {
                        self.owed = Owed::Mask;
                    } else {
                        self.times.push(us);
                        self.queue.extend(f);
                        self.owed = Owed::Nothing;
                    }
                }
                Ok(Some(Msg::Mask(m, us))) => {
                    self.times.push(us);
                    self.mask = m;
                    self.owed = Owed::Nothing;
                }
                Ok(None) => return,
                Err(()) => {
                    // the worker is gone: nothing is allowed
                    self.backend = Backend::Failed;
                    self.owed = Owed::Nothing;
                    self.mask = None;
                    self.queue.clear();
                }
            }
            if wait.is_some() && self.owed == Owed::Mask {
                // the forced tokens were asked for: the mask is not waited for
                return;
            }
        }
    }
}

fn spawn(matcher: Matcher) -> Backend {
    let (jobs, job_rx) = channel::<Job>();
    let (msg_tx, msgs) = channel::<Msg>();
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    // the matcher comes back when the thread cannot be made
    let slot = Arc::new(std::sync::Mutex::new(Some(matcher)));
    let s = slot.clone();
    let spawned = std::thread::Builder::new()
        .name("grammar-mask".into())
        .spawn(move || {
            let Some(mut m) = s.lock().ok().and_then(|mut g| g.take()) else {
                return;
            };
            drop(s);
            while let Ok(job) = job_rx.recv() {
                let mut alive = true;
                run(&mut m, job, &mut |msg| {
                    alive = msg_tx.send(msg).is_ok();
                    alive
                });
                d.fetch_add(1, Ordering::Release);
                if !alive {
                    return;
                }
            }
        });
    match spawned {
        Ok(_) => Backend::Thread { jobs, msgs, done },
        Err(_) => match slot.lock().ok().and_then(|mut g| g.take()) {
            Some(m) => Backend::Inline {
                matcher: Box::new(m),
                jobs: VecDeque::new(),
                msgs: VecDeque::new(),
            },
            None => Backend::Failed,
        },
    }
}

impl Constraint for Pipelined {
    fn mask(&mut self, logits: &mut [f32]) -> bool {
        if self.queue.is_empty() {
            self.settle(None);
        }
        if let Some(&t) = self.queue.front() {
            return allow_only(logits, t);
        }
        match &self.mask {
            Some(mask) => apply(mask, logits),
            None => false,
        }
    }

    fn commit(&mut self, id: u32) {
        let compute = if self.queue.front() == Some(&id) {
            self.queue.pop_front();
            self.queue.is_empty()
        } else {
            // a token the constraint did not force (it allowed only the forced one, so
            // this is a frontend that ignored the mask): start over from what was taken
            self.queue.clear();
            true
        };
        self.mask = None;
        self.owed = if compute { Owed::Forced } else { Owed::Nothing };
        let job = Job { token: id, compute };
        match &mut self.backend {
            Backend::Thread { jobs, .. } => {
                if jobs.send(job).is_err() {
                    self.backend = Backend::Failed;
                }
            }
            Backend::Inline { jobs, .. } => jobs.push_back(job),
            Backend::Failed => {}
        }
        self.sent += 1;
    }

    fn forced(&mut self, out: &mut Vec<u32>) {
        if self.queue.is_empty() && self.owed == Owed::Forced {
            self.settle(Some(FORCED_WAIT));
        }
        out.extend(self.queue.iter().copied());
    }

    fn ready(&self) -> bool {
        if !self.queue.is_empty() || self.owed == Owed::Nothing {
            return true;
        }
        match &self.backend {
            Backend::Thread { done, .. } => done.load(Ordering::Acquire) >= self.sent,
            Backend::Inline { .. } | Backend::Failed => true,
        }
    }

    fn stats(&self) -> Option<MaskStats> {
        let mut t = self.times.clone();
        t.sort_unstable();
        let at = |q: f64| -> u32 {
            if t.is_empty() {
                0
            } else {
                t[((t.len() - 1) as f64 * q).round() as usize]
            }
        };
        Some(MaskStats {
            masks: t.len(),
            median_us: at(0.5),
            p99_us: at(0.99),
            max_us: t.last().copied().unwrap_or(0),
            first_mask_us: self.first_us,
            compile_us: self.compile_us,
        })
    }
}

/// Leaves `t` alone allowed.
fn allow_only(logits: &mut [f32], t: u32) -> bool {
    let t = t as usize;
    if t >= logits.len() {
        return false;
    }
    let keep = logits[t];
    logits.fill(f32::NEG_INFINITY);
    logits[t] = keep;
    true
}

/// Sets the logits `mask` does not allow to -∞; false when it allows none of them.
fn apply(mask: &SimpleVob, logits: &mut [f32]) -> bool {
    let words = mask.as_slice();
    let mut any = false;
    for (w, chunk) in logits.chunks_mut(32).enumerate() {
        let bits = words.get(w).copied().unwrap_or(0);
        if bits == 0 {
            chunk.fill(f32::NEG_INFINITY);
        } else if bits == u32::MAX && chunk.len() == 32 {
            any = true;
        } else {
            for (i, l) in chunk.iter_mut().enumerate() {
                if bits & (1 << i) == 0 {
                    *l = f32::NEG_INFINITY;
                } else {
                    any = true;
                }
            }
        }
    }
    any
}
