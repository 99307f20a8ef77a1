//! `superinfer chat`: a conversation in the terminal. Each turn renders the whole
//! conversation with the model's chat template and evaluates only what the cache does not
//! hold yet (the new turn), so answers start as fast as the new text allows.
//!
//! A model that thinks (gpt-oss's Harmony analysis channel, `<think>…</think>`) has its
//! reasoning printed on stderr and its answer on stdout; only the answer goes back into the
//! conversation (gpt-oss's template refuses channel markers in a message, and both formats'
//! templates drop earlier turns' reasoning).
//!
//! Line editing and history come from rustyline; Ctrl-C stops an answer (and clears the
//! line at the prompt), Ctrl-D ends the chat.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustyline::error::ReadlineError;
use rustyline::DefaultEditor;
use superinfer_runtime::core::sampler::Sampler;
use superinfer_runtime::speculative::DynDrafter;
use superinfer_runtime::{Engine, Session, StopReason};
use superinfer_structured::Compiled;
use superinfer_template::reasoning::{Delta, Parser};
use superinfer_template::{choose_with_file, ChatTemplate, Message};

use crate::args::ChatArgs;

const HELP: &str = "\
commands: /reset (start over), /system TEXT (set the system message and start over),
          /help, /exit (or Ctrl-D); Ctrl-C stops an answer";

pub fn run(a: &ChatArgs) -> Result<(), String> {
    if a.n_predict < -1 {
        return Err(format!(
            "-n {} is invalid (use -1 for unlimited or a count >= 0)",
            a.n_predict
        ));
    }
    let mut sampler = Sampler::new(a.sampling.config()).map_err(|e| e.to_string())?;
    a.spec.check()?;
    super::grammar::load(&a.grammar)?;
    let engine = super::load_engine(&a.model)?;
    let grammar = super::grammar::compile(&a.grammar, &engine)?;
    let draft_engine = a.spec.load_draft(&a.model)?;
    let template = chat_template(&engine, a.chat_template.as_deref())?;
    let mut session = engine
        .session(&a.cache.session(a.ctx_size))
        .map_err(|e| e.to_string())?;
    session.set_lora(a.lora.set(&engine)?);
    let max = usize::try_from(a.n_predict).unwrap_or(usize::MAX);
    let mut drafter = a.spec.drafter(
        &engine,
        draft_engine.as_ref(),
        session.n_ctx(),
        sampler.config(),
    )?;

    // Ctrl-C during an answer stops it; at the prompt rustyline reads it as a key
    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = interrupted.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .map_err(|e| format!("installing the Ctrl-C handler: {e}"))?;

    let mut editor = DefaultEditor::new().map_err(|e| format!("the line editor: {e}"))?;
    let history = history_file();
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    eprintln!(
        "superinfer chat: {} ({} tokens of context). {HELP}",
        a.model.model.display(),
        session.n_ctx()
    );
    let mut system = a.system.clone();
    let mut messages = start(&system);
    loop {
        let line = match editor.readline("> ") {
            Ok(l) => l,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(format!("reading the input: {e}")),
        };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(text);
        if let Some(cmd) = text.strip_prefix('/') {
            let (name, arg) = cmd.split_once(' ').unwrap_or((cmd, ""));
            match name {
                "exit" | "quit" => break,
                "reset" => {
                    messages = start(&system);
                    eprintln!("(the conversation starts over)");
                }
                "system" => {
                    system = Some(arg.trim().to_string()).filter(|s| !s.is_empty());
                    messages = start(&system);
                    eprintln!("(system message set; the conversation starts over)");
                }
                "help" => eprintln!("{HELP}"),
                _ => eprintln!("unknown command /{name}; {HELP}"),
            }
            continue;
        }
        messages.push(Message::new("user", text));
        interrupted.store(false, Ordering::Relaxed);
        let turn = Turn {
            engine: &engine,
            template: &template,
            max,
            interrupted: &interrupted,
            grammar: grammar.as_deref(),
        };
        match turn.answer(
            &mut session,
            &messages,
            &mut sampler,
            drafter.as_deref_mut(),
        ) {
            Ok(reply) => messages.push(Message::new("assistant", reply)),
            Err(e) => {
                // the turn is dropped; the conversation stays as it was
                messages.pop();
                eprintln!("error: {e}");
            }
        }
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    Ok(())
}

fn start(system: &Option<String>) -> Vec<Message> {
    system
        .iter()
        .map(|s| Message::new("system", s.clone()))
        .collect()
}

/// What every turn uses.
struct Turn<'a> {
    engine: &'a Engine,
    template: &'a ChatTemplate,
    /// Most tokens of an answer.
    max: usize,
    interrupted: &'a AtomicBool,
    /// What every answer must follow (`--json-schema` and the like).
    grammar: Option<&'a Compiled>,
}

