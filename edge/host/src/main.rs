//! Host side of the edge firmware.
//!
//! ```text
//! superinfer-edge-host tiny-model --vocab-from QWEN.gguf [-o OUT.gguf] [--vocab N]
//! superinfer-edge-host run -m MODEL.gguf [-p PROMPT] [-n N] [-c N_CTX]
//! superinfer-edge-host plan -m MODEL.gguf [-c N_CTX]... [--cache f32|f16|q8_0]
//! ```
//!
//! `tiny-model` writes the tiny model the firmware embeds (`tiny_model.rs`); `run` generates
//! greedily through the same `superinfer_core::generate` path as the firmware, with the
//! scalar kernels and one token per step, and prints the token ids in the firmware's format
//! (`edge: prompt_ids ...`, `edge: generated_ids ...`) for `scripts/test-edge.sh` to compare;
//! `plan` prints the RAM a firmware needs for a model at given context sizes (the
//! `MemoryPlan` with one token per step, and the model's own tables as allocated here).

mod tiny_model;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use std::ops::ControlFlow;
use std::process::ExitCode;

use superinfer_core::generate::{Context, ContextOptions, MemoryPlan, Model};
use superinfer_core::kernels::Kernels;
use superinfer_core::ops::attention::KvType;
use superinfer_core::parallel::Sequential;
use superinfer_core::sampler::{Sampler, SamplerConfig};

const USAGE: &str = "usage:
  superinfer-edge-host tiny-model --vocab-from GGUF [-o OUT] [--vocab N]
  superinfer-edge-host run -m MODEL [-p PROMPT] [-n N] [-c N_CTX]
  superinfer-edge-host plan -m MODEL [-c N_CTX]... [--cache f32|f16|q8_0]";

/// The system allocator, counting the bytes in use (for `plan`'s model tables).
struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        IN_USE.fetch_add(layout.size(), Relaxed);
        // SAFETY: the caller's layout, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        IN_USE.fetch_sub(layout.size(), Relaxed);
        // SAFETY: the caller's pointer and layout, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("tiny-model") => tiny(&args[1..]),
        Some("run") => run(&args[1..]),
        Some("plan") => plan(&args[1..]),
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("superinfer-edge-host: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--flag value` pairs.
fn flags<'a>(args: &'a [String], known: &[&str]) -> Result<Vec<(&'a str, &'a str)>, String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(f) = it.next() {
        if !known.contains(&f.as_str()) {
            return Err(format!("unknown argument '{f}'\n{USAGE}"));
        }
        let v = it.next().ok_or_else(|| format!("{f} needs a value"))?;
        out.push((f.as_str(), v.as_str()));
    }
    Ok(out)
}

fn number(flag: &str, v: &str) -> Result<usize, String> {
    v.parse()
        .map_err(|_| format!("{flag} takes a whole number, not '{v}'"))
}

fn tiny(args: &[String]) -> Result<(), String> {
    let mut src = None;
    let mut out = String::from("target/tiny-model/tiny.gguf");
    let mut shape = tiny_model::Shape::default();
    for (f, v) in flags(args, &["--vocab-from", "-o", "--vocab"])? {
        match f {
            "--vocab-from" => src = Some(v),
            "-o" => out = v.to_string(),
            _ => shape.n_tokens = number(f, v)?,
        }
    }
    let src = src.ok_or("tiny-model needs --vocab-from GGUF (Qwen2.5's vocabulary)")?;
    let bytes = std::fs::read(src).map_err(|e| format!("{src}: {e}"))?;
    let model = tiny_model::build(&bytes, &shape)?;
    if let Some(dir) = std::path::Path::new(&out).parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(&out, &model).map_err(|e| format!("{out}: {e}"))?;
    println!("{out}: {} bytes", model.len());
    Ok(())
}

/// A file's bytes at a 32-byte aligned address (the tensors' offsets are relative to it,
/// as on the firmware, whose embedded model sits in a 32-byte aligned static).
struct AlignedFile {
    blocks: Vec<Block>,
    len: usize,
}

#[repr(C, align(32))]
#[derive(Clone, Copy)]
struct Block([u8; 32]);

