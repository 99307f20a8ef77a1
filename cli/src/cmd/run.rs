use std::io::Write;
use std::ops::ControlFlow;

use superinfer_runtime::core::generate::GenerateParams;
use superinfer_runtime::core::sampler::Sampler;

use crate::args::RunArgs;

pub fn run(a: &RunArgs) -> Result<(), String> {
    let cfg = a.sampling.config();
    let mut sampler = Sampler::new(cfg).map_err(|e| e.to_string())?;
    if a.n_predict < -1 {
        return Err(format!(
            "-n {} is invalid (use -1 for unlimited or a count >= 0)",
            a.n_predict
        ));
    }

    a.spec.check()?;
    // a bad grammar file is reported before the model loads
    super::grammar::load(&a.grammar)?;
    let engine = super::load_engine(&a.model)?;
    let grammar = super::grammar::compile(&a.grammar, &engine)?;
    let draft_engine = a.spec.load_draft(&a.model)?;
    let prompt = if a.no_bos {
        engine
            .tokenizer()
            .encode(&a.prompt, false, true)
            .map_err(|e| e.to_string())?
    } else {
        // BOS as the model asks, unless the prompt already begins with it
        engine.encode_prompt(&a.prompt).map_err(|e| e.to_string())?
    };
    let mut session = engine
        .session(&a.cache.session(a.ctx_size))
        .map_err(|e| e.to_string())?;
    session.set_lora(a.lora.set(&engine)?);
    if prompt.len() > session.n_ctx() {
        return Err(format!(
            "the prompt is {} tokens, longer than the context of {} tokens (raise -c, up to {})",
            prompt.len(),
            session.n_ctx(),
            engine.config().n_ctx_train
        ));
    }
    let mut drafter = a.spec.drafter(
        &engine,
        draft_engine.as_ref(),
        session.n_ctx(),
        sampler.config(),
    )?;
    let params = GenerateParams {
        max_tokens: if a.n_predict < 0 {
            usize::MAX
        } else {
            a.n_predict as usize
        },
        ignore_eos: a.ignore_eos,
        stop: a.stop.clone(),
        logprobs: None,
    };

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut write_err = None;
    let stats = session
        .generate_constrained(
            &prompt,
            &params,
            &mut sampler,
            drafter.as_deref_mut(),
            grammar.as_ref().map(|g| g.constraint()),
            |ev| {
                let r = out.write_all(ev.text.as_bytes()).and_then(|_| out.flush());
                match r {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(e) => {
                        write_err = Some(e);
                        ControlFlow::Break(())
                    }
                }
            },
        )
        .map_err(|e| e.to_string())?;
    let _ = writeln!(out);
    if let Some(e) = write_err {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(format!("writing to stdout: {e}"));
        }
    }
    let rate = super::spec::rate;
    eprintln!(
        "\nload: {:.0} ms | prompt: {} tokens, {:.2} tok/s | generation: {} tokens, {:.2} tok/s | stop: {:?} | isa: {} | threads: {}",
        engine.load_time().as_secs_f64() * 1e3,
        stats.prompt_tokens,
        rate(stats.prompt_tokens, stats.prompt_time),
        stats.generated_tokens,
        rate(stats.generated_tokens, stats.generate_time),
        stats.stop,
        engine.isa().name(),
        engine.threads(),
    );
    if drafter.is_some() {
        eprintln!("{}", super::spec::describe(&stats));
    }
    if let Some(m) = stats.mask {
        eprintln!("{}", super::grammar::describe(&m, &stats));
    }
    Ok(())
}
