//! Command-line flags (llama.cpp-familiar names).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use superinfer_runtime::core::ops::attention::KvType;
use superinfer_runtime::core::sampler::SamplerConfig;
use superinfer_runtime::SessionOptions;

#[derive(Parser)]
#[command(
    name = "superinfer",
    version,
    about = "CPU-first LLM inference for GGUF models"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Generate text from a prompt.
    Run(RunArgs),
    /// Chat with the model in the terminal (line editing, history, streaming; /help).
    Chat(ChatArgs),
    /// Print the token ids of a text as a JSON array.
    Tokenize(TokenizeArgs),
    /// Print a model's architecture, hyperparameters and tensor types.
    Info(InfoArgs),
    /// Measure prompt processing (pp) and generation (tg) speed, like llama-bench.
    Bench(BenchArgs),
    /// Perplexity of a text file, by llama-perplexity's method (chunks of -c tokens, the
    /// second half of each scored).
    Perplexity(PerplexityArgs),
    /// Serve the model over an OpenAI-compatible HTTP API (chat and completions,
    /// streaming), many requests at once.
    Serve(ServeArgs),
    /// Print the instruction sets this CPU and build can run, best (the default) first.
    Isas,
    /// Split a GGUF model into shards as llama.cpp's llama-gguf-split does
    /// (OUT_PREFIX-00001-of-0000N.gguf, ...), loadable by superinfer, llama.cpp and wllama.
    #[command(name = "gguf-split")]
    GgufSplit(GgufSplitArgs),
    /// Quantize a GGUF model as llama.cpp's llama-quantize does (same per-tensor types, same
    /// bytes): IN.gguf OUT.gguf TYPE (Q4_0, Q8_0, Q4_K_M, Q5_K_M, Q6_K, F16, ...).
    Quantize(QuantizeArgs),
    /// Sentence embeddings with an encoder model (BERT; a GGUF file or a Hugging Face
    /// directory): one JSON line {"index":i,"embedding":[...]} per text.
    Embed(EmbedArgs),
}

#[derive(Args)]
pub struct QuantizeArgs {
    /// The model to quantize (F32, F16 or BF16 for the best quality).
    pub input: PathBuf,
    /// The file to write (written beside it under a temporary name, then renamed).
    pub output: PathBuf,
    /// The type, as llama-quantize names it: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K_S,
    /// Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, IQ4_NL, IQ4_XS, MXFP4_MOE, F16,
    /// BF16, F32, COPY (or its llama_ftype number).
    #[arg(value_name = "TYPE")]
    pub ftype: String,
    /// Threads converting tensors (0: all cores).
    #[arg(short = 't', long = "threads", default_value_t = 0)]
    pub threads: usize,
    /// Allow converting tensors that are already quantized (lower quality than from F16).
    #[arg(long = "allow-requantize")]
    pub allow_requantize: bool,
    /// An importance matrix (llama-imatrix's GGUF, or the legacy .dat), for Q4_0, Q4_1, Q5_0,
    /// Q5_1, Q8_0, Q4_K_S/M, Q5_K_S/M, Q6_K (the other types refuse it).
    #[arg(long = "imatrix", value_name = "FILE")]
    pub imatrix: Option<PathBuf>,
    /// Every quantizable tensor in TYPE itself, without the mix's per-tensor choices.
    #[arg(long = "pure")]
    pub pure: bool,
    /// The type of output.weight (and of tied token embeddings).
    #[arg(long = "output-tensor-type", value_name = "T")]
    pub output_tensor_type: Option<String>,
    /// The type of token_embd.weight.
    #[arg(long = "token-embedding-type", value_name = "T")]
    pub token_embedding_type: Option<String>,
    /// Leave output.weight as it is.
    #[arg(long = "leave-output-tensor")]
    pub leave_output_tensor: bool,
}

#[derive(Args)]
pub struct GgufSplitArgs {
    /// Most bytes of tensor data in one shard: a number with K, M or G (decimal, as
    /// llama-gguf-split: 256M is 256,000,000 bytes) or plain bytes. A tensor larger than
    /// that gets a shard of its own.
    #[arg(long = "split-max-size", conflicts_with = "split_max_tensors")]
    pub split_max_size: Option<String>,
    /// Most tensors in one shard (128 when neither limit is given, as llama-gguf-split).
    #[arg(long = "split-max-tensors")]
    pub split_max_tensors: Option<usize>,
    /// Put no tensor in the first shard: it holds the metadata alone (small, so a loader
    /// checks the model before the weights arrive).
    #[arg(long = "no-tensor-first-split")]
    pub no_tensor_first_split: bool,
    /// Print the shards that would be written, and write nothing.
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// The GGUF model to split (a split model's first shard splits it again).
    pub input: PathBuf,
    /// Where the shards go: OUT_PREFIX-00001-of-0000N.gguf and so on.
    pub out_prefix: PathBuf,
}

