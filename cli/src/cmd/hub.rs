//! `-m hf://USER/REPO[:QUANT]`, `--hf-repo`/`--hf-file` and `--model-draft hf://…`: each hub
//! name becomes the local path of the downloaded (or cached) file before a command runs.

use std::path::PathBuf;

use superinfer_runtime::hub::{self, HubOptions, ModelRef};

use crate::args::{Command, HubArgs};

fn options(h: &HubArgs) -> HubOptions {
    let mut o = HubOptions::from_env();
    if let Some(t) = &h.hf_token {
        o.token = Some(t.clone());
    }
    o.offline |= h.offline;
    o
}

fn fetch(m: &ModelRef, h: &HubArgs) -> Result<PathBuf, String> {
    hub::resolve(m, &options(h)).map_err(|e| e.to_string())
}

/// The model flag (`-m`, or `--hf-repo` with `--hf-file`) as a local path.
fn model(path: &mut PathBuf, h: &HubArgs) -> Result<(), String> {
    let named = match (&h.hf_repo, path.to_str()) {
        (Some(repo), _) => ModelRef::new(repo, h.hf_file.as_deref()),
        (None, Some(s)) if hub::is_hub_name(s) => ModelRef::parse(s),
        _ => return Ok(()),
    }
    .map_err(|e| e.to_string())?;
    *path = fetch(&named, h)?;
    Ok(())
}

/// A draft model given as a hub name, as a local path.
fn draft(path: &mut Option<PathBuf>, h: &HubArgs) -> Result<(), String> {
    if let Some(p) = path {
        if let Some(s) = p.to_str().filter(|s| hub::is_hub_name(s)) {
            *p = fetch(&ModelRef::parse(s).map_err(|e| e.to_string())?, h)?;
        }
    }
    Ok(())
}

/// Resolves every hub name among the command's model flags.
pub fn resolve(c: &mut Command) -> Result<(), String> {
    match c {
        Command::Run(a) => {
            model(&mut a.model.model, &a.model.hub)?;
            draft(&mut a.spec.model_draft, &a.model.hub)
        }
        Command::Chat(a) => {
            model(&mut a.model.model, &a.model.hub)?;
            draft(&mut a.spec.model_draft, &a.model.hub)
        }
        Command::Serve(a) => {
            model(&mut a.model.model, &a.model.hub)?;
            draft(&mut a.model_draft, &a.model.hub)
        }
        Command::Bench(a) => {
            model(&mut a.model, &a.hub)?;
            draft(&mut a.spec.model_draft, &a.hub)
        }
        Command::Tokenize(a) => model(&mut a.model.model, &a.model.hub),
        Command::Perplexity(a) => model(&mut a.model.model, &a.model.hub),
        Command::Info(a) => model(&mut a.model, &a.hub),
        Command::Isas | Command::GgufSplit(_) | Command::Quantize(_) => Ok(()),
        Command::Embed(a) => model(&mut a.model.model, &a.model.hub),
    }
}
