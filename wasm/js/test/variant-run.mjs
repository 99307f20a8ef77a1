// Run by variants.test.mjs in a Node of its own (with or without relaxed SIMD, by V8 flag):
// loads each model named in argv[2] (JSON: {models, threads}) with the package's choice of
// build, runs the fixture prompts greedily,
// and prints one line of JSON: this engine's relaxed-SIMD validation, whether relaxed_madd
// fuses, and per model and thread count the build and info the engine reports and the tokens.

import { load } from 'superinfer';
import { env, fixture, collect, MODELS, RELAXED_SIMD, relaxedMaddFuses } from './helpers.mjs';

const { models, threads } = JSON.parse(process.argv[2]);
const runs = [];
for (const name of models) {
  for (const t of threads) {
    const engine = await load(env(MODELS[name].env), { nCtx: 512, threads: t });
    try {
      const info = engine.info();
      const cases = [];
      for (const c of fixture(name, 'generate.json')) {
        const { tokens, last } = await collect(engine.complete(c.prompt, { temperature: 0, maxTokens: c.generated_ids.length }));
        cases.push({ prompt: c.prompt, tokens, decode: last.timings.predicted_per_second });
      }
      runs.push({ model: name, threads: t, build: info.build, relaxed_simd: info.relaxed_simd, threads_used: info.threads, cases });
    } finally {
      await engine.dispose();
    }
  }
}
process.stdout.write(`${JSON.stringify({ validates: RELAXED_SIMD, fuses: relaxedMaddFuses(), runs })}\n`);
