// One measurement per call of window.runBench({engine, model, threads, prompt, nGen}):
// load the model, one short warm-up completion, then the prompt and nGen greedy tokens
// (end of generation ignored), as prompt and decode tokens/s from the engine's own timings.
import { load } from '/pkg/index.js';
import { Wllama } from '/wllama/esm/index.js';

const WARMUP = { prompt: 'Hello', tokens: 8 };

async function superinfer({ model, threads, prompt, nGen }) {
  const t0 = performance.now();
  const e = await load(model, { nCtx: 512, cache: false, threads });
  const loadMs = performance.now() - t0;
  const run = async (p, n) => {
    let last;
    for await (const c of e.complete(p, { temperature: 0, maxTokens: n, ignoreEos: true })) last = c;
    return last.timings;
  };
  await run(WARMUP.prompt, WARMUP.tokens);
  const t = await run(prompt, nGen);
  const { wasmBytes } = await e.memory();
  const info = e.info();
  await e.dispose();
  return { threads: info.threads, build: info.build, loadMs, promptN: t.prompt_n, promptTps: t.prompt_per_second, genN: t.predicted_n, genTps: t.predicted_per_second, wasmBytes, fileSize: info.file_size, kvBytes: info.kv_cache_bytes };
}

async function wllama({ model, threads, prompt, nGen }) {
  const t0 = performance.now();
  const w = new Wllama({ default: '/wllama/esm/wasm/wllama.wasm' }, { logger: { debug() {}, log() {}, warn: console.warn, error: console.error } });
  if (w.setCompat) w.setCompat(null); // never fetch a compat build from a CDN
  const blob = await (await fetch(model)).blob();
  await w.loadModel([blob], { n_gpu_layers: 0, n_threads: threads, n_ctx: 512 });
  const loadMs = performance.now() - t0;
  const run = (p, n) => w.createCompletion({ prompt: p, max_tokens: n, temperature: 0, ignore_eos: true, cache_prompt: false });
  await run(WARMUP.prompt, WARMUP.tokens);
  const out = await run(prompt, nGen);
  const t = out.timings;
  await w.exit();
  return { threads, loadMs, promptN: t.prompt_n, promptTps: t.prompt_per_second, genN: t.predicted_n, genTps: t.predicted_per_second };
}

window.runBench = async (args) => {
  const r = await (args.engine === 'superinfer' ? superinfer(args) : wllama(args));
  document.getElementById('out').textContent += `\n${JSON.stringify({ ...args, prompt: undefined, ...r })}`;
  return r;
};
window.benchReady = true;