#[derive(Args, Clone)]
pub struct ModelArgs {
    /// Path to a GGUF model file (a split model: its first shard, ...-00001-of-0000N.gguf),
    /// or a model on the Hugging Face hub: hf://USER/REPO[:QUANT] or hf://USER/REPO/FILE.gguf
    /// (downloaded once into ~/.cache/superinfer/hub).
    #[arg(
        short = 'm',
        long = "model",
        required_unless_present = "hf_repo",
        default_value = "",
        hide_default_value = true,
        value_parser = model_path()
    )]
    pub model: PathBuf,
    #[command(flatten)]
    pub hub: HubArgs,
    /// Threads (default: all cores).
    #[arg(short = 't', long = "threads", default_value_t = 0)]
    pub threads: usize,
    /// Force an instruction set (scalar, avx2, avx-vnni, avx512, neon, simd128); also
    /// SUPERINFER_ISA.
    #[arg(long = "isa")]
    pub isa: Option<String>,
    /// Keep weights in the file's row layout instead of repacking them for the SIMD
    /// kernels at load (also SUPERINFER_NO_REPACK=1).
    #[arg(long = "no-repack")]
    pub no_repack: bool,
}

/// A model by name from a Hugging Face hub (llama.cpp's -hf, -hff, -hft, --offline).
#[derive(Args, Clone)]
pub struct HubArgs {
    /// A model on the Hugging Face hub, USER/REPO[:QUANT] (as llama.cpp's -hf; the same as
    /// -m hf://USER/REPO[:QUANT]): the GGUF of that quant (default Q4_K_M, else Q8_0, else
    /// the first), all shards of a split one, downloaded once into $SUPERINFER_CACHE/hub
    /// (default ~/.cache/superinfer/hub); HF_ENDPOINT names another hub.
    #[arg(
        long = "hf-repo",
        visible_alias = "hf",
        value_name = "USER/REPO[:QUANT]",
        conflicts_with = "model"
    )]
    pub hf_repo: Option<String>,
    /// With --hf-repo: this file of the repository (its path there) instead of a quant.
    #[arg(long = "hf-file", requires = "hf_repo", value_name = "FILE")]
    pub hf_file: Option<String>,
    /// Hugging Face access token, for private and gated repositories (also HF_TOKEN).
    #[arg(long = "hf-token", env = "HF_TOKEN", hide_env_values = true)]
    pub hf_token: Option<String>,
    /// Use only the models already downloaded: never ask the hub (also HF_HUB_OFFLINE=1).
    #[arg(long = "offline")]
    pub offline: bool,
}

/// KV cache element types (llama.cpp's `-ctk` / `-ctv`).
#[derive(Args, Clone, Copy)]
pub struct CacheArgs {
    /// KV cache type for keys: f32, f16 or q8_0.
    #[arg(long = "cache-type-k", visible_alias = "ctk", default_value = "f16", value_parser = parse_kv_type)]
    pub k: KvType,
    /// KV cache type for values: f32, f16 or q8_0.
    #[arg(long = "cache-type-v", visible_alias = "ctv", default_value = "f16", value_parser = parse_kv_type)]
    pub v: KvType,
}

impl CacheArgs {
    /// Options of a session with a context of `n_ctx` tokens (0: the default) and this cache.
    pub fn session(&self, n_ctx: usize) -> SessionOptions {
        SessionOptions {
            n_ctx,
            cache_type_k: self.k,
            cache_type_v: self.v,
        }
    }
}

/// `-m`'s parser: any path, and the empty default that stands for "given by --hf-repo"
/// (clap's own path parser refuses an empty value).
fn model_path() -> impl clap::builder::TypedValueParser<Value = PathBuf> {
    use clap::builder::TypedValueParser;
    clap::builder::OsStringValueParser::new().map(PathBuf::from)
}

