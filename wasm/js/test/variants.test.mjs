// The relaxed-SIMD builds: the loader picks superinfer-relaxed(-threads) exactly where the
// engine validates a relaxed-SIMD instruction, and the plain simd128 build of the same
// threading elsewhere (Node 20 validates relaxed SIMD only with
// --experimental-wasm-relaxed-simd: both cases run here, one in a child Node with the V8
// flag flipped). The engine reports its own build (info().relaxed_simd). The relaxed kernels
// compute the plain build's integer sums (relaxed.rs), and the flash tile's relaxed_madd
// rounds once where the engine fuses it (V8 on x86 with FMA), so there the greedy tokens must
// be exactly the plain build's; where it does not fuse they must still agree with native
// `superinfer run` as the fixture rule allows.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { load } from 'superinfer';
import { env, fixture, nativeRun, divergence, MODELS, RELAXED_SIMD, expectedBuild } from './helpers.mjs';

const CHILD = fileURLToPath(new URL('./variant-run.mjs', import.meta.url));

/**
 * Runs variant-run.mjs in a Node with relaxed SIMD on or off: this one's wasm flags, and the
 * V8 flag that flips it when this one differs.
 */
function child(relaxed, request) {
  const flags = process.execArgv.filter((a) => /^--(no-)?experimental-wasm-/.test(a));
  if (relaxed !== RELAXED_SIMD) flags.push(relaxed ? '--experimental-wasm-relaxed-simd' : '--no-experimental-wasm-relaxed-simd');
  const out = execFileSync(process.execPath, [...flags, CHILD, JSON.stringify(request)], {
    encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 16 << 20, env: process.env,
  });
  return JSON.parse(out.trim().split('\n').at(-1));
}

test('this Node: the loader picks the build its relaxed-SIMD support allows', async () => {
  console.log(`relaxed SIMD validates here: ${RELAXED_SIMD} (Node ${process.versions.node})`);
  for (const threads of [1, 2]) {
    const engine = await load(env('SUPERINFER_GEMMA'), { nCtx: 128, threads });
    try {
      const info = engine.info();
      assert.equal(info.build, expectedBuild(threads > 1), `${threads} threads`);
      assert.equal(info.relaxed_simd, RELAXED_SIMD, 'the engine reports its own build');
      assert.equal(info.threads, threads);
    } finally {
      await engine.dispose();
    }
  }
});

test('relaxed SIMD on and off: each picks its builds, and the greedy tokens are the same', { timeout: 900_000 }, () => {
  const request = { models: Object.keys(MODELS), threads: [1, 2] };
  const on = child(true, request);
  const off = child(false, request);
  assert.equal(on.validates, true, 'the V8 flag turned relaxed SIMD on');
  assert.equal(off.validates, false, 'the V8 flag turned relaxed SIMD off');
  for (const [side, relaxed] of [[on, true], [off, false]]) {
    for (const r of side.runs) {
      assert.equal(r.build, expectedBuild(r.threads > 1, relaxed), `${r.model} at ${r.threads} threads, relaxed SIMD ${relaxed}`);
      assert.equal(r.relaxed_simd, relaxed);
      assert.equal(r.threads_used, r.threads);
    }
  }
  console.log(`relaxed_madd fuses in this engine: ${on.fuses}`);
  for (const [i, a] of on.runs.entries()) {
    const b = off.runs[i];
    assert.equal(`${a.model}/${a.threads}`, `${b.model}/${b.threads}`);
    const fcases = fixture(a.model, 'generate.json');
    for (const [j, ca] of a.cases.entries()) {
      const cb = b.cases[j];
      const ids = (c) => c.tokens.map((t) => t.id);
      if (on.fuses) {
        assert.deepEqual(ids(ca), ids(cb), `${a.model} at ${a.threads} threads: ${JSON.stringify(ca.prompt)}`);
      } else {
        const why = divergence(nativeRun(env(MODELS[a.model].env), ca.prompt, fcases[j].generated_ids.length), ca.tokens, fcases[j]);
        assert.equal(why, null, `${a.model}: ${why}`);
      }
      console.log(`${a.model} ${a.threads}t ${JSON.stringify(ca.prompt.slice(0, 24))}: ${ca.tokens.length} tokens${on.fuses ? ' identical' : ''}; decode ${cb.decode.toFixed(1)} (${b.build}) -> ${ca.decode.toFixed(1)} t/s (${a.build})`);
    }
  }
});

test('a .wasm file given as wasmUrl runs whatever the page allows, and reports its own build', async () => {
  const files = [['superinfer.wasm', false], ...(RELAXED_SIMD ? [['superinfer-relaxed.wasm', true]] : [])];
  for (const [file, relaxed] of files) {
    const engine = await load(env('SUPERINFER_GEMMA'), { nCtx: 128, threads: 2, wasmUrl: import.meta.resolve(`superinfer/${file}`) });
    try {
      assert.equal(engine.info().build, 'custom');
      assert.equal(engine.info().threads, 1, 'one file given: used for everything, one thread');
      assert.equal(engine.info().relaxed_simd, relaxed, file);
    } finally {
      await engine.dispose();
    }
  }
});
