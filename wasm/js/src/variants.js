// Written by wasm/build.sh from its table: the engine builds in this package.
export const VARIANTS = [
  { name: 'superinfer', file: 'superinfer.wasm', threads: false, relaxedSimd: false },
  { name: 'superinfer-threads', file: 'superinfer-threads.wasm', threads: true, relaxedSimd: false },
  { name: 'superinfer-relaxed', file: 'superinfer-relaxed.wasm', threads: false, relaxedSimd: true },
  { name: 'superinfer-relaxed-threads', file: 'superinfer-relaxed-threads.wasm', threads: true, relaxedSimd: true },
];
