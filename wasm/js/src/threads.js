// The threaded build's helper threads (wasm/src/threads.rs has the Rust side): the engine's
// worker starts them, each a worker running this package's worker.js, instantiating the same
// module over the same shared memory. A helper runs no wasm code before it has its own stack
// (the exported `__stack_pointer`) and thread-local storage (`__wasm_init_tls`), both
// allocated for it by the engine (`si_thread_prepare`); then it enters `si_worker_loop` and
// stays there until `si_threads_stop`.

import { spawnWorker } from './spawn.js';
import { engineImports } from './wasm.js';

/** How long the engine waits for its helpers to start before it goes on with those that did. */
const START_TIMEOUT_MS = 20_000;
/** Helpers at most (wasm/src/threads.rs MAX_HELPERS). */
export const MAX_HELPERS = 63;

/**
 * Starts `count` helpers for `core` (a threaded WasmCore); resolves with the helpers once
 * all have entered their loop, or the time is up (then with those that did).
 * @returns {Promise<{worker: object, index: number, ready: boolean}[]>}
 */
export async function startHelpers(core, count) {
  const e = core.exports;
  const tlsSize = e.__tls_size.value;
  const tlsAlign = e.__tls_align.value;
  const helpers = [];
  const started = [];
  for (let index = 1; index <= Math.min(count, MAX_HELPERS); index++) {
    const stackTop = e.si_thread_prepare(tlsSize, tlsAlign);
    if (!stackTop) break;
    let worker;
    try {
      worker = await spawnWorker();
    } catch {
      break;
    }
    const h = { worker, index, ready: false, trap: null };
    started.push(new Promise((resolve) => {
      worker.onMessage((m) => {
        if (m.type === 'ready') { h.ready = true; resolve(); }
        if (m.type === 'trapped') { h.trap = m.message; resolve(); }
      });
      worker.onError(() => resolve());
    }));
    try {
      worker.post({ type: 'thread', module: core.module, memory: core.memory, index, stackTop });
    } catch {
      worker.terminate();
      break;
    }
    helpers.push(h);
  }
  let timer;
  await Promise.race([Promise.all(started), new Promise((r) => { timer = setTimeout(r, START_TIMEOUT_MS); })]);
  clearTimeout(timer);
  return helpers;
}

/** Ends the helpers' loops and their workers. */
export function stopHelpers(core, helpers) {
  core?.exports.si_threads_stop?.();
  for (const h of helpers) h.worker.terminate();
  helpers.length = 0;
}

/** A helper's side: set up the stack and TLS, tell the engine, then serve jobs until stopped. */
export async function runHelper({ module, memory, index, stackTop }, post) {
  const imports = engineImports();
  imports.env.memory = memory;
  const instance = await WebAssembly.instantiate(module, imports);
  const e = instance.exports;
  e.__stack_pointer.value = stackTop;
  e.__wasm_init_tls(stackTop);
  post({ type: 'ready', index });
  try {
    e.si_worker_loop(index);
  } catch (err) {
    // a trap (a bug); the engine's next parallel step fails instead of waiting for this one
    e.si_worker_trapped(index);
    post({ type: 'trapped', index, message: String(err?.message ?? err) });
  }
}
