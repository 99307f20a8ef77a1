//! `superinfer`: run GGUF language models on the CPU.

// The arguments' doc comments are clap's `--help` text, shown as written: `hf://USER/REPO[:QUANT]`
// there is a pattern for the user, not a link.
#![allow(rustdoc::broken_intra_doc_links)]

mod args;
mod cmd;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // A bug must still end in one readable line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("error: internal error: {msg}{at} (please report this)");
    }));

    let mut cli = args::Cli::parse_from(args::llama_style(std::env::args_os()));
    // hf://USER/REPO[:QUANT] and --hf-repo: the downloaded (or cached) file's path
    if let Err(e) = cmd::hub::resolve(&mut cli.command) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        args::Command::Run(a) => cmd::run::run(&a),
        args::Command::Chat(a) => cmd::chat::run(&a),
        args::Command::Tokenize(a) => cmd::tokenize::run(&a),
        args::Command::Info(a) => cmd::info::run(&a),
        args::Command::Bench(a) => cmd::bench::run(&a),
        args::Command::Perplexity(a) => cmd::perplexity::run(&a),
        args::Command::Serve(a) => cmd::serve::run(&a),
        args::Command::Isas => cmd::isas(),
        args::Command::GgufSplit(a) => cmd::gguf_split::run(&a),
        args::Command::Quantize(a) => cmd::quantize::run(&a),
        args::Command::Embed(a) => cmd::embed::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