fn parse_kv_type(s: &str) -> Result<KvType, String> {
    s.parse()
        .map_err(|e: superinfer_runtime::core::Error| e.to_string())
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub lora: crate::cmd::lora::LoraArgs,
    /// Prompt text (special tokens written in it are parsed as special tokens).
    #[arg(short = 'p', long = "prompt")]
    pub prompt: String,
    /// Tokens to generate (-1 = until end of generation or a full context).
    #[arg(
        short = 'n',
        long = "n-predict",
        default_value_t = 128,
        allow_negative_numbers = true
    )]
    pub n_predict: i64,
    /// Context size (0 = min(4096, trained context)).
    #[arg(short = 'c', long = "ctx-size", default_value_t = 0)]
    pub ctx_size: usize,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// End generation where the output contains TEXT (repeatable; the text is left out of
    /// the output, as the server's `stop`).
    #[arg(long = "stop", value_name = "TEXT")]
    pub stop: Vec<String>,
    /// Generate through end-of-generation tokens (their logits are masked, as llama.cpp's
    /// --ignore-eos): for benchmarks, with -n.
    #[arg(long = "ignore-eos")]
    pub ignore_eos: bool,
    #[command(flatten)]
    pub spec: SpecArgs,
    /// Do not add BOS even if the model asks for it.
    #[arg(long = "no-bos")]
    pub no_bos: bool,
    #[command(flatten)]
    pub grammar: GrammarArgs,
}

/// Structured output: the text generated must follow one of these.
#[derive(Args)]
pub struct GrammarArgs {
    /// A JSON Schema file: the output is a JSON value that validates against it (a keyword
    /// that cannot be enforced is an error).
    #[arg(long = "json-schema", value_name = "FILE")]
    pub json_schema: Option<PathBuf>,
    /// A grammar file: llama.cpp GBNF (`.gbnf`) or llguidance Lark (`.lark`); other names by
    /// their content (GBNF has `::=`).
    #[arg(long = "grammar-file", value_name = "FILE")]
    pub grammar_file: Option<PathBuf>,
    /// A regular expression the whole output matches (Rust regex syntax).
    #[arg(long = "regex", value_name = "RX")]
    pub regex: Option<String>,
    /// Any JSON object (OpenAI's json_object).
    #[arg(long = "json")]
    pub json: bool,
}

/// Sampling flags (llama.cpp's names and defaults).
#[derive(Args)]
pub struct SamplingArgs {
    /// Temperature; 0 = greedy.
    #[arg(long = "temp", default_value_t = 0.8)]
    pub temp: f32,
    #[arg(long = "top-k", default_value_t = 40)]
    pub top_k: usize,
    #[arg(long = "top-p", default_value_t = 0.95)]
    pub top_p: f32,
    #[arg(long = "min-p", default_value_t = 0.05)]
    pub min_p: f32,
    #[arg(long = "repeat-penalty", default_value_t = 1.0)]
    pub repeat_penalty: f32,
    #[arg(long = "repeat-last-n", default_value_t = 64)]
    pub repeat_last_n: usize,
    #[arg(long = "frequency-penalty", default_value_t = 0.0)]
    pub frequency_penalty: f32,
    #[arg(long = "presence-penalty", default_value_t = 0.0)]
    pub presence_penalty: f32,
    /// RNG seed (default: random).
    #[arg(short = 's', long = "seed")]
    pub seed: Option<u64>,
}

impl SamplingArgs {
    pub fn config(&self) -> SamplerConfig {
        SamplerConfig {
            temperature: self.temp,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            frequency_penalty: self.frequency_penalty,
            presence_penalty: self.presence_penalty,
            repeat_last_n: self.repeat_last_n,
            seed: self.seed.unwrap_or_else(superinfer_runtime::random_seed),
        }
    }
}

