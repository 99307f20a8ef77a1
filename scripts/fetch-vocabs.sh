#!/usr/bin/env bash
# Fetch llama.cpp's tokenizer test suite — the vocab-only GGUF files models/ggml-vocab-*.gguf
# and their .inp/.out cases — from the pinned llama-cpp-python sdist (the same file
# benches/build-llama-cpp.sh builds llama.cpp from, cached beside it), verify the sdist's sha256
# and unpack the files under ${SUPERINFER_MODELS:-~/.cache/superinfer/models}/llama-vocab
# (tests/tests/vocab_suite.rs reads them there). Prints that directory.
set -euo pipefail

VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
SDIST_DIR="${SUPERINFER_CACHE:-$HOME/.cache/superinfer}/llama.cpp"
SDIST="$SDIST_DIR/llama_cpp_python-$VERSION.tar.gz"
OUT="${SUPERINFER_MODELS:-$HOME/.cache/superinfer/models}/llama-vocab"

if [ -f "$OUT/.sha256-ok" ] && [ "$(cat "$OUT/.sha256-ok")" = "$SHA256" ]; then
  echo "$OUT"; exit 0
fi
mkdir -p "$SDIST_DIR"
if [ ! -f "$SDIST" ] || [ "$(sha256sum "$SDIST" | cut -d' ' -f1)" != "$SHA256" ]; then
  echo "downloading llama-cpp-python $VERSION (sdist)" >&2
  "$(dirname "$0")/fetch-sdist.py" llama-cpp-python "$VERSION" "$SHA256" "$SDIST_DIR" >&2
fi
got=$(sha256sum "$SDIST" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
  echo "error: sha256 mismatch for $SDIST: got $got, want $SHA256" >&2; exit 1
fi
mkdir -p "${OUT%/*}"
tmp=$(mktemp -d "${OUT%/*}/.fetch-vocab.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$SDIST" -C "$tmp" --wildcards "llama_cpp_python-$VERSION/vendor/llama.cpp/models/ggml-vocab-*"
rm -rf "$OUT"
mv "$tmp/llama_cpp_python-$VERSION/vendor/llama.cpp/models" "$OUT"
echo "$SHA256" > "$OUT/.sha256-ok"
echo "$OUT"