impl Turn<'_> {
    /// Generates the assistant's next turn, printing it as it comes; returns its answer
    /// (without its reasoning).
    fn answer(
        &self,
        session: &mut Session<'_>,
        messages: &[Message],
        sampler: &mut Sampler,
        drafter: Option<&mut DynDrafter<'_>>,
    ) -> Result<String, String> {
        let (max, interrupted) = (self.max, self.interrupted);
        let prompt = self
            .template
            .render(messages, true)
            .map_err(|e| e.to_string())?;
        let tokens = self
            .engine
            .encode_prompt(&prompt)
            .map_err(|e| e.to_string())?;
        if tokens.len() >= session.n_ctx() {
            return Err(format!(
            "the conversation ({} tokens) fills the context of {} tokens: /reset to start over, or restart with a larger -c",
            tokens.len(),
            session.n_ctx()
        ));
        }
        // keep what the cache holds of this prompt; at least one token is evaluated again,
        // since generation starts from its logits
        let same = session.keep_prefix(&tokens);
        let mut reply = String::new();
        let mut out = std::io::stdout().lock();
        let mut parser = Parser::new(self.template.syntax(), true, &prompt);
        // reasoning, then a line break before the answer
        let mut thinking = false;
        let mut show = |d: Delta, out: &mut std::io::StdoutLock<'_>| {
            if !d.reasoning.is_empty() {
                eprint!("{}", d.reasoning);
                thinking = true;
            }
            if thinking && !d.content.is_empty() {
                eprintln!();
                thinking = false;
            }
            reply.push_str(&d.content);
            let _ = out.write_all(d.content.as_bytes());
            let _ = out.flush();
        };
        let stats = session
            .generate_constrained(
                &tokens[same..],
                &max.into(),
                sampler,
                drafter,
                self.grammar.map(|g| g.constraint()),
                |ev| {
                    show(parser.push(ev.text), &mut out);
                    if interrupted.load(Ordering::Relaxed) {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                },
            )
            .map_err(|e| e.to_string())?;
        show(parser.finish(), &mut out);
        let _ = writeln!(out);
        let rate = super::spec::rate;
        let why = match stats.stop {
            StopReason::Cancelled => " (stopped)",
            StopReason::Length => " (-n reached)",
            StopReason::ContextFull => " (context full: /reset to go on)",
            _ => "",
        };
        eprintln!(
        "[prompt: {} new tokens ({} reused), {:.1} tok/s | answer: {} tokens, {:.1} tok/s]{why}",
        stats.prompt_tokens,
        same,
        rate(stats.prompt_tokens, stats.prompt_time),
        stats.generated_tokens,
        rate(stats.generated_tokens, stats.generate_time),
    );
        if stats.verify_steps > 0 && stats.mask.is_none() {
            eprintln!("[{}]", super::spec::describe(&stats));
        }
        if let Some(m) = stats.mask {
            eprintln!("[{}]", super::grammar::describe(&m, &stats));
        }
        Ok(reply)
    }
}

fn history_file() -> Option<PathBuf> {
    let dir = std::env::var_os("SUPERINFER_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/superinfer")))?;
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir.join("chat_history"))
}

/// `--chat-template FILE`, else the model file's template, else the built-in one for the
/// architecture (with a notice): [`superinfer_template::choose_with_file`], as `serve` chooses.
fn chat_template(engine: &Engine, file: Option<&Path>) -> Result<ChatTemplate, String> {
    let tok = engine.tokenizer();
    let text = |id: Option<u32>| id.map(|t| tok.token_text(t)).unwrap_or_default();
    let (bos, eos) = (text(tok.bos()), text(tok.eos()));
    choose_with_file(file, engine.chat_template(), engine.arch_name(), &bos, &eos)
}
