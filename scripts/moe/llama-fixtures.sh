#!/usr/bin/env bash
# Builds scripts/moe/llama-fixtures.cpp against the pinned llama.cpp build that
# benches/build-llama-cpp.sh makes (its headers and its shared libllama / libggml*), then runs
# it with the given arguments:
#
#   scripts/moe/llama-fixtures.sh MODEL.gguf PROMPTS.json OUT.json [N_GEN=48] [THREADS=2]
#
# The binary is cached beside that build (rebuilt when the source is newer).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BIN="$("$HERE/../../benches/build-llama-cpp.sh")"
BUILD="$(dirname "$BIN")"
SRC="$(dirname "$BUILD")"
TOOL="$BUILD/superinfer-llama-fixtures"
if [ ! -x "$TOOL" ] || [ "$HERE/llama-fixtures.cpp" -nt "$TOOL" ]; then
  g++ -O2 -std=c++17 -o "$TOOL" "$HERE/llama-fixtures.cpp" \
    -I"$SRC/include" -I"$SRC/ggml/include" -I"$SRC/vendor" \
    -L"$BIN" -lllama -lggml -lggml-base -Wl,-rpath,"$BIN" >&2
fi
exec "$TOOL" "$@"
