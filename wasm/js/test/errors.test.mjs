// Bad input gives a typed error, found as early as possible: not GGUF, a truncated file or
// download, an unknown architecture, an unknown tensor type, a file too large for wasm32
// (refused from its size before the body is read), and network failures.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { openSync, readSync, closeSync, statSync, createReadStream } from 'node:fs';
import { load, SuperinferError, ERROR_CODES } from 'superinfer';
import { env, collect } from './helpers.mjs';

const gemma = () => env('SUPERINFER_GEMMA');

function head(path, n) {
  const b = Buffer.alloc(n);
  const fd = openSync(path, 'r');
  readSync(fd, b, 0, n, 0);
  closeSync(fd);
  return b;
}

/** A GGUF v3 file with only metadata (string values) and no tensors. */
function ggufWithMetadata(kv) {
  const parts = [];
  const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); parts.push(b); };
  const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); parts.push(b); };
  const str = (s) => { const b = Buffer.from(s); u64(b.length); parts.push(b); };
  parts.push(Buffer.from('GGUF'));
  u32(3);
  u64(0);
  u64(Object.keys(kv).length);
  for (const [k, v] of Object.entries(kv)) { str(k); u32(8); str(v); }
  return Buffer.concat(parts);
}

let server;
let base;
const sent = {};

