//! `superinfer serve`: the OpenAI-compatible server (see the superinfer-server crate).

use std::time::Duration;
use superinfer_runtime::scheduler::{Lookup, MAX_DRAFT_TOKENS, MAX_LOOKUP_NGRAM};
use superinfer_runtime::speculative::DraftOptions;
use superinfer_runtime::{EngineOptions, SchedulerOptions};

use superinfer_server::{LogFormat, ServeOptions};

use crate::args::{LogFormatArg, ServeArgs};

pub fn run(a: &ServeArgs) -> Result<(), String> {
    if a.body_limit_mib == 0 {
        return Err("--body-limit-mib must be at least 1".into());
    }
    if a.lookup_ngram > MAX_LOOKUP_NGRAM {
        return Err(format!(
            "--lookup-ngram {} is above the most, {MAX_LOOKUP_NGRAM}",
            a.lookup_ngram
        ));
    }
    if a.model_draft.is_some() && a.lookup_ngram > 0 {
        return Err(
            "--model-draft and --lookup-ngram are two ways to draft: choose one (a request \
             can still ask for prompt lookup with \"lookup_ngram\")"
                .into(),
        );
    }
    if !(0.0..=1.0).contains(&a.draft_p_min) {
        return Err(format!(
            "--draft-p-min must be between 0 and 1 (got {})",
            a.draft_p_min
        ));
    }
    let speculating = a.lookup_ngram > 0 || a.model_draft.is_some();
    if speculating && !(1..=MAX_DRAFT_TOKENS).contains(&a.draft_max) {
        return Err(format!(
            "--draft-max must be between 1 and {MAX_DRAFT_TOKENS} (got {})",
            a.draft_max
        ));
    }
    let o = ServeOptions {
        model: a.model.model.clone(),
        engine: EngineOptions {
            threads: a.model.threads,
            isa: super::parse_isa(a.model.isa.as_deref())?,
            no_repack: a.model.no_repack,
        },
        scheduler: SchedulerOptions {
            n_parallel: a.n_parallel,
            n_batch: a.batch_size,
            prefill_chunk: a.prefill_chunk,
            n_ctx: a.ctx_size,
            kv_size: a.kv_size,
            cache_type_k: a.cache.k,
            cache_type_v: a.cache.v,
            max_queue: a.max_queue,
        },
        host: a.host.clone(),
        port: a.port,
        api_key: a.api_key.clone(),
        alias: a.alias.clone(),
        chat_template: a.chat_template.clone(),
        extract_reasoning: a.reasoning_format != "none",
        body_limit: a.body_limit_mib << 20,
        lookup: (a.lookup_ngram > 0).then_some(Lookup {
            ngram: a.lookup_ngram,
            draft_max: a.draft_max,
        }),
        draft: a.model_draft.clone().map(|m| {
            (
                m,
                DraftOptions {
                    max: a.draft_max,
                    min: a.draft_min,
                    p_min: a.draft_p_min,
                    vocab: (a.draft_vocab > 0).then_some(a.draft_vocab),
                    // the scheduler turns the priced draft length off (shared steps)
                    ..DraftOptions::default()
                },
            )
        }),
        log_format: match a.log_format {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        },
        shutdown_timeout: Duration::from_secs_f64(a.shutdown_timeout),
        drain_delay: Duration::from_secs_f64(a.drain_delay),
    };
    superinfer_server::serve(o).map_err(|e| superinfer_runtime::chain(&e))
}
