#!/usr/bin/env bash
# Makes the dense-architecture agreement fixtures in tests/fixtures/archs/
# (tests/tests/arch_fixtures.rs) with the pinned llama.cpp (benches/build-llama-cpp.sh builds
# it): scripts/archs/make-tiny.py writes tiny random models in F32, llama-quantize quantizes
# them, and scripts/moe/llama-fixtures.cpp records llama.cpp's outputs on them.
#
#   scripts/archs/make-fixtures.sh
#
# Needs numpy (pip install numpy); gguf-py comes from the llama.cpp sources.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="$("$ROOT/benches/build-llama-cpp.sh")"
SRC="$(dirname "$(dirname "$BIN")")"
OUT="$ROOT/tests/fixtures/archs"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

PYTHONPATH="$SRC/gguf-py" python3 "$HERE/make-tiny.py" "$WORK" >/dev/null
# name and llama-quantize type
for spec in ${ARCHS:-phi3:Q8_0 gemma2:Q8_0 granite:Q4_K olmo2:Q8_0 exaone:Q8_0 internlm2:Q8_0 xverse:Q8_0}; do
  m="${spec%%:*}" t="${spec##*:}"
  mkdir -p "$OUT/$m"
  "$BIN/llama-quantize" "$WORK/$m-f32.gguf" "$OUT/$m/model.gguf" "$t" 2 >"$WORK/$m-quantize.log" 2>&1 \
    || { cat "$WORK/$m-quantize.log" >&2; exit 1; }
  "$ROOT/scripts/moe/llama-fixtures.sh" "$OUT/$m/model.gguf" "$WORK/$m-prompts.json" "$OUT/$m/generate.json" 48 2
  sha256sum "$OUT/$m/model.gguf" | cut -d' ' -f1 >"$OUT/$m/model.sha256"
  echo "$m ($t): $(stat -c %s "$OUT/$m/model.gguf") B, sha256 $(cat "$OUT/$m/model.sha256")"
done