before(async () => {
  server = createServer((req, res) => {
    const size = statSync(gemma()).size;
    if (req.url === '/gemma.gguf') {
      res.writeHead(200, { 'content-length': size });
      createReadStream(gemma()).pipe(res);
    } else if (req.url === '/short.gguf') {
      // announces the whole file, sends 32 MiB, then the connection drops
      res.writeHead(200, { 'content-length': size });
      const s = createReadStream(gemma(), { end: (32 << 20) - 1 });
      s.pipe(res, { end: false });
      s.on('end', () => setTimeout(() => res.destroy(), 50));
    } else if (req.url === '/badtype.gguf') {
      // the whole file, with an unknown type id in its tensor directory; counts what it sends
      res.writeHead(200, { 'content-length': size });
      const first = patchedType(head(gemma(), 16 << 20));
      sent.badtype = 0;
      const rest = createReadStream(gemma(), { start: first.length });
      res.write(first);
      sent.badtype += first.length;
      rest.on('data', (d) => { sent.badtype += d.length; if (!res.write(d)) { rest.pause(); res.once('drain', () => rest.resume()); } });
      rest.on('end', () => res.end());
      res.on('close', () => rest.destroy());
    } else if (req.url === '/huge.gguf') {
      // 5 GB announced; counts what it manages to send before the client hangs up
      res.writeHead(200, { 'content-length': 5_000_000_000 });
      sent.huge = 0;
      const chunk = head(gemma(), 1 << 20);
      const pump = () => {
        while (!res.destroyed && sent.huge < 256 << 20) {
          sent.huge += chunk.length;
          if (!res.write(chunk)) return res.once('drain', pump);
        }
      };
      pump();
    } else {
      res.writeHead(404).end('no such model');
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}`;
});

after(() => server.close());

async function refuses(source, code, re, opts = {}) {
  const err = await load(source, { nCtx: 256, ...opts }).then(
    (e) => { e.dispose(); return null; },
    (e) => e,
  );
  assert.ok(err instanceof SuperinferError, `expected a SuperinferError, got ${err}`);
  assert.ok(ERROR_CODES.includes(err.code));
  assert.equal(err.code, code, err.message);
  if (re) assert.match(err.message, re);
  return err;
}

test('bytes that are not GGUF', async () => {
  await refuses(new TextEncoder().encode('<!doctype html><html>Not found</html>'.repeat(100)), 'not_gguf', /not a GGUF file/);
});

test('a truncated file', async () => {
  await refuses(head(gemma(), 24 << 20), 'truncated');
});

test('an unknown architecture is refused from the header', async () => {
  await refuses(ggufWithMetadata({ 'general.architecture': 'mamba' }), 'unsupported_model', /mamba/);
});

/** `b` (the start of the Gemma file) with type id 77 for token_embd.weight. */
function patchedType(b) {
  // the tensor directory entry: name, n_dims (u32), dims (u64 each), type (u32)
  const name = Buffer.from('token_embd.weight');
  const at = b.indexOf(name) + name.length;
  const nDims = b.readUInt32LE(at);
  b.writeUInt32LE(77, at + 4 + 8 * nDims);
  return b;
}

test('an unknown tensor type is refused from the header, before the rest downloads', async () => {
  await refuses(patchedType(head(gemma(), 16 << 20)), 'unsupported_tensor_type', /token_embd\.weight/);
  await refuses(`${base}/badtype.gguf`, 'unsupported_tensor_type', /token_embd\.weight/);
  assert.ok(sent.badtype < 64 << 20, `${sent.badtype} of ${statSync(gemma()).size} bytes were sent before the refusal`);
  console.log(`unknown tensor type refused after ${sent.badtype} bytes were sent`);
});

test('a file too large for wasm32 is refused before its body is downloaded', async () => {
  const err = await refuses(`${base}/huge.gguf`, 'too_large', /5\.\d GB.*4 GB/);
  assert.ok(sent.huge < 200 << 20, `${sent.huge} bytes were sent before the refusal`);
  console.log(err.message);
});

test('a download that breaks off is truncated', async () => {
  await refuses(`${base}/short.gguf`, 'truncated', /broke off|ended after/);
});

test('network failures', async () => {
  await refuses(`${base}/missing.gguf`, 'network', /404/);
  await refuses('http://127.0.0.1:9/model.gguf', 'network', /could not fetch/);
});

test('a model loads from a URL, and a later load works after failures', async () => {
  const progress = [];
  const engine = await load(`${base}/gemma.gguf`, { nCtx: 128, onProgress: (p) => progress.push(p.loaded) });
  try {
    assert.equal(engine.info().architecture, 'gemma3');
    assert.ok(progress.length > 3 && progress.every((v, i) => i === 0 || v >= progress[i - 1]));
    const ids = await engine.tokenize('Hello');
    assert.equal(await engine.detokenize(ids), 'Hello');
  } finally {
    await engine.dispose();
  }
  await assert.rejects(engine.tokenize('x'), { code: 'disposed' });
});

test('request fields are checked as the server checks them: a wrong type is refused, naming the field', async () => {
  const engine = await load(gemma(), { nCtx: 128, threads: 1 });
  try {
    const refused = async (stream, code, param, re) => {
      const err = await collect(stream).then(() => null, (e) => e);
      assert.ok(err instanceof SuperinferError, `expected a SuperinferError, got ${err}`);
      assert.ok(ERROR_CODES.includes(err.code), err.code);
      assert.equal(err.code, code, err.message);
      assert.equal(err.param, param, err.message);
      if (re) assert.match(err.message, re);
    };
    // the server's own words (server/src/params.rs and the package share superinfer-api)
    await refused(engine.complete('Hi', { temperature: '0.2' }), 'invalid_type', 'temperature', /^'temperature' must be a number, not a string$/);
    await refused(engine.complete('Hi', { maxTokens: 'ten' }), 'invalid_type', 'max_tokens');
    await refused(engine.complete('Hi', { stop: 5 }), 'invalid_type', 'stop');
    await refused(engine.complete('Hi', { ignoreEos: 'yes' }), 'invalid_type', 'ignore_eos');
    await refused(engine.complete('Hi', { seed: 'abc' }), 'invalid_type', 'seed');
    await refused(engine.complete('Hi', { topP: 2 }), 'invalid_value', 'top_p', /between 0 and 1, got 2/);
    await refused(engine.complete('Hi', { maxTokens: -5 }), 'invalid_value', 'max_tokens');
    await refused(engine.complete([1, -2]), 'invalid_type', 'prompt');
    await refused(engine.chat([{ role: 'wizard', content: 'hi' }]), 'invalid_value', 'messages[0].role', /unknown role 'wizard'/);
    await refused(engine.chat([{ role: 'user', content: 5 }]), 'invalid_type', 'messages[0].content');
    await refused(engine.chat([]), 'invalid_value', 'messages');
    await assert.rejects(engine.applyChatTemplate([{ content: 'no role' }]), { code: 'invalid_value', param: 'messages[0].role' });
    // and right values still work: the same greedy tokens from text and from its token ids
    const ids = await engine.tokenize('The capital of France is');
    const a = await collect(engine.complete('The capital of France is', { temperature: 0, maxTokens: 4, stop: [] }));
    const b = await collect(engine.complete(ids, { temperature: 0, maxTokens: 4, ignoreEos: false }));
    assert.equal(a.tokens.length, 4);
    assert.deepEqual(b.tokens.map((t) => t.id), a.tokens.map((t) => t.id));
    // a chat: text parts joined as the server joins them, `developer` taken as `system`
    const msgs = [{ role: 'developer', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'Hi' }, { type: 'text', text: 'there' }] }];
    const rendered = await engine.applyChatTemplate(msgs);
    assert.match(rendered, /Be brief\.\n\nHi\nthere<end_of_turn>\n<start_of_turn>model\n$/);
    const c = await collect(engine.chat(msgs, { temperature: 0, maxTokens: 2, ignoreEos: true }));
    assert.equal(c.tokens.length, 2);
    assert.equal(c.last.usage.prompt_tokens, (await engine.tokenize(rendered, { addSpecial: !rendered.startsWith('<bos>') })).length);
  } finally {
    await engine.dispose();
  }
});
