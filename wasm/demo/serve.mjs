#!/usr/bin/env node
// Serves the demo: the page, the package at /pkg/ and, with --model, a local GGUF file at
// /models/NAME, with COOP/COEP headers (so the page is cross-origin isolated, which the
// multi-threaded build needs) unless --no-isolation.
//
//   node wasm/demo/serve.mjs [--port 8080] [--pkg wasm/pkg] [--model PATH]... [--no-isolation]
import { createServer } from 'node:http';
import { createReadStream, statSync } from 'node:fs';
import { basename, extname, join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const port = Number(opt('--port', 8080));
const pkg = resolve(opt('--pkg', join(here, '..', 'pkg')));
const isolate = !args.includes('--no-isolation');
const models = new Map();
args.forEach((a, i) => {
  if (a === '--model') models.set(basename(args[i + 1]), resolve(args[i + 1]));
});

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json', '.ts': 'text/plain', '.gguf': 'application/octet-stream' };

function file(res, path) {
  let st;
  try {
    st = statSync(path);
  } catch {
    res.writeHead(404).end('not found');
    return;
  }
  res.writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream', 'content-length': st.size });
  createReadStream(path).pipe(res);
}

const server = createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  if (isolate) {
    res.setHeader('cross-origin-opener-policy', 'same-origin');
    res.setHeader('cross-origin-embedder-policy', 'require-corp');
  }
  res.setHeader('cross-origin-resource-policy', 'same-origin');
  res.setHeader('cache-control', 'no-store');
  const p = decodeURIComponent(url.pathname);
  if (p.includes('..')) return res.writeHead(400).end();
  if (p === '/' || p === '/index.html') return file(res, join(here, 'index.html'));
  if (p === '/app.js') return file(res, join(here, 'app.js'));
  if (p.startsWith('/pkg/')) return file(res, join(pkg, p.slice(5)));
  if (p.startsWith('/models/') && models.has(p.slice(8))) return file(res, models.get(p.slice(8)));
  res.writeHead(404).end('not found');
});
server.listen(port, '127.0.0.1', () => {
  const { port: actual } = server.address();
  console.log(`demo: http://127.0.0.1:${actual}/ (${isolate ? 'COOP/COEP set' : 'not isolated'}; package ${pkg})`);
  for (const name of models.keys()) console.log(`model: http://127.0.0.1:${actual}/models/${name}`);
});
