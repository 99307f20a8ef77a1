/** The `code` of every error the package rejects with. */
export type ErrorCode =
  | 'not_gguf'
  | 'truncated'
  | 'corrupt_gguf'
  | 'unsupported_model'
  | 'unsupported_tensor_type'
  | 'too_large'
  | 'network'
  | 'context_length_exceeded'
  | 'invalid_argument'
  | 'invalid_type'
  | 'invalid_value'
  | 'missing_required_parameter'
  | 'template'
  | 'tokenizer'
  | 'no_model'
  | 'disposed'
  | 'internal';

export declare const ERROR_CODES: readonly ErrorCode[];

export declare class SuperinferError extends Error {
  readonly name: 'SuperinferError';
  readonly code: ErrorCode;
  /** The request field a bad request is about (with `invalid_type`, `invalid_value`, `missing_required_parameter`), as the server's error objects name it. */
  readonly param?: string;
  constructor(code: ErrorCode, message: string, param?: string);
}

/** One part of a model: a URL (in Node also a file path or file: URL), a Blob/File, or bytes (an ArrayBuffer is transferred to the worker: it becomes detached). */
export type ModelPart = string | URL | Blob | ArrayBuffer | ArrayBufferView;

/**
 * A GGUF file, or an array of parts, in order: the shards of a model split with llama.cpp's
 * `llama-gguf-split` (`model-00001-of-00003.gguf`, `model-00002-of-00003.gguf`, ...; the
 * first shard's header says it is one, and every shard must be there, in order), or one file
 * cut into byte ranges (concatenated). Either way the weights are held once in wasm memory.
 * The URL (or Node path) of a first shard alone, named `…-00001-of-0000N.gguf`, stands for
 * all N shards, found by name as llama.cpp finds them (`shardNames`).
 */
export type ModelSource = ModelPart | ModelPart[];

export interface LoadOptions {
  /** Called as the file streams into the engine. */
  onProgress?: (p: { loaded: number; total: number }) => void;
  /**
   * Threads to use, 1 to 64 (default: the logical cores, `navigator.hardwareConcurrency` or
   * Node's `os.availableParallelism()`, at most 8). More than one runs the threaded build,
   * which needs shared memory: Node, or a cross-origin isolated page (served with
   * `Cross-Origin-Opener-Policy: same-origin` and `Cross-Origin-Embedder-Policy:
   * require-corp`); elsewhere the single-thread build runs. `info().threads` says what is used.
   */
  threads?: number;
  /** Context size in tokens (default: min(4096, the model's trained context)). */
  nCtx?: number;
  /** Prompt tokens per forward step (default 512). */
  nBatch?: number;
  /** Keep downloaded models in the Cache API, keyed by URL (default true; ignored where there is no Cache API, e.g. Node). */
  cache?: boolean;
  /** Cancels the load. */
  signal?: AbortSignal;
  /**
   * Where the engine's .wasm files are, when a bundler moved them (default: next to this
   * module): absolute URLs by file name (`superinfer.wasm`, `superinfer-threads.wasm`,
   * `superinfer-relaxed.wasm`, `superinfer-relaxed-threads.wasm`; a build whose file fails to
   * load is passed over for the next), or one URL (that file is used whatever the page
   * allows).
   */
  wasmUrl?: string | URL | Partial<Record<WasmFile, string | URL>>;
}

/** The engine builds in the package. */
export type WasmFile = 'superinfer.wasm' | 'superinfer-threads.wasm' | 'superinfer-relaxed.wasm' | 'superinfer-relaxed-threads.wasm';

export interface SamplingOptions {
  /** 0 = greedy (default 0.8, as llama.cpp). */
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  repeatPenalty?: number;
  repeatLastN?: number;
  frequencyPenalty?: number;
  presencePenalty?: number;
  seed?: number;
}

export interface GenerateOptions extends SamplingOptions {
  /** Tokens to generate at most (default: until the end of generation or a full context). */
  maxTokens?: number;
  /** Generation ends where one of these appears (it is not returned). */
  stop?: string | string[];
  /** Never end at an end-of-generation token (its logits are masked), for benchmarks. */
  ignoreEos?: boolean;
  /** Stops the generation within one token; the stream then ends with finish_reason "abort". */
  signal?: AbortSignal;
}

