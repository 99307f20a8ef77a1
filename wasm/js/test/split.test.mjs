// Split models: Gemma-3-270M cut into shards by native `superinfer gguf-split` (byte for byte
// what llama.cpp's llama-gguf-split writes) loads from the array of its shards, as paths and
// as URLs, and from its first shard's name alone, with the unsplit file's greedy tokens; one
// file cut into byte ranges still loads; shards missing or out of order are refused from
// the first header that shows it.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readdirSync, rmSync, statSync, symlinkSync, createReadStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, basename } from 'node:path';
import { load, shardNames, SuperinferError } from 'superinfer';
import { env, collect } from './helpers.mjs';

const PROMPT = 'The history of the lighthouse begins';
const OPTS = { nCtx: 128, threads: 1 };

let dir;
let shards;
let server;
let base;
let want;

async function greedy(source) {
  const engine = await load(source, OPTS);
  try {
    const { tokens } = await collect(engine.complete(PROMPT, { temperature: 0, maxTokens: 12 }));
    return { info: engine.info(), ids: tokens.map((t) => t.id) };
  } finally {
    await engine.dispose();
  }
}

before(async () => {
  const gemma = env('SUPERINFER_GEMMA');
  dir = mkdtempSync(join(tmpdir(), 'superinfer-split-'));
  const out = execFileSync(env('SUPERINFER_BIN'), ['gguf-split', '--split-max-size', '100M', gemma, join(dir, 'gemma')], { encoding: 'utf8' });
  shards = readdirSync(dir).filter((f) => f.endsWith('.gguf')).sort().map((f) => join(dir, f));
  assert.ok(shards.length >= 3, out);
  assert.equal(basename(shards[0]), `gemma-00001-of-${String(shards.length).padStart(5, '0')}.gguf`);
  // the shards over HTTP, and the whole file in two byte ranges
  const size = statSync(gemma).size;
  const half = Math.floor(size / 2) + 3;
  server = createServer((req, res) => {
    const name = req.url.slice(1);
    let file = shards.find((s) => basename(s) === name);
    let range = {};
    if (name === 'range-0') { file = gemma; range = { start: 0, end: half - 1 }; }
    if (name === 'range-1') { file = gemma; range = { start: half }; }
    if (!file) return res.writeHead(404).end();
    const length = (range.end ?? statSync(file).size - 1) - (range.start ?? 0) + 1;
    res.writeHead(200, { 'content-length': length });
    createReadStream(file, range).pipe(res);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}`;
  want = await greedy(gemma);
  assert.equal(want.ids.length, 12);
  assert.equal(want.info.shards, 1);
});

after(() => {
  server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('the shards of a split model give the whole file\'s greedy tokens', async () => {
  const total = shards.reduce((s, f) => s + statSync(f).size, 0);
  const fromPaths = await greedy(shards);
  assert.equal(fromPaths.info.shards, shards.length);
  assert.equal(fromPaths.info.file_size, total);
  assert.deepEqual(fromPaths.ids, want.ids);
  const fromUrls = await greedy(shards.map((s) => `${base}/${basename(s)}`));
  assert.equal(fromUrls.info.shards, shards.length);
  assert.deepEqual(fromUrls.ids, want.ids);
  // the first shard's name alone brings the others, as llama.cpp finds them
  assert.deepEqual(shardNames(shards[0]), shards);
  assert.equal(shardNames(shards[1]), null);
  const fromFirst = await greedy(`${base}/${basename(shards[0])}`);
  assert.equal(fromFirst.info.shards, shards.length);
  assert.deepEqual(fromFirst.ids, want.ids);
  assert.deepEqual((await greedy(shards[0])).ids, want.ids);
  // one copy of the weights: the memory is the model, the KV cache and a little more
  const slack = fromUrls.info.wasm_bytes - total - fromUrls.info.kv_cache_bytes;
  assert.ok(slack <= 64 << 20, `wasm memory exceeds the shards + KV cache by ${slack} bytes`);
  console.log(`${shards.length} shards, ${total} bytes: the whole file's ${want.ids.length} greedy tokens; wasm memory ${fromUrls.info.wasm_bytes}`);
});

test('one file cut into byte ranges still loads', async () => {
  const r = await greedy([`${base}/range-0`, `${base}/range-1`]);
  assert.equal(r.info.shards, 1);
  assert.deepEqual(r.ids, want.ids);
});

async function refused(source, re, code = 'invalid_argument') {
  const err = await load(source, OPTS).then((e) => { e.dispose(); return null; }, (e) => e);
  assert.ok(err instanceof SuperinferError, `expected a SuperinferError, got ${err}`);
  assert.equal(err.code, code, err.message);
  assert.match(err.message, re);
}

test('shards missing or out of order are refused', async () => {
  const n = shards.length;
  // the first shard under another name: alone
  const lone = join(dir, 'lone.gguf');
  symlinkSync(shards[0], lone);
  await refused(lone, new RegExp(`split into ${n} shards .* 1 part was given`));
  // by name, with the last shard missing: the missing file is named
  const some = join(dir, 'some');
  mkdirSync(some);
  for (const s of shards.slice(0, -1)) symlinkSync(s, join(some, basename(s)));
  await refused(join(some, basename(shards[0])), new RegExp(`${basename(shards.at(-1))}`), 'network');
  await refused(`${base}/${basename(shards[0]).replace('gemma', 'nothing')}`, /404/, 'network');
  await refused(shards.slice(0, -1), new RegExp(`split into ${n} shards .* ${n - 1} parts were given`));
  await refused([shards[1], shards[0], ...shards.slice(2)], new RegExp(`the first part is shard 2 of ${n}`));
  await refused([shards[0], shards[2], shards[1], ...shards.slice(3)], new RegExp(`part 2 is shard 3 of ${n}`));
  await refused([env('SUPERINFER_GEMMA'), shards[1]], /part 2 is a GGUF file of its own/);
});
