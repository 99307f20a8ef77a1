// Shared by the package's tests: where the models, fixtures and native binary are, and the
// rule for comparing two greedy continuations (llama.cpp's near-ties, as
// tests/tests/llamacpp_fixtures.rs defines them).

import { readFileSync, existsSync } from 'node:fs';
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';

export const TIE = 0.05;

// (module (func (result v128) v128.const i32x4 0 0 0 0 i32x4.relaxed_trunc_f32x4_s)), as the
// package's loader probes (written again here, so the tests check the loader against it)
const RELAXED_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0,
  10, 25, 1, 23, 0, 253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 253, 129, 2, 11]);

/** This engine validates relaxed-SIMD instructions (Node 20: only with --experimental-wasm-relaxed-simd). */
export const RELAXED_SIMD = WebAssembly.validate(RELAXED_PROBE);

/** The build the package's loader must pick here: threaded or not, relaxed-SIMD where validated. */
export function expectedBuild(threaded, relaxed = RELAXED_SIMD) {
  return `superinfer${relaxed ? '-relaxed' : ''}${threaded ? '-threads' : ''}`;
}

// (module (func (export "f") (param f32 f32 f32) (result f32)
//   local.get 0 f32x4.splat local.get 1 f32x4.splat local.get 2 f32x4.splat
//   f32x4.relaxed_madd f32x4.extract_lane 0))
export const MADD_PROBE = [0, 97, 115, 109, 1, 0, 0, 0, 1, 8, 1, 96, 3, 125, 125, 125, 1, 125, 3, 2, 1, 0,
  7, 5, 1, 1, 102, 0, 0, 10, 22, 1, 20, 0, 32, 0, 253, 19, 32, 1, 253, 19, 32, 2, 253, 19, 253, 133, 2, 253, 31, 0, 11];

/**
 * Whether this engine's f32x4.relaxed_madd fuses (one rounding, as the relaxed build's flash
 * tile needs to give the plain build's bits): (1 + 2^-12)^2 - 1 is 2^-11 + 2^-24 fused and
 * 2^-11 with the product rounded first. null where relaxed SIMD does not validate. (Self-
 * contained: a browser page runs its source, `page.evaluate(relaxedMaddFuses, MADD_PROBE)`.)
 */
export function relaxedMaddFuses(probe = MADD_PROBE) {
  const bytes = new Uint8Array(probe);
  if (!WebAssembly.validate(bytes)) return null;
  const { f } = new WebAssembly.Instance(new WebAssembly.Module(bytes)).exports;
  const a = 1 + 2 ** -12;
  const r = f(a, a, -1);
  if (r === 2 ** -11 + 2 ** -24) return true;
  if (r === 2 ** -11) return false;
  throw new Error(`relaxed_madd gave ${r}`);
}

export function env(name) {
  const v = process.env[name];
  if (!v || !existsSync(v)) throw new Error(`${name} must name an existing file or directory (got ${v})`);
  return v;
}

export const MODELS = {
  qwen: { env: 'SUPERINFER_QWEN', fixtures: 'qwen2.5-coder-0.5b' },
  gemma: { env: 'SUPERINFER_GEMMA', fixtures: 'gemma-3-270m' },
};

export function fixture(model, file) {
  return JSON.parse(readFileSync(join(env('SUPERINFER_FIXTURES'), MODELS[model].fixtures, file), 'utf8'));
}

/** The text native `superinfer run` generates (greedy, n tokens, two threads). */
export function nativeRun(modelPath, prompt, n) {
  const out = execFileSync(env('SUPERINFER_BIN'), ['run', '-m', modelPath, '-p', prompt, '-n', String(n), '--temp', '0', '-t', '2'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    maxBuffer: 1 << 20,
  });
  // `run` ends its output with a newline of its own
  return out.endsWith('\n') ? out.slice(0, -1) : out;
}

/**
 * Native `superinfer run` greedy on `prompt` with extra flags: {text, stop, generated} (the
 * stop reason and the tokens sampled as its stderr reports them).
 */
export function nativeRunWith(modelPath, prompt, flags) {
  const r = spawnSync(env('SUPERINFER_BIN'), ['run', '-m', modelPath, '-p', prompt, '--temp', '0', '-t', '2', ...flags], {
    encoding: 'utf8',
    maxBuffer: 1 << 20,
  });
  if (r.status !== 0) throw new Error(`superinfer run failed: ${r.stderr}`);
  const out = r.stdout;
  return {
    text: out.endsWith('\n') ? out.slice(0, -1) : out,
    stop: /stop: (\w+)/.exec(r.stderr)[1],
    generated: Number(/generation: (\d+) tokens/.exec(r.stderr)[1]),
  };
}

/**
 * null when the wasm continuation (`tokens`: [{id, text}]) equals the native text, or parts
 * from it only at a llama.cpp near-tie (a position where llama.cpp rates the token the wasm
 * engine chose within TIE of its best, after the same tokens as llama.cpp); else why not.
 */
export function divergence(nativeText, tokens, fcase) {
  const wasmText = tokens.map((t) => t.text).join('');
  if (wasmText === nativeText) return null;
  let acc = '';
  let j = 0;
  for (; j < tokens.length; j++) {
    const next = acc + tokens[j].text;
    if (!nativeText.startsWith(next)) break;
    acc = next;
  }
  if (j === tokens.length) {
    return `the wasm engine stopped after ${tokens.length} tokens (${JSON.stringify(wasmText)}), native went on: ${JSON.stringify(nativeText)}`;
  }
  const ids = tokens.map((t) => t.id);
  // where the wasm continuation leaves llama.cpp's (the one with reference log-probs)
  const k = ids.findIndex((id, i) => id !== fcase.generated_ids[i]);
  const at = k >= 0 && k < j ? k : j;
  const top = fcase.positions[fcase.prompt_ids.length - 1 + at].top;
  const ours = top.find((e) => e[0] === ids[at]);
  const behind = ours ? top[0][1] - ours[1] : Infinity;
  // A near-tie: rounding decides, the continuations may part. When the wasm engine (with
  // the native one: their texts agree up to j) left llama.cpp's continuation at a near-tie
  // before parting from native, no reference remains to judge later tokens by, and
  // comparing stops there, as in the fixture tests.
  if (behind < TIE) return null;
  return `generated token ${at}${at < j ? ` (before wasm and native part at ${j})` : ''}: wasm chose ${ids[at]}, ${ours ? `${behind.toFixed(4)} behind` : 'not in'} llama.cpp's top (${top[0][0]}); wasm ${JSON.stringify(wasmText)} native ${JSON.stringify(nativeText)}`;
}

/** Runs a completion; returns its tokens ([{id, text}]) and its last chunk. */
export async function collect(stream, onChunk) {
  const tokens = [];
  let last = null;
  for await (const c of stream) {
    const ch = c.choices[0];
    const text = ch.text ?? ch.delta?.content ?? '';
    for (const id of ch.token_ids ?? []) tokens.push({ id, text });
    if (!(ch.token_ids ?? []).length && text) tokens.push({ id: null, text });
    last = c;
    onChunk?.(c);
  }
  return { tokens, last, text: tokens.map((t) => t.text).join('') };
}
