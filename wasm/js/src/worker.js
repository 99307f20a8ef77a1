// The worker: owns one wasm instance and one model. Requests run one at a time, in order;
// an `abort` message is handled at once (between two tokens, or two prompt chunks, of the
// running generation: the loop yields to the event loop after each). With the threaded
// build it also starts the helper threads, which are this same file in its other role: a
// worker whose first message is `thread` becomes a helper (threads.js) for good.

import { SuperinferError, serializeError } from './errors.js';
import { WasmCore, candidates } from './wasm.js';
import { openSource } from './source.js';
import { startHelpers, stopHelpers, runHelper } from './threads.js';

const isNode = typeof process !== 'undefined' && !!process.versions?.node && typeof self === 'undefined';
let port;
if (isNode) {
  const { parentPort } = await import('node:worker_threads');
  port = { post: (m) => parentPort.postMessage(m), listen: (f) => parentPort.on('message', f) };
} else {
  port = { post: (m) => self.postMessage(m), listen: (f) => { self.onmessage = (e) => f(e.data); } };
}

/** Prompt tokens evaluated between two looks at the message queue. */
const PREFILL_CHUNK = 64;
const PROGRESS_EVERY = 4 << 20;

let core = null;
let helpers = [];
let broken = null;
const aborted = new Set();
let queue = Promise.resolve();

const yieldNow = isNode
  ? () => new Promise((r) => setImmediate(r))
  : (() => {
      // a macrotask without setTimeout's clamping
      const ch = new MessageChannel();
      const waiting = [];
      ch.port1.onmessage = () => waiting.shift()?.();
      return () => new Promise((r) => { waiting.push(r); ch.port2.postMessage(0); });
    })();

port.listen((msg) => {
  if (msg.type === 'thread') {
    runHelper(msg, port.post).catch((e) => port.post({ type: 'trapped', index: msg.index, message: String(e?.message ?? e) }));
    return;
  }
  if (msg.type === 'abort') {
    aborted.add(msg.target);
    return;
  }
  queue = queue.then(() => handle(msg));
});

async function handle(msg) {
  try {
    if (broken) throw broken;
    const result = await run(msg);
    port.post({ id: msg.id, type: 'result', result });
  } catch (e) {
    const error = serializeError(e);
    if (error.code === 'internal' && e instanceof WebAssembly.RuntimeError) {
      broken = new SuperinferError('internal', error.message);
    }
    port.post({ id: msg.id, type: 'error', error });
  } finally {
    aborted.delete(msg.id);
  }
}

async function run(msg) {
  switch (msg.type) {
    case 'init':
      return init(msg);
    case 'load':
      return load(msg);
    case 'tokenize':
      return core.tokenize(msg.text, msg.addSpecial, msg.parseSpecial);
    case 'detokenize':
      return core.detokenize(msg.ids, msg.special);
    case 'renderChat':
      return core.renderChat(msg.tools ? { messages: msg.messages, tools: msg.tools } : msg.messages);
    case 'generate':
      return generate(msg);
    case 'memory':
      return { wasmBytes: core.memory.buffer.byteLength };
    case 'dispose':
      core?.modelFree();
      stopHelpers(core, helpers);
      core = null;
      return null;
    default:
      throw new SuperinferError('invalid_argument', `unknown request ${msg.type}`);
  }
}

/**
 * Instantiates the best build this environment runs (the threaded one when `threads` > 1 and
 * shared memory is allowed: Node, or a cross-origin isolated page) and starts its helpers.
 */
async function init({ wasmUrl, threads }) {
  let lastError = null;
  for (const c of candidates({ threads, wasmUrl })) {
    try {
      core = await WasmCore.create(c.url);
      core.build = c.name;
      break;
    } catch (e) {
      // e.g. a 4 GiB shared memory refused: the next build (the single-thread one last)
      lastError = e;
    }
  }
  if (!core) throw lastError;
  let inUse = 1;
  if (core.threaded && threads > 1) {
    helpers = await startHelpers(core, threads - 1);
    inUse = 1 + helpers.filter((h) => h.ready).length;
    core.exports.si_threads_set(inUse);
  }
  return { crossOriginIsolated: !!globalThis.crossOriginIsolated, build: core.build, threads: inUse };
}

