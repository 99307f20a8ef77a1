// The glue between JavaScript and the engine's C ABI (wasm/src/abi.rs): strings and JSON
// pass through linear memory; a call that returns -1 leaves {code, message} as its result.

import { SuperinferError } from './errors.js';
import { VARIANTS } from './variants.js';

const isNode = typeof process !== 'undefined' && !!process.versions?.node;
const encoder = new TextEncoder();
const decoder = new TextDecoder();
/** wasm32's 4 GiB, in 64 KiB pages: the threaded build's shared memory may grow that far. */
const MAX_PAGES = 65536;

/**
 * The engine builds to try, best first: the threaded one when more than one thread is
 * wanted and shared memory is allowed here (Node, or a cross-origin isolated page, and a
 * worker that can start workers), relaxed-SIMD ones where the engine validates a relaxed-SIMD
 * instruction; the single-thread build last, always. `wasmUrl`: one file (used for
 * everything), or URLs by file name (the others next to this module).
 * @returns {{name: string, file: string, threads: boolean, relaxedSimd: boolean, url: URL}[]}
 */
export function candidates({ threads = 1, wasmUrl } = {}) {
  if (wasmUrl && typeof wasmUrl !== 'object') return [{ name: 'custom', file: String(wasmUrl), threads: false, relaxedSimd: false, url: new URL(wasmUrl) }];
  if (wasmUrl instanceof URL) return [{ name: 'custom', file: String(wasmUrl), threads: false, relaxedSimd: false, url: wasmUrl }];
  const threaded = threads > 1 && canShareMemory() && (isNode || typeof Worker === 'function');
  const relaxed = relaxedSimdSupported();
  const score = (v) => (v.threads ? 2 : 0) + (v.relaxedSimd ? 1 : 0);
  return VARIANTS
    .filter((v) => (threaded || !v.threads) && (relaxed || !v.relaxedSimd))
    .sort((a, b) => score(b) - score(a))
    .map((v) => ({ ...v, url: wasmUrl?.[v.file] ? new URL(wasmUrl[v.file]) : new URL(v.file, import.meta.url) }));
}

/** Shared wasm memory can be made here (browsers allow it on cross-origin isolated pages). */
export function canShareMemory() {
  if (typeof SharedArrayBuffer === 'undefined') return false;
  if (!isNode && globalThis.crossOriginIsolated !== true) return false;
  try {
    return new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true }).buffer instanceof SharedArrayBuffer;
  } catch {
    return false;
  }
}

// (module (func (result v128) v128.const i32x4 0 0 0 0 i32x4.relaxed_trunc_f32x4_s))
const RELAXED_SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0,
  10, 25, 1, 23, 0, 253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 253, 129, 2, 11]);

/** The engine here accepts relaxed-SIMD instructions. */
export function relaxedSimdSupported() {
  try {
    return WebAssembly.validate(RELAXED_SIMD_PROBE);
  } catch {
    return false;
  }
}

/**
 * What the engine imports besides a threaded build's memory: `env.now`, the clock of the
 * grammar engine (llguidance through the `instant` crate: milliseconds, only differences
 * count).
 */
export function engineImports() {
  return { env: { now: () => performance.now() } };
}

/** The initial pages of the memory a module imports (from its import section), or null. */
export function importedMemoryPages(bytes) {
  const b = new Uint8Array(bytes);
  let at = 8;
  const leb = () => {
    let v = 0;
    for (let shift = 0; at < b.length; shift += 7) {
      const x = b[at++];
      v += (x & 0x7f) * 2 ** shift;
      if (!(x & 0x80)) return v;
    }
    return null;
  };
  const skipName = () => { const n = leb(); at += n; };
  const skipLimits = () => { const flags = b[at++]; leb(); if (flags & 1) leb(); };
  while (at < b.length) {
    const id = b[at++];
    const size = leb();
    if (id !== 2) { at += size; continue; }
    for (let n = leb(); n > 0; n--) {
      skipName();
      skipName();
      const kind = b[at++];
      if (kind === 0) leb(); // function: type index
      else if (kind === 1) { at++; skipLimits(); } // table: reference type, limits
      else if (kind === 3) at += 2; // global: value type, mutability
      else if (kind === 2) { at++; return leb(); } // memory: flags, initial pages
      else return null;
    }
    return null;
  }
  return null;
}

export class WasmCore {
  /**
   * @param {WebAssembly.Module} module
   * @param {WebAssembly.Instance} instance
   * @param {WebAssembly.Memory} memory
   */
  constructor(module, instance, memory) {
    this.module = module;
    this.exports = instance.exports;
    this.memory = memory;
    /** The threaded build: the memory is shared, helpers may join. */
    this.threaded = typeof SharedArrayBuffer !== 'undefined' && memory.buffer instanceof SharedArrayBuffer;
  }

  /** Compiles and instantiates the module at `url` (a threaded build gets a new shared memory). */
  static async create(url = new URL('./superinfer.wasm', import.meta.url)) {
    let bytes;
    if (isNode && String(url).startsWith('file:')) {
      const { readFile } = await import('node:fs/promises');
      bytes = await readFile(new URL(url));
    } else {
      const response = await fetch(url);
      if (!response.ok) {
        throw new SuperinferError('network', `could not fetch the engine's wasm at ${url}: HTTP ${response.status}`);
      }
      bytes = await response.arrayBuffer();
    }
    const module = await WebAssembly.compile(bytes);
    const imported = WebAssembly.Module.imports(module).find((i) => i.kind === 'memory');
    if (!imported) {
      const instance = await WebAssembly.instantiate(module, engineImports());
      return new WasmCore(module, instance, instance.exports.memory);
    }
    // the threaded build imports its memory: one shared memory for the engine and its helpers
    const initial = importedMemoryPages(bytes);
    if (!initial) throw new SuperinferError('internal', `cannot read the memory import of ${url}`);
    const memory = new WebAssembly.Memory({ initial, maximum: MAX_PAGES, shared: true });
    const imports = engineImports();
    imports[imported.module] = { ...imports[imported.module], [imported.name]: memory };
    const instance = await WebAssembly.instantiate(module, imports);
    return new WasmCore(module, instance, memory);
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

  /** Allocates the model buffer for parts of these sizes; returns its address. */
  modelAlloc(sizes) {
    // an address may pass 2 GiB: wasm's i32 comes out signed
    const ptr = this.withInput(sizes, (p, n) => this.exports.si_model_alloc_parts(p, n)) >>> 0;
    if (!ptr) throw SuperinferError.from(JSON.parse(this.resultText()));
    return ptr;
  }

  /** Where part `i` goes in the model buffer (an offset from its address); parts in order. */
  modelPlace(i) {
    const at = this.exports.si_model_place(i);
    if (at < 0) throw SuperinferError.from(JSON.parse(this.resultText()));
    return at;
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

  /** {id, ids, text, finish, generated} */
  next() {
    this.check(this.exports.si_next());
    return JSON.parse(this.resultText());
  }

  /** Ends the answer: what the reader held back, the whole answer's calls, its finish reason. */
  end() {
    this.check(this.exports.si_end());
    return JSON.parse(this.resultText());
  }
}
