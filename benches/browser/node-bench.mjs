#!/usr/bin/env node
// The npm package's prompt and decode speed under Node (no browser): for each model, a
// warm-up completion, then `-r` runs of run.mjs's prompt (about 128 tokens, each run's made
// distinct at its start so no cached prefix is reused) and 128 greedy tokens with the end of
// generation ignored; prints every run's rates (the engine's own timings) and the medians.
// Packages are given as directories holding index.js (wasm/pkg, or a copy of one): with
// several, runs alternate between them, for before / after comparisons on a busy machine.
//
//   node benches/browser/node-bench.mjs --pkg wasm/pkg [--pkg /tmp/old/pkg] MODEL.gguf... [-r 5]
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const pkgs = [];
for (let i; (i = args.indexOf('--pkg')) >= 0;) pkgs.push(resolve(args.splice(i, 2)[1]));
const ri = args.indexOf('-r');
const reps = ri >= 0 ? Number(args.splice(ri, 2)[1]) : 5;
const models = args.map((m) => resolve(m));
if (!pkgs.length || !models.length) {
  console.error('usage: node benches/browser/node-bench.mjs --pkg DIR [--pkg DIR] MODEL.gguf... [-r 5]');
  process.exit(2);
}
const N_GEN = 128;
const PROMPT = 'The history of the lighthouse begins in the ancient world, when fires were lit on hilltops to guide ships home. '
  .repeat(6) + 'Over the centuries the keepers of these lights became figures of legend, and their stories were told in every harbour town.';
const WORDS = ['Once', 'Long ago', 'Today', 'In short', 'Briefly', 'Again', 'Listen', 'So', 'Now', 'Then', 'Well', 'Here'];

const median = (v) => { const s = [...v].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };

for (const model of models) {
  const engines = [];
  for (const pkg of pkgs) {
    const { load } = await import(pathToFileURL(`${pkg}/index.js`).href);
    const e = await load(model, { nCtx: 512, threads: 1 });
    const run = async (p, n) => {
      let last;
      for await (const c of e.complete(p, { temperature: 0, maxTokens: n, ignoreEos: true })) last = c;
      return last.timings;
    };
    await run('Hello', 8);
    engines.push({ pkg, e, run, prompt: [], decode: [], promptN: 0 });
  }
  for (let r = 0; r < reps; r++) {
    for (const x of engines) {
      const t = await x.run(`${WORDS[r % WORDS.length]} ${r}: ${PROMPT}`, N_GEN);
      x.prompt.push(t.prompt_per_second);
      x.decode.push(t.predicted_per_second);
      x.promptN = t.prompt_n;
      console.log(`${model.split('/').pop()} ${x.pkg} run ${r + 1}: prompt ${t.prompt_per_second.toFixed(1)} t/s (${t.prompt_n} tok), decode ${t.predicted_per_second.toFixed(2)} t/s (${t.predicted_n} tok)`);
    }
  }
  for (const x of engines) {
    console.log(`== ${model.split('/').pop()} ${x.pkg} (isa ${x.e.info().isa}${x.e.info().build ? `, build ${x.e.info().build}` : ""}): median of ${reps}: prompt ${median(x.prompt).toFixed(1)} t/s (${x.promptN} tok), decode ${median(x.decode).toFixed(2)} t/s`);
    await x.e.dispose();
  }
}
process.exit(0);