impl AlignedFile {
    fn read(path: &str) -> Result<AlignedFile, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        let mut blocks = vec![Block([0; 32]); bytes.len().div_ceil(32)];
        for (b, chunk) in blocks.iter_mut().zip(bytes.chunks(32)) {
            b.0[..chunk.len()].copy_from_slice(chunk);
        }
        Ok(AlignedFile {
            blocks,
            len: bytes.len(),
        })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `Block` is 32 plain bytes without padding, so the vector is
        // `32 * blocks.len()` initialized bytes, of which the first `len` are the file's.
        unsafe { core::slice::from_raw_parts(self.blocks.as_ptr().cast::<u8>(), self.len) }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let (mut path, mut prompt, mut n, mut n_ctx) = (None, "Once upon a time".to_string(), 16, 256);
    for (f, v) in flags(args, &["-m", "-p", "-n", "-c"])? {
        match f {
            "-m" => path = Some(v.to_string()),
            "-p" => prompt = v.to_string(),
            "-n" => n = number(f, v)?,
            _ => n_ctx = number(f, v)?,
        }
    }
    let path = path.ok_or("run needs -m MODEL")?;
    let file = AlignedFile::read(&path)?;
    let bytes = file.bytes();
    let model = Model::from_gguf(bytes, Kernels::scalar()).map_err(|e| format!("{path}: {e}"))?;
    let opts = ContextOptions {
        n_ctx,
        n_batch: 1,
        ..Default::default()
    };
    let mut ctx = Context::new(&model, &Sequential, &opts).map_err(|e| e.to_string())?;
    let ids = model
        .tokenizer()
        .encode(&prompt, true, false)
        .map_err(|e| e.to_string())?;
    let mut sampler = Sampler::new(SamplerConfig::greedy()).map_err(|e| e.to_string())?;
    let mut generated = Vec::new();
    let out = ctx
        .generate(&ids, n, &mut sampler, |t| {
            if t.id != superinfer_core::generate::Token::FLUSH {
                generated.push(t.id);
            }
            print!("{}", t.text);
            ControlFlow::Continue(())
        })
        .map_err(|e| e.to_string())?;
    println!();
    let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(" ");
    println!("edge: prompt_ids {}", list(&ids));
    println!("edge: generated_ids {}", list(&generated));
    println!("edge: stop {:?}", out.stop);
    Ok(())
}

fn plan(args: &[String]) -> Result<(), String> {
    let (mut path, mut ctxs, mut cache) = (None, Vec::new(), KvType::F16);
    for (f, v) in flags(args, &["-m", "-c", "--cache"])? {
        match f {
            "-m" => path = Some(v.to_string()),
            "-c" => ctxs.push(number(f, v)?),
            _ => {
                cache = match v {
                    "f32" => KvType::F32,
                    "f16" => KvType::F16,
                    "q8_0" => KvType::Q8_0,
                    _ => return Err(format!("--cache takes f32, f16 or q8_0, not '{v}'")),
                }
            }
        }
    }
    let path = path.ok_or("plan needs -m MODEL")?;
    if ctxs.is_empty() {
        ctxs = vec![64, 256, 1024];
    }
    let file = AlignedFile::read(&path)?;
    let before = IN_USE.load(Relaxed);
    let model =
        Model::from_gguf(file.bytes(), Kernels::scalar()).map_err(|e| format!("{path}: {e}"))?;
    let tables = IN_USE.load(Relaxed) - before;
    println!(
        "{path}: {} bytes of weights and metadata (flash, or memory a loader fills); model tables {tables} bytes (tokenizer, tensor views: allocated at load)",
        file.len
    );
    println!("n_ctx\tkv cache\tscratch\tlogits\ttokens\tbookkeeping\tcontext total\twith the model tables");
    for n_ctx in ctxs {
        let opts = ContextOptions {
            n_ctx,
            n_batch: 1,
            k_type: cache,
            v_type: cache,
        };
        let p = MemoryPlan::new(&model, &opts).map_err(|e| e.to_string())?;
        println!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            p.n_ctx,
            p.kv_cache,
            p.scratch,
            p.logits,
            p.tokens,
            p.bookkeeping,
            p.total(),
            p.total() + tables
        );
    }
    Ok(())
}