/// Speculative decoding (llama.cpp's flag names): a draft model or prompt lookup proposes
/// tokens, the model checks them in one batched step. Greedy output is unchanged by it;
/// sampled output keeps its distribution.
#[derive(Args, Clone)]
pub struct SpecArgs {
    /// Draft model: a smaller model with the same tokenizer (e.g. Qwen2.5-Coder-0.5B for
    /// Qwen2.5-Coder-1.5B); a path or hf://USER/REPO[:QUANT].
    #[arg(long = "model-draft", visible_alias = "md")]
    pub model_draft: Option<PathBuf>,
    /// Prompt lookup instead of a draft model: draft by finding the last N tokens (N down
    /// to 2) earlier in the prompt and output and copying what followed (0 = off).
    #[arg(long = "lookup-ngram", default_value_t = 0)]
    pub lookup_ngram: usize,
    /// Most tokens drafted per step (0 turns speculation off).
    #[arg(long = "draft-max", visible_alias = "draft", default_value_t = 16)]
    pub draft_max: usize,
    /// Fewest tokens a draft model drafts per step, whatever their probability.
    #[arg(long = "draft-min", default_value_t = 0)]
    pub draft_min: usize,
    /// A draft model stops drafting when its most likely token is less likely than this
    /// (that token is still the draft's last when it is at least half as likely).
    #[arg(long = "draft-p-min", default_value_t = 0.75)]
    pub draft_p_min: f32,
    /// A draft model scores only the first N tokens of its vocabulary (BPE lists frequent
    /// tokens first): a cheaper output layer per drafted token, the output unchanged
    /// (0 = the whole vocabulary).
    #[arg(long = "draft-vocab", default_value_t = 0)]
    pub draft_vocab: usize,
    /// Draft lengths by fixed rules: a draft model by --draft-p-min alone, prompt lookup by
    /// a 3, 7, 15, ... schedule (by default both stop where, by the verification times
    /// measured so far, one more token no longer pays).
    #[arg(long = "draft-fixed")]
    pub draft_fixed: bool,
}

#[derive(Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub lora: crate::cmd::lora::LoraArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub spec: SpecArgs,
    /// Context size of the conversation (0 = min(4096, trained context)).
    #[arg(short = 'c', long = "ctx-size", default_value_t = 0)]
    pub ctx_size: usize,
    /// Most tokens of one answer (-1 = until the model ends its turn or the context is
    /// full).
    #[arg(short = 'n', long = "n-predict", default_value_t = -1, allow_negative_numbers = true)]
    pub n_predict: i64,
    /// A system message to start the conversation with.
    #[arg(long = "system")]
    pub system: Option<String>,
    /// A Jinja chat template file to use instead of the model's own.
    #[arg(long = "chat-template")]
    pub chat_template: Option<PathBuf>,
    #[command(flatten)]
    pub grammar: GrammarArgs,
}

#[derive(Args)]
pub struct TokenizeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[arg(short = 'p', long = "prompt")]
    pub prompt: String,
    /// Do not add BOS/EOS as the model's metadata asks.
    #[arg(long = "no-bos")]
    pub no_bos: bool,
    /// Treat special-token text in the prompt as plain text.
    #[arg(long = "no-parse-special")]
    pub no_parse_special: bool,
}

#[derive(Args)]
pub struct PerplexityArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub lora: crate::cmd::lora::LoraArgs,
    /// Text file to score.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Tokens per chunk.
    #[arg(short = 'c', long = "ctx-size", default_value_t = 512)]
    pub ctx_size: usize,
    /// Tokens per evaluation batch (must divide -c).
    #[arg(short = 'b', long = "batch-size", default_value_t = 512)]
    pub batch_size: usize,
    /// Score only the first N chunks (default: all).
    #[arg(long = "chunks", default_value_t = 0)]
    pub chunks: usize,
}

#[derive(Args)]
pub struct InfoArgs {
    /// Path to a GGUF model file (a split model: its first shard, ...-00001-of-0000N.gguf),
    /// or a model on the Hugging Face hub: hf://USER/REPO[:QUANT] or hf://USER/REPO/FILE.gguf
    /// (downloaded once into ~/.cache/superinfer/hub).
    #[arg(
        short = 'm',
        long = "model",
        required_unless_present = "hf_repo",
        default_value = "",
        hide_default_value = true,
        value_parser = model_path()
    )]
    pub model: PathBuf,
    #[command(flatten)]
    pub hub: HubArgs,
}

