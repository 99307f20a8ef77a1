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
  /** A response format's JSON schema, or a tool's `parameters`, is not a valid schema. */
  | 'invalid_schema'
  /** A schema keyword the engine cannot enforce (never dropped silently); `param` names the keyword. */
  | 'unsupported_schema_keyword'
  /** A `grammar` (GBNF) that does not parse. */
  | 'invalid_grammar'
  /** A schema or grammar past the engine's limits (its size, nesting, or the work to compile it). */
  | 'grammar_too_large'
  /** `toolChoice` names a function that `tools` does not hold. */
  | 'unknown_tool'
  | 'template'
  | 'tokenizer'
  | 'no_model'
  | 'disposed'
  | 'internal';

export declare const ERROR_CODES: readonly ErrorCode[];

export declare class SuperinferError extends Error {
  readonly name: 'SuperinferError';
  readonly code: ErrorCode;
  /** The request field a bad request is about (with `invalid_type`, `invalid_value`, `missing_required_parameter`, and the schema and grammar codes: `response_format`, `grammar`, `tools`, `tool_choice`, or the unsupported keyword), as the server's error objects name it. */
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
  /**
   * The shape of the output, as OpenAI's `response_format` (the server's meaning): any JSON
   * object, or JSON that fits a JSON Schema, enforced token by token (the answer ends when the
   * value is complete). A schema keyword the engine cannot enforce rejects with
   * `unsupported_schema_keyword` (`param`: the keyword), a bad schema with `invalid_schema`.
   *
   * ```js
   * const r = await engine.chatCompletion([{ role: 'user', content: 'A city and its country.' }], {
   *   temperature: 0,
   *   responseFormat: { type: 'json_schema', json_schema: { name: 'place', schema: {
   *     type: 'object', properties: { city: { type: 'string' }, country: { type: 'string' } },
   *     required: ['city', 'country'], additionalProperties: false } } },
   * });
   * JSON.parse(r.choices[0].message.content); // { city: ..., country: ... }
   * ```
   */
  responseFormat?: ResponseFormat;
  /** A llama.cpp GBNF grammar the output must follow (llama-server's `grammar`); not with `responseFormat`. */
  grammar?: string;
  /**
   * Functions the model may call (chat only), as OpenAI's `tools`: the chat template renders
   * them, and the calls, written in the model's own format (Qwen2.5's `<tool_call>`, Llama
   * 3.x's JSON, Mistral's `[TOOL_CALLS]`), are held to each tool's `parameters` schema and
   * come back as `tool_calls` (finish_reason `tool_calls`). Not with `responseFormat`.
   *
   * ```js
   * const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
   *   parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
   * const r = await engine.chatCompletion([{ role: 'user', content: 'Weather in Paris?' }], { tools, toolChoice: 'required' });
   * const call = r.choices[0].message.tool_calls[0]; // { id, type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }
   * // the next turn: the call, then its result
   * const next = [..., r.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '{"temp": 18}' }];
   * ```
   */
  tools?: Tool[];
  /**
   * `'auto'` (the default with tools: the model decides, text before a call is free),
   * `'none'` (no call), `'required'` (at least one call), or one function:
   * `{ type: 'function', function: { name } }` (a name not in `tools` rejects with `unknown_tool`).
   */
  toolChoice?: 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } };
  /** Several calls in one answer (default true). */
  parallelToolCalls?: boolean;
  /** `'auto'` (default) or `'deepseek'`: a thinking model's reasoning goes to `reasoning_content`; `'none'`: it stays in the content. */
  reasoningFormat?: 'auto' | 'deepseek' | 'none';
}

/** OpenAI's `response_format`. */
export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; json_schema: { name?: string; description?: string; schema?: object | boolean; strict?: boolean } };

/** A function the model may call (OpenAI's `tools` entry). */
export interface Tool {
  type: 'function';
  function: {
    name: string;
    description?: string;
    /** The JSON Schema of its arguments (default: an object with any properties). */
    parameters?: object;
  };
}

/** A whole call (OpenAI's `message.tool_calls` entry); `arguments` is the JSON text the model wrote. */
export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/**
 * A streamed piece of a call (OpenAI's `delta.tool_calls` entry): the call's first delta has
 * its `id`, `type` and `function.name`; every delta adds a fragment of `function.arguments`.
 * The fragments of one `index` concatenate to the whole call's `arguments`.
 */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function: { name?: string; arguments: string };
}

/** `tool_calls`: the answer ended calling tools. */
export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'abort';

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

/**
 * A piece of a chat answer, in the server's stream's shape: a thinking model's reasoning in
 * `reasoning_content`, the answer in `content`, tool calls in `tool_calls` (each in a chunk
 * of its own; the token ids on the first).
 */
export interface ChatChunk extends ChunkBase {
  object: 'chat.completion.chunk';
  choices: [{
    index: 0;
    delta: { role?: 'assistant'; content?: string; reasoning_content?: string; tool_calls?: ToolCallDelta[] };
    token_ids?: number[];
    finish_reason: FinishReason | null;
  }];
}

/** A whole chat answer (OpenAI's non-streamed `chat.completion`). */
export interface ChatCompletion extends ChunkBase {
  object: 'chat.completion';
  choices: [{
    index: 0;
    message: {
      role: 'assistant';
      /** null when the answer is only tool calls. */
      content: string | null;
      reasoning_content?: string;
      tool_calls?: ToolCall[];
    };
    finish_reason: FinishReason;
  }];
}

/** `role: 'tool'` with `tool_call_id` answers a call; an assistant message may carry its `tool_calls`. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool' | string;
  content: string | null;
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
  /** The prompt text the model's chat template makes of `messages` (and `tools`, as `chat` renders them). */
  applyChatTemplate(messages: ChatMessage[], options?: { tools?: Tool[] }): Promise<string>;
  /** Text (special tokens written in it are parsed; BOS added as the model asks) or token ids. */
  complete(prompt: string | number[], options?: GenerateOptions): AsyncIterable<CompletionChunk>;
  chat(messages: ChatMessage[], options?: GenerateOptions): AsyncIterable<ChatChunk>;
  /** The whole answer of `chat` at once: its content, reasoning and tool calls. */
  chatCompletion(messages: ChatMessage[], options?: GenerateOptions): Promise<ChatCompletion>;
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
