#!/usr/bin/env node
// Runs a wasm32-wasip1 program (e.g. a `cargo test` binary) under Node's WASI preview1:
//   node scripts/wasi-runner.mjs prog.wasm [args...]
// Used as CARGO_TARGET_WASM32_WASIP1_RUNNER by scripts/test-cross.sh. Exits with the
// program's exit code (a trap, e.g. a panic under panic=abort, exits non-zero).
import { readFile } from 'node:fs/promises';
import { WASI } from 'node:wasi';
import process from 'node:process';

const [wasmPath, ...args] = process.argv.slice(2);
if (!wasmPath) {
  console.error('usage: wasi-runner.mjs <program.wasm> [args...]');
  process.exit(2);
}
const wasi = new WASI({
  version: 'preview1',
  args: [wasmPath, ...args],
  env: process.env,
  returnOnExit: true,
});
const module = await WebAssembly.compile(await readFile(wasmPath));
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
let code;
try {
  code = wasi.start(instance);
} catch (e) {
  console.error(`wasi-runner: ${wasmPath} trapped: ${e}`);
  code = 134;
}
process.exit(code ?? 0);