#[derive(Args)]
pub struct BenchArgs {
    /// Path to a GGUF model file (a split model: its first shard, ...-00001-of-0000N.gguf),
    /// or a model on the Hugging Face hub: hf://USER/REPO[:QUANT] or hf://USER/REPO/FILE.gguf
    /// (downloaded once into ~/.cache/superinfer/hub).
    #[arg(
        short = 'm',
        long = "model",
        required_unless_present = "hf_repo",
        default_value = "",
        hide_default_value = true,
        value_parser = model_path()
    )]
    pub model: PathBuf,
    #[command(flatten)]
    pub hub: HubArgs,
    /// Prompt tokens for the pp test (0 skips it).
    #[arg(short = 'p', long = "n-prompt", default_value_t = 512)]
    pub n_prompt: usize,
    /// Generated tokens for the tg test (0 skips it).
    #[arg(short = 'n', long = "n-gen", default_value_t = 128)]
    pub n_gen: usize,
    /// Tokens already in the context before each test (comma separated, like llama-bench
    /// `-d`): the tests then run at that depth; filling it is not timed.
    #[arg(
        short = 'd',
        long = "n-depth",
        value_delimiter = ',',
        default_value = "0"
    )]
    pub n_depth: Vec<usize>,
    /// Sequences decoded together, comma separated (like llama-batched-bench `-npl`): each
    /// runs a `-p` prompt, then all decode `-n` tokens in shared steps through the
    /// scheduler; reports prompt t/s and aggregate and per-sequence decode t/s.
    #[arg(long = "n-parallel", visible_alias = "np", value_delimiter = ',')]
    pub n_parallel: Vec<usize>,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub lora: crate::cmd::lora::LoraArgs,
    /// Thread counts to test, comma separated (default: all cores).
    #[arg(short = 't', long = "threads", value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// Repetitions of each test (after one warm-up run).
    #[arg(short = 'r', long = "repetitions", default_value_t = 5)]
    pub repetitions: usize,
    /// Print one JSON array (llama-bench `-o json` field names) instead of a table.
    #[arg(long = "json")]
    pub json: bool,
    /// Output format, as llama-bench: md or json.
    #[arg(short = 'o', long = "output", value_parser = ["md", "json"])]
    pub output: Option<String>,
    /// Force an instruction set (scalar, avx2, avx-vnni, avx512, neon, simd128); also
    /// SUPERINFER_ISA.
    #[arg(long = "isa")]
    pub isa: Option<String>,
    /// Keep weights in the file's row layout instead of repacking them for the SIMD
    /// kernels at load (also SUPERINFER_NO_REPACK=1).
    #[arg(long = "no-repack")]
    pub no_repack: bool,
    /// Speculative decoding benchmark (with --model-draft or --lookup-ngram): the prompt
    /// text (special tokens parsed), from which `-n` tokens are decoded greedily with and
    /// without speculation, alternated.
    #[arg(short = 'f', long = "prompt-file")]
    pub prompt_file: Option<PathBuf>,
    #[command(flatten)]
    pub spec: SpecArgs,
}

