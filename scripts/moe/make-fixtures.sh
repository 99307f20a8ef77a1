#!/usr/bin/env bash
# Makes the MoE agreement fixtures in tests/fixtures/moe/ (tests/tests/moe_fixtures.rs) with
# the pinned llama.cpp (benches/build-llama-cpp.sh builds it):
#
#   scripts/moe/make-fixtures.sh tiny       # tiny random models: scripts/moe/make-tiny.py writes
#                                           # them in F32, llama-quantize quantizes them, and
#                                           # llama.cpp's outputs on them are recorded
#   scripts/moe/make-fixtures.sh upcycled   # Qwen2.5-0.5B upcycled to qwen2moe (the tests'
#                                           # converter, tests/src/upcycle.rs, writes it into the
#                                           # models cache's derived/), llama.cpp's outputs on
#                                           # scripts/moe/upcycled-prompts.json
#
# Needs numpy (pip install numpy) for `tiny`; gguf-py comes from the llama.cpp sources.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="$("$ROOT/benches/build-llama-cpp.sh")"
SRC="$(dirname "$(dirname "$BIN")")"
OUT="$ROOT/tests/fixtures/moe"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

tiny() {
  PYTHONPATH="$SRC/gguf-py" python3 "$HERE/make-tiny.py" "$WORK" >/dev/null
  # name and llama-quantize type
  for spec in gpt-oss:MXFP4_MOE qwen3moe:Q4_K qwen2moe:Q8_0 mixtral:Q4_0; do
    local m="${spec%%:*}" t="${spec##*:}"
    mkdir -p "$OUT/$m"
    "$BIN/llama-quantize" "$WORK/$m-f32.gguf" "$OUT/$m/model.gguf" "$t" 2 >"$WORK/$m-quantize.log" 2>&1 \
      || { cat "$WORK/$m-quantize.log" >&2; exit 1; }
    "$HERE/llama-fixtures.sh" "$OUT/$m/model.gguf" "$WORK/$m-prompts.json" "$OUT/$m/generate.json" 48 2
    sha256sum "$OUT/$m/model.gguf" | cut -d' ' -f1 >"$OUT/$m/model.sha256"
    echo "$m ($t): $(stat -c %s "$OUT/$m/model.gguf") B, sha256 $(cat "$OUT/$m/model.sha256")"
  done
}

upcycled() {
  local models="${SUPERINFER_MODELS:-$HOME/.cache/superinfer/models}"
  # the converter the test uses (tests/src/upcycle.rs), through its command-line front
  (cd "$ROOT" && cargo run --quiet -p superinfer-tests --bin upcycle -- \
    "$models/qwen2.5-coder-0.5b-instruct.gguf" "$models/derived/qwen2.5-0.5b-upcycled-qwen2moe.gguf")
  local m=upcycled-qwen2.5-0.5b
  mkdir -p "$OUT/$m"
  "$HERE/llama-fixtures.sh" "$models/derived/qwen2.5-0.5b-upcycled-qwen2moe.gguf" \
    "$HERE/upcycled-prompts.json" "$OUT/$m/generate.json" 48 2
  sha256sum "$models/derived/qwen2.5-0.5b-upcycled-qwen2moe.gguf" | cut -d' ' -f1 >"$OUT/$m/model.sha256"
  echo "$m: sha256 $(cat "$OUT/$m/model.sha256")"
}

case "${1:-}" in
  tiny) tiny ;;
  upcycled) upcycled ;;
  *) echo "usage: $0 tiny|upcycled" >&2; exit 2 ;;
esac
