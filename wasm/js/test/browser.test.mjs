// Headless Chromium on the demo page (wasm/demo): a model loads with a progress bar,
// a reply streams, the Stop button ends it, a screenshot is saved; a reload takes the model
// from the Cache API; and the page reports whether it is cross-origin isolated (COOP/COEP
// set by serve.mjs) and the threads the engine uses: served with COOP/COEP, the threaded
// build on the cores (2 here); without them, the single-thread build, even when 2 are asked;
// local Files load, the shards of a split model too (several Files, picked in any order).
// Env: SUPERINFER_DEMO (wasm/demo), SUPERINFER_PKG (the installed package), SUPERINFER_GEMMA,
// SUPERINFER_BIN (native superinfer, for gguf-split), SUPERINFER_SCREENSHOT (where to save
// it), CHROMIUM (default /usr/bin/chromium).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, basename } from 'node:path';
import { chromium } from 'playwright-core';
import { env, relaxedMaddFuses, MADD_PROBE } from './helpers.mjs';

const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const servers = [];
const dirs = [];

async function serve(extra = []) {
  const p = spawn(process.execPath, [join(env('SUPERINFER_DEMO'), 'serve.mjs'), '--port', '0', '--pkg', env('SUPERINFER_PKG'),
    '--model', env('SUPERINFER_GEMMA'), ...extra], { stdio: ['ignore', 'pipe', 'inherit'] });
  servers.push(p);
  const line = await new Promise((resolve, reject) => {
    p.stdout.on('data', (d) => { const m = /http:\/\/127\.0\.0\.1:(\d+)\//.exec(String(d)); if (m) resolve(m[0]); });
    p.on('exit', (c) => reject(new Error(`serve.mjs exited with ${c}`)));
  });
  return line;
}

async function browser() {
  const dir = mkdtempSync(join(tmpdir(), 'superinfer-chromium-'));
  dirs.push(dir);
  const ctx = await chromium.launchPersistentContext(dir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: FLAGS,
    viewport: { width: 900, height: 900 },
  });
  return ctx;
}

async function openDemo(ctx, origin, query = '') {
  const page = ctx.pages()[0] ?? await ctx.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${origin}?model=${encodeURIComponent(`/models/${basename(env('SUPERINFER_GEMMA'))}`)}${query}`);
  return { page, errors };
}

async function loadModel(page, file) {
  // a previous load's "Ready" must not end the wait for this one before the page starts it
  await page.evaluate(() => { delete document.body.dataset.status; });
  if (file) await page.setInputFiles('#file', file);
  else await page.click('#load');
  await page.waitForFunction(() => ['Ready', 'error'].includes(document.body.dataset.status), null, { timeout: 180_000 });
  const status = await page.textContent('#status');
  assert.equal(await page.evaluate(() => document.body.dataset.status), 'Ready', status);
  return { status, info: await page.evaluate(() => window.superinferInfo) };
}

let ctx;
after(async () => {
  await ctx?.close();
  for (const s of servers) s.kill();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

let isolated;
test('the demo loads a model, streams a reply, stops on the button, and caches the model', { timeout: 600_000 }, async () => {
  const origin = await serve();
  isolated = origin;
  ctx = await browser();
  const { page, errors } = await openDemo(ctx, origin);
  const { status, info } = await loadModel(page);
  console.log(status);
  assert.equal(await page.evaluate(() => document.querySelector('#progress').value), 1);
  assert.equal(info.cross_origin_isolated, true, 'COOP/COEP make the page cross-origin isolated');
  const cores = await page.evaluate(() => navigator.hardwareConcurrency);
  assert.equal(info.threads, Math.min(8, cores), 'the threaded build on the cores (at most 8)');
  // Chromium has relaxed SIMD (since 114): the loader takes the relaxed builds
  assert.equal(info.relaxed_simd, true, 'the relaxed-SIMD build');
  assert.equal(info.build, cores > 1 ? 'superinfer-relaxed-threads' : 'superinfer-relaxed');
  console.log(`isolated page: ${info.threads} threads (${info.build}), ${cores} cores`);
  assert.equal(info.cached, false);

  await page.fill('#prompt', 'Write a long story about a lighthouse keeper.');
  await page.click('#send');
  // some streamed text, then the Stop button
  await page.waitForFunction(() => (document.querySelector('.assistant')?.textContent.length ?? 0) >= 40, null, { timeout: 120_000 });
  await page.click('#stop');
  await page.waitForFunction(() => document.body.dataset.finish === 'abort' && document.body.dataset.generating === 'no', null, { timeout: 30_000 });
  const reply = await page.textContent('.assistant');
  const stats = await page.textContent('#stats');
  console.log(`reply: ${JSON.stringify(reply.slice(0, 120))}…`);
  console.log(`stats: ${stats}`);
  assert.match(stats, /^abort: prompt \d+ tokens at [\d.]+ t\/s, reply \d+ tokens at [\d.]+ t\/s$/);
  const screenshot = process.env.SUPERINFER_SCREENSHOT || join(tmpdir(), 'superinfer-demo.png');
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(`screenshot: ${screenshot}`);
  // the page still works after the stop: another message gets a reply
  await page.fill('#prompt', 'Thanks!');
  await page.click('#send');
  await page.waitForFunction(() => document.querySelectorAll('.assistant').length === 2 && document.body.dataset.generating === 'no' && document.body.dataset.finish !== 'abort', null, { timeout: 180_000 });

  // a reload takes the model from the Cache API
  await page.reload();
  const again = await loadModel(page);
  assert.equal(again.info.cached, true, again.status);
  assert.deepEqual(errors, []);
});

test('in the browser too, 2 threads give exactly the greedy tokens of 1', { timeout: 300_000 }, async () => {
  const { page, errors } = await openDemo(ctx, isolated);
  const model = `/models/${basename(env('SUPERINFER_GEMMA'))}`;
  const runs = await page.evaluate(async (url) => {
    const { load } = await import('/pkg/index.js');
    const out = [];
    // the package's choice at 2 and 1 threads, then the plain simd128 build, given as the file
    for (const [threads, wasmUrl] of [[2], [1], [1, new URL('/pkg/superinfer.wasm', location.href).href]]) {
      const e = await load(url, { nCtx: 256, threads, wasmUrl });
      const ids = [];
      let last;
      for await (const c of e.complete('The history of the lighthouse begins', { temperature: 0, maxTokens: 32, ignoreEos: true })) {
        ids.push(...(c.choices[0].token_ids ?? []));
        last = c;
      }
      out.push({ threads: e.info().threads, build: e.info().build, relaxed: e.info().relaxed_simd, ids, decode: last.timings.predicted_per_second });
      await e.dispose();
    }
    return out;
  }, model);
  const [two, one, plain] = runs;
  const fuses = await page.evaluate(relaxedMaddFuses, MADD_PROBE);
  console.log(`Chromium: ${two.build} ${two.threads} threads ${two.decode.toFixed(1)} t/s, ${one.build} ${one.threads} thread ${one.decode.toFixed(1)} t/s, plain simd128 (${plain.build}) ${plain.decode.toFixed(1)} t/s, ${two.ids.length} tokens; relaxed_madd fuses: ${fuses}`);
  assert.equal(two.threads, 2);
  assert.equal(one.threads, 1);
  assert.equal(two.ids.length, 32);
  assert.deepEqual(two.ids, one.ids);
  assert.deepEqual([two.relaxed, one.relaxed, plain.relaxed], [true, true, false]);
  // the relaxed kernels' integer sums are the plain build's; the flash tile's relaxed_madd
  // gives the plain tile's bits where it fuses
  if (fuses) assert.deepEqual(one.ids, plain.ids, 'the relaxed build\'s greedy tokens are the plain build\'s');
  assert.deepEqual(errors, []);
});

test('without COOP/COEP the page is not isolated and runs one thread; a local File loads', { timeout: 300_000 }, async () => {
  const origin = await serve(['--no-isolation']);
  const { page, errors } = await openDemo(ctx, origin, '&threads=2');
  const { status, info } = await loadModel(page, env('SUPERINFER_GEMMA'));
  console.log(status);
  assert.equal(info.architecture, 'gemma3');
  assert.equal(info.cross_origin_isolated, false);
  assert.equal(info.threads_requested, 2);
  assert.equal(info.threads, 1, 'no shared memory: the single-thread build');
  assert.equal(info.build, 'superinfer-relaxed');
  // the shards of a split model as local Files (Blobs); the page orders them by name
  const dir = mkdtempSync(join(tmpdir(), 'superinfer-shards-'));
  dirs.push(dir);
  execFileSync(env('SUPERINFER_BIN'), ['gguf-split', '--split-max-size', '100M', env('SUPERINFER_GEMMA'), join(dir, 'gemma')]);
  const shards = readdirSync(dir).sort().reverse().map((f) => join(dir, f));
  const split = await loadModel(page, shards);
  console.log(split.status);
  assert.equal(split.info.shards, shards.length);
  assert.ok(split.info.file_size > info.file_size, 'every shard has a header of its own');
  assert.deepEqual(errors, []);
});