#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub cache: CacheArgs,
    /// Address to listen on.
    #[arg(long = "host", default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0: any free port).
    #[arg(long = "port", default_value_t = 8080)]
    pub port: u16,
    /// Requests that run at once (slots); more wait in a queue.
    #[arg(long = "parallel", visible_alias = "np", default_value_t = 8)]
    pub n_parallel: usize,
    /// One request's context, prompt and answer (0 = min(4096, trained context)).
    #[arg(short = 'c', long = "ctx-size", default_value_t = 0)]
    pub ctx_size: usize,
    /// Tokens per batched step: the running requests' next tokens first, then prompt
    /// chunks.
    #[arg(short = 'b', long = "batch-size", default_value_t = 512)]
    pub batch_size: usize,
    /// Most prompt tokens in a step while other requests are decoding (0: up to -b). A
    /// step's prompt chunk delays every running stream's next token: smaller keeps streams
    /// smooth while long prompts arrive; a prompt alone still runs in -b chunks.
    #[arg(long = "prefill-chunk", default_value_t = 128)]
    pub prefill_chunk: usize,
    /// Positions the shared KV cache holds for all requests (default: -c × -np). Less
    /// saves memory when prompts share prefixes or are short.
    #[arg(long = "kv-size", default_value_t = 0)]
    pub kv_size: usize,
    /// Requests that may wait for a slot; more are refused with 429.
    #[arg(long = "max-queue", default_value_t = 64)]
    pub max_queue: usize,
    /// Require 'Authorization: Bearer KEY' (also SUPERINFER_API_KEY).
    #[arg(long = "api-key", env = "SUPERINFER_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// The model's name in the API (default: the file name).
    #[arg(long = "alias")]
    pub alias: Option<String>,
    /// A Jinja chat template file to use instead of the model's own.
    #[arg(long = "chat-template")]
    pub chat_template: Option<PathBuf>,
    /// Where a chat answer's reasoning goes (gpt-oss's analysis channel, `<think>…</think>`):
    /// `auto` or `deepseek`: `reasoning_content`; `none`: left in `content` as the model
    /// wrote it. Requests may say otherwise with `"reasoning_format"`.
    #[arg(long = "reasoning-format", default_value = "auto", value_parser = ["auto", "deepseek", "none"])]
    pub reasoning_format: String,
    /// Largest request body, in MiB.
    #[arg(long = "body-limit-mib", default_value_t = 4)]
    pub body_limit_mib: usize,
    /// Speculative decoding by prompt lookup for every request (requests may turn it off
    /// with `"speculative": false`, or on with `"lookup_ngram": N`): match the last N tokens
    /// against the text so far and verify what followed them. 0 = off.
    #[arg(long = "lookup-ngram", default_value_t = 0)]
    pub lookup_ngram: usize,
    /// Speculative decoding with a draft model for every request (requests may turn it off
    /// with `"speculative": false`): a smaller model with the same tokenizer (e.g.
    /// Qwen2.5-Coder-0.5B for Qwen2.5-Coder-1.5B; a path or hf://USER/REPO[:QUANT]), loaded
    /// beside the model; each request drafts with its own cache of it.
    #[arg(long = "model-draft", visible_alias = "md")]
    pub model_draft: Option<PathBuf>,
    /// The longest draft verified in one step (draft model or prompt lookup).
    #[arg(long = "draft-max", visible_alias = "draft", default_value_t = 16)]
    pub draft_max: usize,
    /// Fewest tokens a draft model drafts per step, whatever their probability.
    #[arg(long = "draft-min", default_value_t = 0)]
    pub draft_min: usize,
    /// A draft model stops drafting when its most likely token is less likely than this
    /// (that token is still the draft's last when it is at least half as likely).
    #[arg(long = "draft-p-min", default_value_t = 0.75)]
    pub draft_p_min: f32,
    /// A draft model scores only the first N tokens of its vocabulary (BPE lists frequent
    /// tokens first): a cheaper output layer per drafted token, the output unchanged
    /// (0 = the whole vocabulary).
    #[arg(long = "draft-vocab", default_value_t = 0)]
    pub draft_vocab: usize,
    /// How log lines on stderr look: text, or json (one object a line, for a log
    /// collector). Every request gets a line: method, route, status, latency_ms, and for
    /// generation prompt_tokens, completion_tokens and finish. RUST_LOG sets the level
    /// (default info; debug adds /health and /metrics requests).
    #[arg(long = "log-format", value_enum, default_value_t = LogFormatArg::Text)]
    pub log_format: LogFormatArg,
    /// On SIGTERM or Ctrl-C the server stops accepting connections and lets the running
    /// requests finish, then exits 0: at most this many seconds, after which (or on a second
    /// signal) it ends them at once.
    #[arg(long = "shutdown-timeout", default_value_t = 30.0, value_parser = parse_seconds)]
    pub shutdown_timeout: f64,
    /// After SIGTERM, keep accepting connections this many seconds with `/ready` answering
    /// 503 "draining", so that a load balancer or Kubernetes takes the replica out of rotation
    /// before it stops listening (then drains as `--shutdown-timeout` says).
    #[arg(long = "drain-delay", default_value_t = 0.0, value_parser = parse_seconds)]
    pub drain_delay: f64,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum LogFormatArg {
    Text,
    Json,
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds from 0 to 86400")),
    }
}

/// llama.cpp's multi-letter flags with one dash (`-np 4`, `-ctk q8_0`) as the long flags
/// they stand for, so its users' command lines work as they are.
pub fn llama_style(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    args.map(|a| match a.to_str() {
        Some("-np") | Some("-npl") => "--np".into(),
        Some("-ctk") => "--ctk".into(),
        Some("-ctv") => "--ctv".into(),
        Some("-hf") | Some("-hfr") => "--hf-repo".into(),
        Some("-hff") => "--hf-file".into(),
        Some("-hft") => "--hf-token".into(),
        _ => a,
    })
    .collect()
}

#[derive(Args)]
pub struct EmbedArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// A text to embed (repeatable).
    #[arg(short = 'p', long = "prompt")]
    pub prompt: Vec<String>,
    /// A file of texts, one per line (empty lines are skipped); after the -p texts.
    #[arg(short = 'f', long = "file")]
    pub file: Option<PathBuf>,
    /// L2-normalise the embeddings (the default for GGUF files, as llama-embedding; a
    /// Hugging Face directory follows its modules.json).
    #[arg(long = "normalize", overrides_with = "no_normalize")]
    pub normalize: bool,
    /// Do not normalise the embeddings.
    #[arg(long = "no-normalize")]
    pub no_normalize: bool,
    /// Quantize the layers' matrices to this type when loading (e.g. q8_0; default: as
    /// stored).
    #[arg(long = "type")]
    pub weight_type: Option<String>,
}
