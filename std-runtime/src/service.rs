//! A model served in-process: the [`Engine`] and its [`Scheduler`] on a thread of their own,
//! requests submitted from any thread through a [`Client`]. What the server does for HTTP,
//! this does for in-process frontends (the C ABI, the Python package): many callers at once
//! share the scheduler's batched steps instead of queueing behind one another.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use crate::scheduler::{Client, Handle, Request, RequestError};
use crate::{Engine, EngineOptions, Error, Scheduler, SchedulerOptions};

/// An engine serving requests on its own thread until dropped (or [`shutdown`](Self::shutdown)).
pub struct Service {
    engine: Arc<Engine>,
    client: Client,
    n_ctx: usize,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), Error>>>,
}

impl Service {
    /// Loads `model` and starts its scheduler thread. Errors are the load's and the
    /// scheduler's (a context or KV pool that does not fit, ...).
    pub fn start(
        model: &Path,
        engine: &EngineOptions,
        scheduler: &SchedulerOptions,
    ) -> Result<Service, Error> {
        let engine = Arc::new(Engine::load(model, engine)?);
        Service::with_engine(engine, scheduler)
    }

    /// Starts a scheduler thread over an engine already loaded.
    pub fn with_engine(engine: Arc<Engine>, o: &SchedulerOptions) -> Result<Service, Error> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(Client, usize), Error>>();
        let thread = {
            let (engine, stop, o) = (engine.clone(), stop.clone(), o.clone());
            std::thread::Builder::new()
                .name("superinfer-engine".into())
                .spawn(move || {
                    let mut sched = match Scheduler::new(&engine, &o) {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return Ok(());
                        }
                    };
                    let _ = ready_tx.send(Ok((sched.client(), sched.n_ctx())));
                    sched.run(&stop)
                })
                .map_err(|e| Error::EngineThread(format!("cannot start the engine thread: {e}")))?
        };
        match ready_rx.recv() {
            Ok(Ok((client, n_ctx))) => Ok(Service {
                engine,
                client,
                n_ctx,
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(match thread.join() {
                Ok(Err(e)) => e,
                _ => Error::EngineThread("the engine thread ended while starting".into()),
            }),
        }
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// A client for submitting from other threads (cheap to clone).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// One sequence's context (prompt + generated tokens).
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Queues a request: [`Client::submit`].
    pub fn submit(&self, request: Request) -> Result<Handle, RequestError> {
        self.client.submit(request)
    }

    /// Stops the scheduler (requests still running end with [`RequestError::Closed`]) and
    /// returns the engine thread's error, if it failed.
    pub fn shutdown(mut self) -> Result<(), Error> {
        self.stop_thread()
    }

    fn stop_thread(&mut self) -> Result<(), Error> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(Error::EngineThread("the engine thread panicked".into())),
            None => Ok(()),
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.stop_thread();
    }
}
