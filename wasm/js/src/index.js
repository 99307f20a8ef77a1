// superinfer for the browser and Node: load a GGUF model into a worker, then complete or
// chat with OpenAI-shaped streaming chunks. The page's thread only posts messages.

import { SuperinferError, ERROR_CODES } from './errors.js';
import { clearCache, CACHE_NAME } from './source.js';
import { spawnWorker } from './spawn.js';

export { SuperinferError, ERROR_CODES, clearCache, CACHE_NAME };

const isNode = typeof process !== 'undefined' && !!process.versions?.node && typeof window === 'undefined';

class Rpc {
  constructor(worker) {
    this.worker = worker;
    this.nextId = 1;
    this.pending = new Map();
    this.dead = null;
    worker.onMessage((m) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      if (m.type === 'progress') p.onProgress?.({ loaded: m.loaded, total: m.total });
      else if (m.type === 'chunk') p.onChunk?.(m.chunk);
      else {
        this.pending.delete(m.id);
        if (m.type === 'result') p.resolve(m.result);
        else p.reject(SuperinferError.from(m.error));
      }
    });
    worker.onError((e) => this.fail(new SuperinferError('internal', `the worker failed: ${e?.message ?? e}`)));
  }

  fail(error) {
    this.dead = error;
    for (const p of this.pending.values()) p.reject(error);
    this.pending.clear();
  }

  /** Sends a request; `hooks`: onProgress, onChunk, signal; returns the result. */
  call(type, body = {}, { transfer, ...hooks } = {}) {
    if (this.dead) return Promise.reject(this.dead);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, ...hooks });
      try {
        this.worker.post({ ...body, type, id }, transfer);
      } catch (e) {
        this.pending.delete(id);
        reject(new SuperinferError('invalid_argument', `cannot send this to the worker: ${e.message}${isNode ? ' (in Node, pass the model file\'s path or a file: URL instead of a file-backed Blob)' : ''}`));
        return;
      }
      if (hooks.signal) {
        const abort = () => this.worker.post({ type: 'abort', target: id });
        if (hooks.signal.aborted) abort();
        else hooks.signal.addEventListener('abort', abort, { once: true });
      }
    });
  }
}

function describeSource(source) {
  const shards = (typeof source === 'string' || source instanceof URL) && shardNames(String(source));
  if (shards) return describeSource(shards);
  if (Array.isArray(source)) {
    if (!source.length) throw new SuperinferError('invalid_argument', 'an empty list of model parts');
    const items = source.map(describeOne);
    return { kind: 'parts', items: items.map(({ transfer, ...i }) => i), transfer: items.flatMap((i) => i.transfer ?? []) };
  }
  return describeOne(source);
}

/**
 * A split model's first shard as llama-gguf-split names it (`…-00001-of-00003.gguf`, any
 * query string kept): every shard's URL or path, found by name as llama.cpp finds them;
 * otherwise null.
 */
