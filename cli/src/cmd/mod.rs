pub mod bench;
mod bench_batched;
mod bench_spec;
pub mod chat;
pub mod embed;
pub mod gguf_split;
pub mod grammar;
pub mod hub;
pub mod info;
pub mod lora;
pub mod perplexity;
pub mod quantize;
pub mod run;
pub mod serve;
mod spec;
pub mod tokenize;

use std::io::{IsTerminal, Write};
use std::time::Instant;

use superinfer_runtime::core::kernels::Isa;
use superinfer_runtime::{Engine, EngineOptions};

use crate::args::ModelArgs;

/// Loads the model named by the flags, with a progress line on stderr.
pub fn load_engine(m: &ModelArgs) -> Result<Engine, String> {
    let isa = parse_isa(m.isa.as_deref())?;
    let tty = std::io::stderr().is_terminal();
    if tty {
        eprint!("loading {} ...", m.model.display());
    }
    let t = Instant::now();
    let engine = Engine::load(
        &m.model,
        &EngineOptions {
            threads: m.threads,
            isa,
            no_repack: m.no_repack,
        },
    )
    .map_err(|e| {
        if tty {
            eprintln!();
        }
        superinfer_runtime::chain(&e)
    })?;
    if tty {
        eprintln!(" done in {:.2} s", t.elapsed().as_secs_f64());
    }
    Ok(engine)
}

/// The `--isa` flag's value.
pub fn parse_isa(s: Option<&str>) -> Result<Option<Isa>, String> {
    match s {
        None => Ok(None),
        Some(s) => Isa::from_name(s)
            .map(Some)
            .ok_or_else(|| format!("--isa '{s}' is not one of {}", Isa::names())),
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
pub fn write_stdout(s: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("writing to stdout: {e}"))
        }
        _ => Ok(()),
    }
}

/// `superinfer isas`: one ISA name per line, best first.
pub fn isas() -> Result<(), String> {
    let names: Vec<&str> = superinfer_runtime::cpu::detect()
        .available()
        .into_iter()
        .map(|i| i.name())
        .collect();
    write_stdout(&(names.join("\n") + "\n"))
}
