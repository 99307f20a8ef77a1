//! What the handlers share: the options, the metrics, and (once loaded) the engine, the
//! scheduler's client and the chat template. The engine thread loads the model and then
//! runs the scheduler until the server stops.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use superinfer_runtime::scheduler::{Client, Lookup};
use superinfer_runtime::speculative::DraftOptions;
use superinfer_runtime::{Engine, EngineOptions, Scheduler, SchedulerOptions};
use superinfer_structured::Grammars;
use superinfer_template::tools::ToolFormat;
use superinfer_template::{choose_with_file, ChatTemplate};

use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::serve_error::ServeError;

/// The loaded model and its scheduler, as the handlers use them.
pub struct Ready {
    pub engine: Arc<Engine>,
    pub client: Client,
    pub template: ChatTemplate,
    /// The format the template's model writes tool calls in (`None`: it knows no tools).
    pub tool_format: Option<ToolFormat>,
    /// The model's grammar compiler and its cache (response formats, tool calls).
    pub grammars: Grammars,
    pub n_parallel: usize,
}

pub struct AppState {
    /// The model's name in the API (`--alias`, else the file's name).
    pub alias: String,
    pub model_path: PathBuf,
    pub api_key: Option<String>,
    /// Prompt lookup for requests that do not say otherwise (`--lookup-ngram`).
    pub lookup: Option<Lookup>,
    /// With a draft model (`--model-draft`): the tokens a step requests draft by default.
    pub draft_max: Option<usize>,
    /// Chat answers' reasoning in `reasoning_content` by default (`--reasoning-format`).
    pub extract_reasoning: bool,
    pub metrics: Metrics,
    pub ready: OnceLock<Ready>,
    /// Unix time the server started (the `created` of its model).
    pub started: u64,
    /// Tells the engine thread to stop.
    pub stop: AtomicBool,
    /// A shutdown signal came: `/ready` answers 503 while the running requests finish.
    pub draining: AtomicBool,
}

impl AppState {
    pub fn ready(&self) -> Result<&Ready, ApiError> {
        self.ready.get().ok_or_else(ApiError::loading)
    }

    /// Whether a request's `model` names this server's model (the alias, the file name or
    /// the path it was started with).
    pub fn serves(&self, model: &str) -> bool {
        let path = self.model_path.to_string_lossy();
        let file = self
            .model_path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        model == self.alias || model == file || model == path
    }
}

pub struct EngineSetup {
    pub engine: EngineOptions,
    pub scheduler: SchedulerOptions,
    pub chat_template: Option<PathBuf>,
    /// A draft model for speculative decoding, and how it drafts.
    pub draft: Option<(PathBuf, DraftOptions)>,
}

/// Loads the model and serves requests on this thread until `state.stop` is set. Returns an
/// error if loading fails (the server then exits) or the engine fails.
pub fn engine_thread(state: Arc<AppState>, setup: EngineSetup) -> Result<(), ServeError> {
    let engine =
        Engine::load(&state.model_path, &setup.engine).map_err(|source| ServeError::Load {
            path: state.model_path.clone(),
            source: Box::new(source),
        })?;
    let engine = Arc::new(engine);
    let template =
        chat_template(&engine, setup.chat_template.as_deref()).map_err(ServeError::Template)?;
    let draft = match &setup.draft {
        Some((path, _)) => {
            Some(
                Engine::load(path, &setup.engine).map_err(|source| ServeError::LoadDraft {
                    path: path.clone(),
                    source: Box::new(source),
                })?,
            )
        }
        None => None,
    };
    let mut sched = Scheduler::new(&engine, &setup.scheduler).map_err(ServeError::Scheduler)?;
    if let (Some(d), Some((path, opts))) = (draft.as_ref(), setup.draft.as_ref()) {
        sched = sched
            .with_draft(d, *opts)
            .map_err(|source| ServeError::Draft {
                path: path.clone(),
                source: Box::new(source),
            })?;
        tracing::info!(
            "draft model {} loaded in {:.2} s (up to {} tokens a step)",
            path.display(),
            d.load_time().as_secs_f64(),
            opts.max
        );
    }
    let client = sched.client();
    tracing::info!(
        "{} loaded in {:.2} s ({} isa, {} threads); {} slots of {} tokens, KV cache {:.1} MiB",
        state.alias,
        engine.load_time().as_secs_f64(),
        engine.isa().name(),
        engine.threads(),
        setup.scheduler.n_parallel,
        sched.n_ctx(),
        sched.kv_cache_bytes() as f64 / (1 << 20) as f64,
    );
    state.metrics.publish(0, 0, sched.pool_stats());
    let grammars = Grammars::new(engine.tokenizer());
    let ready = Ready {
        engine: engine.clone(),
        client: client.clone(),
        tool_format: ToolFormat::of_template(template.source()),
        template,
        grammars,
        n_parallel: setup.scheduler.n_parallel,
    };
    // this thread is the only one that sets it, once
    let _ = state.ready.set(ready);
    let metrics = &state.metrics;
    sched
        .run_observed(&state.stop, |s, _| {
            metrics.publish(s.running(), client.waiting(), s.pool_stats())
        })
        .map_err(ServeError::Engine)?;
    Ok(())
}

/// The template from `--chat-template`, else the file's, else a built-in one for the
/// architecture (with a notice): [`superinfer_template::choose_with_file`].
fn chat_template(engine: &Engine, file: Option<&Path>) -> Result<ChatTemplate, String> {
    let tok = engine.tokenizer();
    let text = |id: Option<u32>| id.map(|t| tok.token_text(t)).unwrap_or_default();
    let (bos, eos) = (text(tok.bos()), text(tok.eos()));
    choose_with_file(file, engine.chat_template(), engine.arch_name(), &bos, &eos)
}
