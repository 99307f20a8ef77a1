// Model sources, as streams of chunks of known total size: an ArrayBuffer, a Blob/File, a
// URL (in Node also a file path), or a list of them: the parts of one file cut into byte
// ranges, concatenated in order, or the shards of a model split with llama.cpp's gguf-split
// (the engine tells which from the first part's header). URLs go through the Cache API when
// it exists and caching is on, keyed by URL; an entry whose body is not the size it was
// stored with is thrown away.

import { SuperinferError } from './errors.js';

const CHUNK = 8 << 20;
export const CACHE_NAME = 'superinfer-models-v1';
const SIZE_HEADER = 'x-superinfer-size';

/**
 * @typedef {{size: number, chunks: () => AsyncIterable<Uint8Array>, cancel: () => void, cached: boolean}} Part
 * @typedef {{size: number, parts: Part[], cancel: () => void, cachedParts: number}} Source
 */

/**
 * `source`: one `{kind: 'buffer' | 'file' | 'blob' | 'url', ...}`, or `{kind: 'parts', items}`
 * of them.
 * @returns {Promise<Source>}
 */
export async function openSource(source, { cache = true } = {}) {
  const items = source.kind === 'parts' ? source.items : [source];
  if (!items.length) throw new SuperinferError('invalid_argument', 'an empty list of model parts');
  const store = cache && items.some((i) => i.kind === 'url') ? await openCache() : null;
  const parts = [];
  try {
    // every part's size first (a response's headers): the total decides the allocation
    for (const item of items) parts.push(await openPart(item, store));
  } catch (e) {
    for (const p of parts) p.cancel();
    throw e;
  }
  return {
    size: parts.reduce((s, p) => s + p.size, 0),
    parts,
    cachedParts: parts.filter((p) => p.cached).length,
    cancel: () => parts.forEach((p) => p.cancel()),
  };
}

async function openPart(item, store) {
  switch (item.kind) {
    case 'buffer': return bufferPart(new Uint8Array(item.buffer));
    case 'file': return filePart(item.path);
    case 'blob': return blobPart(item.blob);
    case 'url': return urlPart(item.url, store);
    default: throw new SuperinferError('invalid_argument', 'unknown source kind');
  }
}

function bufferPart(bytes) {
  return {
    size: bytes.length,
    cached: false,
    cancel() {},
    async *chunks() {
      for (let at = 0; at < bytes.length; at += CHUNK) yield bytes.subarray(at, Math.min(at + CHUNK, bytes.length));
    },
  };
}

function blobPart(blob) {
  let reader = null;
  return {
    size: blob.size,
    cached: false,
    cancel() { reader?.cancel().catch(() => {}); },
    async *chunks() {
      reader = blob.stream().getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        yield value;
      }
    },
  };
}

/** Node: a local file, by path or file: URL. */
async function filePart(path) {
  const fs = await import('node:fs');
  const { fileURLToPath } = await import('node:url');
  const file = path.startsWith('file:') ? fileURLToPath(path) : path;
  let size;
  try {
    size = (await fs.promises.stat(file)).size;
  } catch (e) {
    throw new SuperinferError('network', `cannot read ${file}: ${e.message}`);
  }
  let stream = null;
  return {
    size,
    cached: false,
    url: file,
    cancel() { stream?.destroy(); },
    async *chunks() {
      stream = fs.createReadStream(file, { highWaterMark: CHUNK });
      try {
        for await (const chunk of stream) yield chunk;
      } catch (e) {
        throw new SuperinferError('network', `reading ${file} failed: ${e.message}`);
      }
    },
  };
}

async function openCache() {
  try {
    return typeof caches !== 'undefined' ? await caches.open(CACHE_NAME) : null;
  } catch {
    return null; // e.g. an opaque origin: no cache, not an error
  }
}

async function urlPart(url, store) {
  const key = String(url);
  if (store) {
    const hit = await store.match(key).catch(() => undefined);
    const size = Number(hit?.headers.get(SIZE_HEADER));
    if (hit && size > 0) return responsePart(hit, size, null, { cached: true, url: key, store });
  }
  const abort = new AbortController();
  let response;
  try {
    response = await fetch(key, { signal: abort.signal });
  } catch (e) {
    throw new SuperinferError('network', `could not fetch ${key}: ${e.message || e} (offline, a CORS refusal or a wrong host?)`);
  }
  if (!response.ok) {
    abort.abort();
    throw new SuperinferError('network', `fetching ${key} failed: HTTP ${response.status} ${response.statusText}`.trim());
  }
  const length = response.headers.get('content-length');
  const encoding = response.headers.get('content-encoding');
  if (length === null || (encoding && encoding !== 'identity')) {
    abort.abort();
    throw new SuperinferError('network', `${key}: the server sent no Content-Length for the file (or compressed it), so its size is unknown; serve it uncompressed with a Content-Length, or pass a Blob`);
  }
  const size = Number(length);
  if (store) {
    // one branch for the engine, one for the cache (written as it streams)
    const [mine, theirs] = response.body.tee();
    const headers = { 'content-length': String(size), [SIZE_HEADER]: String(size), 'content-type': 'application/octet-stream' };
    const put = store.put(key, new Response(theirs, { headers })).catch(() => store.delete(key).catch(() => {}));
    return responsePart(new Response(mine), size, abort, { cached: false, url: key, store, put });
  }
  return responsePart(response, size, abort, { cached: false, url: key });
}

function responsePart(response, size, abort, { cached, url, store, put }) {
  let reader = null;
  return {
    size,
    cached,
    url,
    cancel() {
      abort?.abort();
      reader?.cancel().catch(() => {});
      if (put) store.delete(url).catch(() => {});
    },
    async *chunks() {
      reader = response.body.getReader();
      let got = 0;
      for (;;) {
        let r;
        try {
          r = await reader.read();
        } catch (e) {
          if (cached) await store.delete(url).catch(() => {});
          throw new SuperinferError('truncated', `the download of ${url} broke off after ${got} of ${size} bytes (${e.message || e}); try again`);
        }
        if (r.done) break;
        got += r.value.length;
        yield r.value;
      }
      if (got !== size && cached) await store.delete(url).catch(() => {});
      if (put && got === size) await put;
    },
  };
}

/** Removes every cached model (or the one of `url`). */
export async function clearCache(url) {
  if (typeof caches === 'undefined') return;
  if (url === undefined) await caches.delete(CACHE_NAME);
  else await (await caches.open(CACHE_NAME)).delete(String(url));
}