export type FinishReason = 'stop' | 'length' | 'abort';

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** llama.cpp server's names. `cached_n` prompt tokens were kept from the previous call's cache. */
export interface Timings {
  cached_n: number;
  prompt_n: number;
  prompt_ms: number;
  prompt_per_second: number;
  predicted_n: number;
  predicted_ms: number;
  predicted_per_second: number;
}

interface ChunkBase {
  id: string;
  created: number;
  model: string;
  /** On the last chunk only. */
  usage?: Usage;
  /** On the last chunk only. */
  timings?: Timings;
}

export interface CompletionChunk extends ChunkBase {
  object: 'text_completion';
  choices: [{ index: 0; text: string; token_ids?: number[]; logprobs: null; finish_reason: FinishReason | null }];
}

export interface ChatChunk extends ChunkBase {
  object: 'chat.completion.chunk';
  choices: [{ index: 0; delta: { role?: 'assistant'; content?: string }; token_ids?: number[]; finish_reason: FinishReason | null }];
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | string;
  content: string;
  [field: string]: unknown;
}

export interface EngineInfo {
  architecture: string;
  name: string | null;
  /** The model's bytes (every part's). */
  file_size: number;
  /** The files of a split model (gguf-split), else 1. */
  shards: number;
  n_ctx: number;
  n_ctx_train: number;
  n_batch: number;
  n_vocab: number;
  n_layer: number;
  n_embd: number;
  kv_cache_bytes: number;
  /** The kernel set: "simd128". */
  isa: string;
  /** Threads in use (1 + the helper workers that started). */
  threads: number;
  /** The threads asked for (`load`'s `threads`, or the default). */
  threads_requested: number;
  /**
   * The engine build running: "superinfer" (one thread) or "superinfer-threads" (shared
   * memory, Web Workers / worker_threads), or their relaxed-SIMD builds "superinfer-relaxed"
   * and "superinfer-relaxed-threads" where the engine validates relaxed-SIMD instructions.
   */
  build: 'superinfer' | 'superinfer-threads' | 'superinfer-relaxed' | 'superinfer-relaxed-threads' | 'custom' | string;
  /** The running module was built with relaxed SIMD (the engine reports its own build). */
  relaxed_simd: boolean;
  /** "model" (the file's tokenizer.chat_template) or "builtin" (ChatML, or Gemma's turns for Gemma). */
  chat_template: 'model' | 'builtin';
  bos: number | null;
  eos: number | null;
  load_ms: number;
  /** Every part came from the cache. */
  cached: boolean;
  /** The worker's wasm memory right after loading (shared with the helpers in the threaded build). */
  wasm_bytes: number;
  cross_origin_isolated: boolean;
}

export declare class Engine {
  info(): EngineInfo;
  /** The worker's wasm memory now. */
  memory(): Promise<{ wasmBytes: number }>;
  tokenize(text: string, options?: { addSpecial?: boolean; parseSpecial?: boolean }): Promise<number[]>;
  detokenize(ids: Iterable<number>, options?: { special?: boolean }): Promise<string>;
  /** The prompt text the model's chat template makes of `messages`. */
  applyChatTemplate(messages: ChatMessage[]): Promise<string>;
  /** Text (special tokens written in it are parsed; BOS added as the model asks) or token ids. */
  complete(prompt: string | number[], options?: GenerateOptions): AsyncIterable<CompletionChunk>;
  chat(messages: ChatMessage[], options?: GenerateOptions): AsyncIterable<ChatChunk>;
  /** Frees the model and ends the worker and its helper threads. */
  dispose(): Promise<void>;
}

export declare function load(source: ModelSource, options?: LoadOptions): Promise<Engine>;

/** The URLs (or paths) of every shard when `source` names a split model's first shard (`…-00001-of-0000N.gguf`, N > 1), else null. */
export declare function shardNames(source: string): string[] | null;

/** Name of the Cache API cache models are kept in. */
export declare const CACHE_NAME: string;
/** Removes every cached model, or the one downloaded from `url`. */
export declare function clearCache(url?: string | URL): Promise<void>;
