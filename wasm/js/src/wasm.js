// The glue between JavaScript and the engine's C ABI (wasm/src/abi.rs): strings and JSON
// pass through linear memory; a call that returns -1 leaves {code, message} as its result.

import { SuperinferError } from './errors.js';

const isNode = typeof process !== 'undefined' && !!process.versions?.node;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class WasmCore {
  /** @param {WebAssembly.Instance} instance */
  constructor(instance) {
    this.exports = instance.exports;
    this.memory = /** @type {WebAssembly.Memory} */ (instance.exports.memory);
  }

  /** Compiles and instantiates the module next to this file (or at `url`). */
  static async create(url = new URL('./superinfer.wasm', import.meta.url)) {
    let module;
    if (isNode && String(url).startsWith('file:')) {
      const { readFile } = await import('node:fs/promises');
      module = await WebAssembly.compile(await readFile(new URL(url)));
    } else {
      const response = await fetch(url);
      if (!response.ok) {
        throw new SuperinferError('network', `could not fetch the engine's wasm at ${url}: HTTP ${response.status}`);
      }
      module = WebAssembly.compileStreaming && response.headers.get('content-type') === 'application/wasm'
        ? await WebAssembly.compileStreaming(response)
        : await WebAssembly.compile(await response.arrayBuffer());
    }
    return new WasmCore(await WebAssembly.instantiate(module, {}));
  }

  /** A view of linear memory (made afresh: growing the memory detaches old views). */
  bytes(ptr, len) {
    return new Uint8Array(this.memory.buffer, ptr, len);
  }

  /** The result of the last call, as text. */
  resultText() {
    const e = this.exports;
    const len = e.si_result_len();
    // copy out: TextDecoder refuses views of shared memory
    return decoder.decode(this.bytes(e.si_result_ptr(), len).slice());
  }

  /** Throws the result as a SuperinferError when `r` is negative; else returns `r`. */
  check(r) {
    if (r < 0) throw SuperinferError.from(JSON.parse(this.resultText()));
    return r;
  }

  /** Runs `f(ptr, len)` with `data` (string, object as JSON, or bytes) copied in. */
  withInput(data, f) {
    const bytes = typeof data === 'string' ? encoder.encode(data)
      : data instanceof Uint8Array ? data : encoder.encode(JSON.stringify(data));
    const e = this.exports;
    const ptr = e.si_alloc(bytes.length);
    if (!ptr) throw new SuperinferError('too_large', 'wasm memory is exhausted');
    try {
      this.bytes(ptr, bytes.length).set(bytes);
      return f(ptr, bytes.length);
    } finally {
      e.si_free(ptr, bytes.length);
    }
  }

  checkSize(size) {
    this.check(this.exports.si_check_size(size));
  }

  /** Allocates the model buffer; returns its address. */
  modelAlloc(size) {
    const ptr = this.exports.si_model_alloc(size);
    if (!ptr) throw SuperinferError.from(JSON.parse(this.resultText()));
    return ptr;
  }

  /** null while the header is incomplete, else its summary. */
  probe(loaded, opts) {
    const r = this.check(this.withInput(opts, (p, n) => this.exports.si_model_probe(loaded, p, n)));
    return r === 1 ? JSON.parse(this.resultText()) : null;
  }

  modelLoad(opts) {
    this.check(this.withInput(opts, (p, n) => this.exports.si_model_load(p, n)));
    return JSON.parse(this.resultText());
  }

  modelFree() {
    this.exports.si_model_free();
  }

  tokenize(text, addSpecial, parseSpecial) {
    this.check(this.withInput(text, (p, n) => this.exports.si_tokenize(p, n, addSpecial ? 1 : 0, parseSpecial ? 1 : 0)));
    return JSON.parse(this.resultText());
  }

  detokenize(ids, special) {
    this.check(this.withInput(ids, (p, n) => this.exports.si_detokenize(p, n, special ? 1 : 0)));
    return this.resultText();
  }

  renderChat(messages) {
    this.check(this.withInput(messages, (p, n) => this.exports.si_render_chat(p, n)));
    return this.resultText();
  }

  begin(request) {
    this.check(this.withInput(request, (p, n) => this.exports.si_begin(p, n)));
    return JSON.parse(this.resultText());
  }

  /** Evaluates up to n prompt tokens; returns how many remain. */
  prefill(n) {
    return this.check(this.exports.si_prefill(n));
  }

  /** {id, text, finish} */
  next() {
    this.check(this.exports.si_next());
    return JSON.parse(this.resultText());
  }
}
