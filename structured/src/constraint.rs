//! A sequence's grammar constraint, its next mask computed beside the forward pass.
//!
//! [`commit`](Constraint::commit) hands the token to a worker thread (one per sequence)
//! and returns: the worker advances the parser, computes the tokens the grammar forces
//! and, when there are none, the next mask, while the frontend runs the next forward pass.
//! [`mask`](Constraint::mask) waits for that mask (usually long done) and applies it.
//! Forced tokens are handed out by [`forced`](Constraint::forced) as the next step's
//! draft; the mask at each of their positions allows that token alone, known without the
//! worker. Where no thread can be made (wasm), the same work runs inline, on demand.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::Instant;

use llguidance::Matcher;
use superinfer_core::generate::{Constraint, MaskStats};
use toktrie::SimpleVob;

/// What the parser allows at the next position.
pub(crate) struct Step {
    /// Tokens the grammar forces from here (then `mask` is not computed).
    forced: Vec<u32>,
    /// The allowed tokens (None: none, the grammar is complete or failed).
    mask: Option<SimpleVob>,
    us: u32,
}

impl Step {
    /// The parser's next step: its forced tokens, else its mask.
    pub fn compute(m: &mut Matcher) -> Step {
        let t0 = Instant::now();
        let mut step = Step {
            forced: Vec::new(),
            mask: None,
            us: 0,
        };
        if !m.is_stopped() {
            step.forced = m.compute_ff_tokens();
            if step.forced.is_empty() && !m.is_error() {
                step.mask = m.compute_mask().ok();
            }
        }
        step.us = t0.elapsed().as_micros().min(u32::MAX as u128) as u32;
        step
    }
}

/// What the worker is asked: consume a token, then (`compute`) work out the next step.
struct Job {
    token: u32,
    compute: bool,
}

enum Backend {
    Thread {
        jobs: Sender<Job>,
        steps: Receiver<Step>,
        /// Jobs the worker has finished.
        done: Arc<AtomicUsize>,
    },
    Inline {
        matcher: Box<Matcher>,
        jobs: VecDeque<Job>,
    },
    /// The grammar could not be set up: nothing is allowed.
    Failed,
}

/// The grammar constraint of one sequence ([`crate::Compiled::constraint`]).
pub(crate) struct Pipelined {
    backend: Backend,
    /// Jobs sent to the worker.
    sent: usize,
    /// The next position's step, once known.
    current: Option<Arc<Step>>,
    /// A step is owed by the worker (a job asked for one and it was not received).
    owed: bool,
    /// Forced tokens still to come, the next position's first.
    queue: VecDeque<u32>,
    /// Microseconds of each step computed.
    times: Vec<u32>,
    first_us: u32,
    compile_us: u32,
}

impl Pipelined {
    pub fn new(matcher: Matcher, first: Arc<Step>, compile_us: u32) -> Pipelined {
        let backend = spawn(matcher);
        let mut p = Pipelined {
            backend,
            sent: 0,
            current: None,
            owed: false,
            queue: VecDeque::new(),
            times: Vec::new(),
            first_us: first.us,
            compile_us,
        };
        p.receive(first);
        p
    }

    pub fn failed() -> Pipelined {
        Pipelined {
            backend: Backend::Failed,
            sent: 0,
            current: None,
            owed: false,
            queue: VecDeque::new(),
            times: Vec::new(),
            first_us: 0,
            compile_us: 0,
        }
    }

    /// Takes a step the worker computed.
    fn receive(&mut self, step: Arc<Step>) {
        self.owed = false;
        self.queue.extend(step.forced.iter().copied());
        self.current = Some(step);
    }

    /// Waits for the step owed, if any.
    fn settle(&mut self) {
        if !self.owed {
            return;
        }
        let step = match &mut self.backend {
            Backend::Thread { steps, .. } => steps.recv().ok(),
            Backend::Inline { matcher, jobs } => {
                let mut out = None;
                while let Some(job) = jobs.pop_front() {
                    if let Some(s) = run(matcher, job) {
                        out = Some(s);
                    }
                }
                out
            }
            Backend::Failed => None,
        };
        match step {
            Some(s) => {
                self.times.push(s.us);
                self.receive(Arc::new(s));
            }
            None => {
                // the worker is gone: nothing is allowed
                self.owed = false;
                self.current = Some(Arc::new(Step {
                    forced: Vec::new(),
                    mask: None,
                    us: 0,
                }));
            }
        }
    }
}

/// Consumes the job's token, then computes the next step if asked.
fn run(m: &mut Matcher, job: Job) -> Option<Step> {
    // an error leaves the matcher failed: its next step allows nothing
    let _ = m.consume_token(job.token);
    job.compute.then(|| Step::compute(m))
}

fn spawn(matcher: Matcher) -> Backend {
    let (jobs, job_rx) = channel::<Job>();
    let (step_tx, steps) = channel::<Step>();
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
                let step = run(&mut m, job);
                d.fetch_add(1, Ordering::Release);
                if let Some(step) = step {
                    if step_tx.send(step).is_err() {
                        return;
                    }
                }
            }
        });
    match spawned {
        Ok(_) => Backend::Thread { jobs, steps, done },
        Err(_) => match slot.lock().ok().and_then(|mut g| g.take()) {
            Some(m) => Backend::Inline {
                matcher: Box::new(m),
                jobs: VecDeque::new(),
            },
            None => Backend::Failed,
        },
    }
}

impl Constraint for Pipelined {
    fn mask(&mut self, logits: &mut [f32]) -> bool {
        if let Some(&t) = self.queue.front() {
            return allow_only(logits, t);
        }
        self.settle();
        if let Some(&t) = self.queue.front() {
            return allow_only(logits, t);
        }
        match self.current.as_ref().and_then(|s| s.mask.as_ref()) {
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
        self.current = None;
        self.owed = compute;
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
        if self.queue.is_empty() {
            self.settle();
        }
        out.extend(self.queue.iter().copied());
    }

    fn ready(&self) -> bool {
        if !self.queue.is_empty() || !self.owed {
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
