// The packed package on mixture-of-experts models: the tiny random models of each MoE
// architecture in tests/fixtures/moe (gpt-oss with MXFP4 experts, attention sinks and YaRN;
// Qwen3-MoE in Q4_K; Qwen2-MoE with its shared expert in Q8_0; Mixtral in Q4_0) load, their
// greedy continuations of the fixture prompts (token ids) follow llama.cpp's up to its
// near-ties, the threaded build gives the single-thread build's tokens exactly, and the wasm
// memory stays within file + KV cache + 64 MiB.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'superinfer';
import { env, collect, TIE } from './helpers.mjs';

const MOE = ['gpt-oss', 'qwen3moe', 'qwen2moe', 'mixtral'];

// Softmax-routed mixtures: a near-tie between two experts' router logits lets a rounding
// difference pick another expert, and the continuation then jumps away from llama.cpp's
// beyond a near-tie of the output. The native test (tests/tests/moe_fixtures.rs) settles
// those with the exact f64 reference, which the package has no way to run; here one such
// case of the five is tolerated (and reported) for these models, none for gpt-oss.
const ROUTER_JUMPS = { 'gpt-oss': 0, qwen3moe: 1, qwen2moe: 1, mixtral: 1 };

/**
 * null when `got` (token ids) is llama.cpp's greedy continuation `c.generated_ids`, or leaves
 * it only at a near-tie (llama.cpp rates our token within TIE of its best there; nothing is
 * compared after that, as in tests/tests/moe_fixtures.rs); else why not. `stopped`: the
 * engine ended at an end-of-generation token, which it does not stream (llama.cpp's list
 * has it last).
 */
function departure(got, c, stopped) {
  const want = c.generated_ids;
  const at = got.findIndex((id, i) => id !== want[i]);
  if (at < 0) {
    if (got.length === want.length || (stopped && got.length === want.length - 1)) return null;
    return `${got.length} tokens generated, llama.cpp ${want.length}`;
  }
  const top = c.positions[c.prompt_ids.length - 1 + at].top;
  const ours = top.find((e) => e[0] === got[at]);
  const behind = ours ? top[0][1] - ours[1] : Infinity;
  if (behind < TIE) return null;
  return `token ${at}: chose ${got[at]}, ${ours ? `${behind.toFixed(4)} behind` : 'not in'} llama.cpp's top (${top[0][0]})`;
}

for (const name of MOE) {
  describe(`moe ${name}`, () => {
    const dir = () => join(env('SUPERINFER_FIXTURES'), 'moe', name);
    const cases = () => JSON.parse(readFileSync(join(dir(), 'generate.json'), 'utf8'));
    let two;
    let one;

    before(async () => {
      two = await load(join(dir(), 'model.gguf'), { nCtx: 512, threads: 2 });
      one = await load(join(dir(), 'model.gguf'), { nCtx: 512, threads: 1 });
    });

    after(async () => {
      await two?.dispose();
      await one?.dispose();
    });

    test('greedy continuations follow llama.cpp; two threads give one thread\'s tokens', async () => {
      let identical = 0;
      const jumps = [];
      const all = cases();
      for (const c of all) {
        const opts = { temperature: 0, maxTokens: c.generated_ids.length };
        const a = await collect(two.complete(c.prompt_ids, opts));
        const b = await collect(one.complete(c.prompt_ids, opts));
        const ids = a.tokens.map((t) => t.id);
        assert.deepEqual(ids, b.tokens.map((t) => t.id), `prompt ${JSON.stringify(c.prompt_ids)}: 2 threads vs 1`);
        assert.equal(a.last.usage.prompt_tokens, c.prompt_ids.length);
        const why = departure(ids, c, a.last.choices[0].finish_reason === 'stop');
        if (why !== null) jumps.push(`prompt ${JSON.stringify(c.prompt_ids)}: ${why}`);
        if (ids.length && ids.every((id, i) => id === c.generated_ids[i])) identical += 1;
      }
      console.log(`${name}: ${identical}/${all.length} greedy continuations identical to llama.cpp's, ${all.length - identical - jumps.length} part at near-ties, ${jumps.length} beyond one${jumps.map((j) => `\n  ${j}`).join('')}`);
      assert.ok(jumps.length <= ROUTER_JUMPS[name], `${name}: ${jumps.length} continuations leave llama.cpp's beyond a near-tie:\n${jumps.join('\n')}`);
      const info = two.info();
      const { wasmBytes } = await two.memory();
      const slack = wasmBytes - info.file_size - info.kv_cache_bytes;
      assert.ok(slack <= 64 << 20, `wasm memory exceeds file + KV cache by ${slack} bytes (> 64 MiB)`);
    });
  });
}