async function load({ id, source, options }) {
  const opts = { n_ctx: options.nCtx ?? 0, n_batch: options.nBatch ?? 0 };
  const src = await openSource(source, { cache: options.cache !== false });
  const total = src.size;
  const t0 = performance.now();
  try {
    core.checkSize(total);
    // one allocation for every part: one file's byte ranges back to back, or the shards of a
    // split model (gguf-split) each aligned as a file of its own; the first part's header
    // (probed by the time it ends) says which
    const base = core.modelAlloc(src.parts.map((p) => p.size));
    let loaded = 0;
    let header = null;
    let nextProbe = 64 << 10;
    let nextProgress = 0;
    for (const [i, part] of src.parts.entries()) {
      const at = base + core.modelPlace(i);
      const partStart = loaded;
      // probe early in each part: a later shard's header is checked as soon as it is in
      if (i > 0) nextProbe = loaded + (64 << 10);
      for await (const chunk of part.chunks()) {
        if (aborted.has(id)) throw new SuperinferError('invalid_argument', 'the load was cancelled');
        if (loaded - partStart + chunk.length > part.size) {
          throw new SuperinferError('network', `received more bytes than the ${part.size} announced${part.url ? ` (${part.url})` : ''}`);
        }
        core.bytes(at + loaded - partStart, chunk.length).set(chunk);
        loaded += chunk.length;
        if (!header && loaded >= nextProbe) {
          header = core.probe(loaded, opts);
          nextProbe = loaded + Math.max(64 << 10, loaded - partStart);
        }
        if (loaded >= nextProgress || loaded === total) {
          port.post({ id, type: 'progress', loaded, total });
          nextProgress = loaded + PROGRESS_EVERY;
        }
      }
      if (loaded - partStart !== part.size) {
        throw new SuperinferError('truncated', `the download ended after ${loaded - partStart} of ${part.size} bytes${part.url ? ` (${part.url})` : ''}; try again`);
      }
      // before the next part is placed: a whole first part tells byte ranges from shards
      if (!header) header = core.probe(loaded, opts);
    }
    const info = core.modelLoad(opts);
    return { ...info, load_ms: performance.now() - t0, cached: src.cachedParts === src.parts.length && src.parts.length > 0 && !!src.parts[0].cached, wasm_bytes: core.memory.buffer.byteLength };
  } catch (e) {
    src.cancel();
    core.modelFree();
    throw e;
  }
}

async function generate({ id, request }) {
  const post = (chunk) => port.post({ id, type: 'chunk', chunk });
  const t0 = performance.now();
  const begun = core.begin(request);
  let finish = null;
  while (core.prefill(PREFILL_CHUNK) > 0) {
    await yieldNow();
    if (aborted.has(id)) { finish = 'abort'; break; }
  }
  const tPrompt = performance.now();
  let generated = 0;
  while (!finish) {
    const t = core.next();
    generated = t.generated;
    if (t.text || t.ids.length) post(piece(t, t.text, t.id, t.ids));
    if (t.finish) { finish = t.finish; break; }
    await yieldNow();
    if (aborted.has(id)) finish = 'abort';
  }
  // what the answer's reader held back (a marker that might have begun), and its calls
  const last = core.end();
  if (last.reasoning || last.content || last.tool_calls.length) post(piece(last, '', null, []));
  const tEnd = performance.now();
  const promptN = begun.prompt_tokens - begun.cached_tokens;
  const promptMs = tPrompt - t0;
  const decodeMs = tEnd - tPrompt;
  return {
    finish_reason: finish === 'abort' ? finish : (last.finish_reason ?? finish),
    tool_calls: last.calls,
    usage: { prompt_tokens: begun.prompt_tokens, completion_tokens: generated, total_tokens: begun.prompt_tokens + generated },
    timings: {
      cached_n: begun.cached_tokens,
      prompt_n: promptN,
      prompt_ms: promptMs,
      prompt_per_second: promptN > 0 ? (promptN * 1000) / promptMs : 0,
      predicted_n: generated,
      predicted_ms: decodeMs,
      predicted_per_second: generated > 0 ? (generated * 1000) / decodeMs : 0,
    },
  };
}

/**
 * A piece of the answer as the page's side takes it: the tokens' text and ids, and what they
 * added to the reasoning, the content and the tool calls (OpenAI's `delta.tool_calls`
 * entries), read as the server reads an answer.
 */
function piece(t, text, id, ids) {
  return { text, id, ids, reasoning: t.reasoning, content: t.content, tool_calls: t.tool_calls };
}
