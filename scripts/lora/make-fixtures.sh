#!/usr/bin/env bash
# llama.cpp's reference outputs for LoRA adapters on Qwen2.5-Coder-0.5B (tests/tests/lora.rs):
# writes the random adapters of superinfer_tests::lora::SPECS with the `lora-adapters` binary
# (the same bytes the test regenerates: their sha256 goes to tests/fixtures/lora/adapters.sha256),
# then runs scripts/moe/llama-fixtures.sh (the pinned llama.cpp, F16 cache, flash attention,
# n_ctx 512, 2 threads) under each adapter set with FIXTURES_LORA, as llama.cpp's
# --lora / --lora-scaled apply them:
#   r8/   the rank-8 adapter at scale 1
#   r64/  the rank-64 adapter at scale 1
#   sum/  the rank-8 adapter at scale 1 and the rank-16 one at scale 0.5 (their terms add up)
#
#   scripts/lora/make-fixtures.sh [N_GEN=48]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
N_GEN="${1:-48}"
MODEL="${SUPERINFER_MODELS:-$HOME/.cache/superinfer/models}/qwen2.5-coder-0.5b-instruct.gguf"
OUT="$ROOT/tests/fixtures/lora"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cd "$ROOT"
cargo build --profile test -p superinfer-tests --bin lora-adapters >&2
target/debug/lora-adapters "$MODEL" "$TMP" r8 r16 r64 >"$TMP/sha256"
mkdir -p "$OUT"
sort -k2 "$TMP/sha256" >"$OUT/adapters.sha256"
sha256sum "$MODEL" | cut -d' ' -f1 >"$OUT/model.sha256"
run() {
  local name="$1" loras="$2"
  mkdir -p "$OUT/$name"
  FIXTURES_LORA="$loras" scripts/moe/llama-fixtures.sh "$MODEL" scripts/lora/prompts.json \
    "$OUT/$name/generate.json" "$N_GEN" 2
}
run r8 "$TMP/r8.gguf"
run r64 "$TMP/r64.gguf"
run sum "$TMP/r8.gguf:1,$TMP/r16.gguf:0.5"
