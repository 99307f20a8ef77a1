// The `threads` option in Node (which always has shared memory, so the threaded build runs
// whenever more than one thread is asked for): the count asked is the count used, more
// threads than cores still give the same tokens, the default is the machine's cores (at
// most 8), and bad counts are refused.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { load, SuperinferError } from 'superinfer';
import { env, collect, expectedBuild } from './helpers.mjs';

const gemma = () => env('SUPERINFER_GEMMA');
const PROMPT = 'The history of the lighthouse begins';

async function run(threads) {
  const engine = await load(gemma(), { nCtx: 128, ...(threads === undefined ? {} : { threads }) });
  try {
    const { tokens } = await collect(engine.complete(PROMPT, { temperature: 0, maxTokens: 16 }));
    return { info: engine.info(), ids: tokens.map((t) => t.id) };
  } finally {
    await engine.dispose();
  }
}

test('the threads asked for are the threads used, with the same greedy tokens', async () => {
  const one = await run(1);
  assert.equal(one.info.threads, 1);
  assert.equal(one.info.build, expectedBuild(false));
  for (const n of [2, 3]) {
    const r = await run(n);
    assert.equal(r.info.threads, n);
    assert.equal(r.info.threads_requested, n);
    assert.equal(r.info.build, expectedBuild(true));
    assert.deepEqual(r.ids, one.ids, `${n} threads`);
  }
});

test('the default is the cores, at most 8', async () => {
  const cores = Math.min(8, availableParallelism());
  const r = await run(undefined);
  assert.equal(r.info.threads, cores);
  assert.equal(r.info.build, expectedBuild(cores > 1));
});

test('bad thread counts are refused', async () => {
  for (const threads of [0, -1, 1.5, 65, '2']) {
    await assert.rejects(load(gemma(), { threads }), (e) => e instanceof SuperinferError && e.code === 'invalid_argument', String(threads));
  }
});
