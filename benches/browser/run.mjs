#!/usr/bin/env node
// superinfer's npm package against @wllama/wllama (pinned in package.json; CPU only:
// n_gpu_layers 0; offline: setCompat(null), the model passed as a Blob) in headless Chromium,
// on the same GGUF files, prompt of about 128 tokens then 128 greedy tokens, engines
// alternated, `-r` repetitions (best kept); beside native `superinfer bench` at the same thread
// count. Prints a table and, with --json, one JSON object.
//
//   npm install --prefix benches/browser        # once
//   wasm/build.sh                               # the package, into wasm/pkg
//   node benches/browser/run.mjs MODEL.gguf... [-t 1,2] [-r 2] [--json]
import { createServer } from 'node:http';
import { createReadStream, statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..');
const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args.splice(i, 2)[1] : dflt; };
const threads = opt('-t', '1,2').split(',').map(Number);
const reps = Number(opt('-r', '2'));
const json = args.includes('--json') ? (args.splice(args.indexOf('--json'), 1), true) : false;
const models = args.map((m) => resolve(m));
if (!models.length) {
  console.error('usage: node benches/browser/run.mjs MODEL.gguf... [-t 1,2] [-r 2] [--json]');
  process.exit(2);
}
const N_GEN = 128;
// about 128 tokens with either model's tokenizer
const PROMPT = 'The history of the lighthouse begins in the ancient world, when fires were lit on hilltops to guide ships home. '
  .repeat(6) + 'Over the centuries the keepers of these lights became figures of legend, and their stories were told in every harbour town.';

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm' };
const routes = { '/pkg/': join(root, 'wasm', 'pkg'), '/wllama/': join(here, 'node_modules', '@wllama', 'wllama') };
const server = createServer((req, res) => {
  res.setHeader('cross-origin-opener-policy', 'same-origin');
  res.setHeader('cross-origin-embedder-policy', 'require-corp');
  const p = decodeURIComponent(new URL(req.url, 'http://x').pathname);
  let file = null;
  if (p === '/' || p === '/bench.html') file = join(here, 'bench.html');
  else if (p === '/bench.js') file = join(here, 'bench.js');
  else if (p.startsWith('/models/')) file = models.find((m) => basename(m) === p.slice(8));
  else for (const [pre, dir] of Object.entries(routes)) if (p.startsWith(pre) && !p.includes('..')) file = join(dir, p.slice(pre.length));
  let st;
  try { st = file && statSync(file); } catch { st = null; }
  if (!st?.isFile()) return res.writeHead(404).end();
  res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream', 'content-length': st.size });
  createReadStream(file).pipe(res);
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const origin = `http://127.0.0.1:${server.address().port}`;

const dir = mkdtempSync(join(tmpdir(), 'superinfer-bench-'));
const ctx = await chromium.launchPersistentContext(dir, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const page = ctx.pages()[0] ?? await ctx.newPage();
page.on('console', (m) => { if (m.type() === 'error') console.error(`page: ${m.text()}`); });
await page.goto(`${origin}/bench.html`);
await page.waitForFunction(() => window.benchReady === true);
const browserVersion = ctx.browser()?.version() ?? execFileSync(process.env.CHROMIUM || '/usr/bin/chromium', ['--version'], { encoding: 'utf8' }).trim();

function native(model, t) {
  const bin = join(root, 'target', 'release', 'superinfer');
  try {
    const out = JSON.parse(execFileSync(bin, ['bench', '-m', model, '-p', '128', '-n', String(N_GEN), '-t', String(t), '-r', '2', '--json'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    return { promptTps: out.find((o) => o.n_prompt > 0)?.avg_ts, genTps: out.find((o) => o.n_gen > 0)?.avg_ts };
  } catch {
    return null;
  }
}

const results = [];
for (const model of models) {
  for (const t of threads) {
    const best = {};
    for (let r = 0; r < reps; r++) {
      const order = r % 2 ? ['wllama', 'superinfer'] : ['superinfer', 'wllama'];
      for (const engine of order) {
        const m = await page.evaluate((a) => window.runBench(a), { engine, model: `/models/${basename(model)}`, threads: t, prompt: PROMPT, nGen: N_GEN });
        const b = best[engine];
        best[engine] = b ? { ...m, promptTps: Math.max(b.promptTps, m.promptTps), genTps: Math.max(b.genTps, m.genTps) } : m;
      }
    }
    const row = { model: basename(model), threads: t, superinfer: best.superinfer, wllama: best.wllama, native: native(model, t) };
    results.push(row);
    if (!json) {
      const s = row.superinfer; const w = row.wllama; const n = row.native;
      console.log(`${row.model} -t ${t}: superinfer (${s.threads} thread${s.threads > 1 ? 's' : ''}, ${s.build}) prompt ${s.promptTps.toFixed(1)} t/s (${s.promptN} tok), decode ${s.genTps.toFixed(1)} t/s | wllama prompt ${w.promptTps.toFixed(1)} (${w.promptN} tok), decode ${w.genTps.toFixed(1)} | ratio prompt ${(s.promptTps / w.promptTps).toFixed(2)}x, decode ${(s.genTps / w.genTps).toFixed(2)}x | native prompt ${n?.promptTps?.toFixed(1)}, decode ${n?.genTps?.toFixed(1)} (wasm/native decode ${n ? (s.genTps / n.genTps).toFixed(2) : '?'}) | superinfer wasm memory ${(s.wasmBytes / 2 ** 20).toFixed(0)} MiB = file ${(s.fileSize / 2 ** 20).toFixed(0)} + KV ${(s.kvBytes / 2 ** 20).toFixed(0)} + ${((s.wasmBytes - s.fileSize - s.kvBytes) / 2 ** 20).toFixed(0)} MiB`);
    }
  }
}
if (json) console.log(JSON.stringify({ browser: browserVersion, results }, null, 1));
else console.log(`(${browserVersion}, prompt ${PROMPT.length} chars, ${N_GEN} greedy tokens, best of ${reps})`);
await ctx.close();
rmSync(dir, { recursive: true, force: true });
server.close();