export function shardNames(source) {
  const m = /^(.*)-00001-of-(\d{5})\.gguf((?:[?#].*)?)$/.exec(source);
  const n = m ? Number(m[2]) : 0;
  if (n < 2) return null;
  return Array.from({ length: n }, (_, i) => `${m[1]}-${String(i + 1).padStart(5, '0')}-of-${m[2]}.gguf${m[3]}`);
}

/** One file, or one part: a URL (in Node a local path or file: URL), a Blob, or bytes. */
function describeOne(source) {
  if (isNode && (typeof source === 'string' || source instanceof URL) && isLocal(source)) {
    return { kind: 'file', path: String(source) };
  }
  if (typeof source === 'string' || source instanceof URL) return { kind: 'url', url: String(source) };
  if (typeof Blob !== 'undefined' && source instanceof Blob) return { kind: 'blob', blob: source };
  if (source instanceof ArrayBuffer) return { kind: 'buffer', buffer: source, transfer: [source] };
  if (ArrayBuffer.isView(source)) {
    const copy = source.byteOffset === 0 && source.byteLength === source.buffer.byteLength
      ? source.buffer : source.buffer.slice(source.byteOffset, source.byteOffset + source.byteLength);
    return { kind: 'buffer', buffer: copy, transfer: [copy] };
  }
  throw new SuperinferError('invalid_argument', 'the model source must be a URL, a Blob/File, an ArrayBuffer, or an array of them (the shards of a split model, or one file\'s byte ranges)');
}

/**
 * Loads a GGUF model in a new worker: one file, or an array of parts (the shards of a model
 * split with llama.cpp's gguf-split, in order, or one file's byte ranges). A split model's
 * first shard alone, by URL or path, brings the others by name.
 * @param {import('./index.d.ts').ModelSource} source
 * @param {import('./index.d.ts').LoadOptions} [options]
 * @returns {Promise<Engine>}
 */
export async function load(source, options = {}) {
  const { onProgress, threads, nCtx, nBatch, cache = true, signal, wasmUrl } = options;
  if (threads !== undefined && !(Number.isInteger(threads) && threads > 0 && threads <= MAX_THREADS)) {
    throw new SuperinferError('invalid_argument', `threads must be an integer from 1 to ${MAX_THREADS}, not ${threads}`);
  }
  const wanted = threads ?? await defaultThreads();
  const { transfer, ...src } = describeSource(source);
  const worker = await spawnWorker();
  const rpc = new Rpc(worker);
  try {
    const env = await rpc.call('init', { wasmUrl: wasmUrlOption(wasmUrl), threads: wanted });
    const info = await rpc.call('load', { source: src, options: { nCtx, nBatch, cache } }, { transfer, onProgress, signal });
    return new Engine(rpc, worker, { ...info, build: env.build, cross_origin_isolated: env.crossOriginIsolated, threads_requested: wanted });
  } catch (e) {
    worker.terminate();
    throw e;
  }
}

/** The engine's threads at most: itself and 63 helpers (wasm/src/threads.rs). */
const MAX_THREADS = 64;
/** The default's ceiling: decoding is bound by memory bandwidth, which a few cores fill. */
const DEFAULT_MAX_THREADS = 8;

/** The logical cores (navigator.hardwareConcurrency; Node: os.availableParallelism()), at most 8. */
async function defaultThreads() {
  let n = globalThis.navigator?.hardwareConcurrency;
  if (isNode) {
    const os = await import('node:os');
    n = os.availableParallelism?.() ?? os.cpus().length;
  }
  return Math.max(1, Math.min(DEFAULT_MAX_THREADS, Number.isInteger(n) ? n : 1));
}

/** `wasmUrl` as the worker takes it: a URL string, or URL strings by file name. */
function wasmUrlOption(w) {
  if (w === undefined || w === null) return undefined;
  if (typeof w === 'string' || w instanceof URL) return String(w);
  return Object.fromEntries(Object.entries(w).map(([k, v]) => [k, String(v)]));
}

/** In Node, a path or a file: URL names a local file. */
function isLocal(source) {
  if (source instanceof URL) return source.protocol === 'file:';
  return !/^(https?|blob|data):/i.test(source);
}

let counter = 0;

export class Engine {
  constructor(rpc, worker, info) {
    this._rpc = rpc;
    this._worker = worker;
    this._info = info;
    this._disposed = false;
  }

  /** Architecture, file size, context, threads in use, KV cache bytes, ISA... */
  info() {
    return { ...this._info };
  }

  /** Bytes of the worker's wasm linear memory now. */
  async memory() {
    return this._call('memory');
  }

  async tokenize(text, { addSpecial = true, parseSpecial = true } = {}) {
    return this._call('tokenize', { text: String(text), addSpecial, parseSpecial });
  }

  async detokenize(ids, { special = false } = {}) {
    return this._call('detokenize', { ids: Array.from(ids), special });
  }

  /** The prompt text the chat template makes of `messages` (and of `tools`, as `chat` renders them). */
  async applyChatTemplate(messages, { tools } = {}) {
    return this._call('renderChat', tools == null ? { messages } : { messages, tools });
  }

  /** Streams a completion of `prompt` (text or token ids). */
  complete(prompt, options = {}) {
    const body = { prompt: Array.isArray(prompt) ? prompt : String(prompt) };
    return this._stream('text_completion', body, options);
  }

  /** Streams the assistant's reply to `messages` ([{role, content}], OpenAI's shape). */
  chat(messages, options = {}) {
    return this._stream('chat.completion.chunk', { messages }, options);
  }

  /**
   * The assistant's whole reply to `messages`, as OpenAI's non-streamed `chat.completion`:
   * `message.content` (null when the reply is only tool calls), `reasoning_content` when the
   * model reasoned, `tool_calls` when it called tools (finish_reason `tool_calls`).
   */
  async chatCompletion(messages, options = {}) {
    let whole = null;
    const stream = this._stream('chat.completion.chunk', { messages }, options, (r) => { whole = r; });
    let content = '';
    let reasoning = '';
    let last = null;
    for await (const c of stream) {
      const d = c.choices[0].delta;
      content += d.content ?? '';
      reasoning += d.reasoning_content ?? '';
      last = c;
    }
    const calls = whole?.tool_calls ?? [];
    const message = { role: 'assistant', content: calls.length && !content ? null : content };
    if (reasoning) message.reasoning_content = reasoning;
    if (calls.length) message.tool_calls = calls;
    const { id, created, model, usage, timings } = last;
    return { id, object: 'chat.completion', created, model, choices: [{ index: 0, message, finish_reason: last.choices[0].finish_reason }], usage, timings };
  }

  async dispose() {
    if (this._disposed) return;
    this._disposed = true;
    try {
      await this._rpc.call('dispose');
    } finally {
      await this._worker.terminate();
      this._rpc.fail(new SuperinferError('disposed', 'the engine was disposed'));
    }
  }

  _call(type, body) {
    if (this._disposed) return Promise.reject(new SuperinferError('disposed', 'the engine was disposed'));
    return this._rpc.call(type, body);
  }

  _stream(object, body, options, onEnd) {
    try {
      return this._streamChecked(object, body, options, onEnd);
    } catch (e) {
      // bad options reject on iteration, like every other error
      return { async *[Symbol.asyncIterator]() { throw e; } };
    }
  }

  _streamChecked(object, body, options, onEnd) {
    const {
      signal, maxTokens, max_tokens, stop, ignoreEos, responseFormat, response_format, grammar,
      tools, toolChoice, tool_choice, parallelToolCalls, parallel_tool_calls, reasoningFormat, reasoning_format,
      ...sampling
    } = options;
    // checked field by field in the engine, as the server checks them (a wrong type is refused)
    const request = {
      ...body, ...snake(sampling), max_tokens: maxTokens ?? max_tokens ?? null, stop: stop ?? null, ignore_eos: ignoreEos ?? null,
      response_format: responseFormat ?? response_format ?? null, grammar: grammar ?? null, tools: tools ?? null,
      tool_choice: toolChoice ?? tool_choice ?? null, parallel_tool_calls: parallelToolCalls ?? parallel_tool_calls ?? null,
      reasoning_format: reasoningFormat ?? reasoning_format ?? null,
    };
    if (request.seed === undefined) request.seed = Math.floor(Math.random() * 2 ** 32);
    const engine = this;
    const id = `${object === 'text_completion' ? 'cmpl' : 'chatcmpl'}-${Date.now().toString(36)}${(counter++).toString(36)}`;
    const created = Math.floor(Date.now() / 1000);
    const model = this._info.name ?? this._info.architecture;
    const chat = object !== 'text_completion';
    const wrap = (choice, extra = {}) => ({ id, object, created, model, choices: [{ index: 0, ...choice }], ...extra });
    return {
      async *[Symbol.asyncIterator]() {
        const queue = [];
        let wake = null;
        let end = null;
        const stopper = new AbortController();
        const onAbort = () => stopper.abort();
        signal?.addEventListener('abort', onAbort, { once: true });
        if (signal?.aborted) stopper.abort();
        const done = engine._disposed
          ? Promise.reject(new SuperinferError('disposed', 'the engine was disposed'))
          : engine._rpc.call('generate', { request }, {
            signal: stopper.signal,
            onChunk: (c) => { queue.push(c); wake?.(); },
          });
        done.then((r) => { end = { r }; wake?.(); }, (e) => { end = { e }; wake?.(); });
        let first = true;
        try {
          for (;;) {
            while (queue.length) {
              const c = queue.shift();
              const tokenIds = c.ids ?? (c.id === null ? [] : [c.id]);
              if (chat) {
                // as the server streams a piece: its reasoning, its content, then its calls;
                // the token ids go with the first
                for (const [i, delta] of chatDeltas(c).entries()) {
                  yield wrap({ delta: first ? { role: 'assistant', ...delta } : delta, token_ids: i ? [] : tokenIds, finish_reason: null });
                  first = false;
                }
              } else {
                yield wrap({ text: c.text, token_ids: tokenIds, logprobs: null, finish_reason: null });
              }
            }
            if (end) break;
            await new Promise((r) => { wake = r; });
            wake = null;
          }
          if (end.e) throw end.e;
          onEnd?.(end.r);
          const { finish_reason, usage, timings } = end.r;
          yield wrap(chat ? { delta: {}, finish_reason } : { text: '', finish_reason }, { usage, timings });
        } finally {
          signal?.removeEventListener('abort', onAbort);
          // a consumer that stops iterating early stops the generation too
          if (!end) stopper.abort();
        }
      },
    };
  }
}

/**
 * The deltas of a piece of a chat answer: `reasoning_content`, `content`, `tool_calls`, each
 * in a delta of its own when present (a piece that adds nothing visible still gives one
 * `content` delta, for its token ids).
 */
function chatDeltas(c) {
  const out = [];
  if (c.reasoning) out.push({ reasoning_content: c.reasoning });
  const calls = c.tool_calls ?? [];
  const content = c.content ?? c.text;
  if (content || (!out.length && !calls.length)) out.push({ content });
  if (calls.length) out.push({ tool_calls: calls });
  return out;
}

const SAMPLING = {
  temperature: 'temperature', topK: 'top_k', topP: 'top_p', minP: 'min_p', repeatPenalty: 'repeat_penalty',
  repeatLastN: 'repeat_last_n', frequencyPenalty: 'frequency_penalty', presencePenalty: 'presence_penalty', seed: 'seed',
};

function snake(o) {
  const out = {};
  for (const [k, v] of Object.entries(o)) {
    if (v === undefined) continue;
    const key = SAMPLING[k] ?? (Object.values(SAMPLING).includes(k) ? k : null);
    if (!key) throw new SuperinferError('invalid_argument', `unknown option ${k}`);
    out[key] = v;
  }
  return out;
}
