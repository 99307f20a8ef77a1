#!/usr/bin/env bash
# Makes tests/fixtures/quantize/qwen2.5-coder-0.5b.json: the size and SHA-256 of the files the
# pinned llama-quantize writes from the suite's F32 copy of Qwen2.5-Coder-0.5B (what
# tests/src/lib.rs's `f32_copy(QWEN_05B)` writes to models/derived/qwen2.5-0.5b-F32.gguf;
# run `cargo test -p superinfer-tests --test quantize` once to create it), for Q4_0, Q8_0
# and Q4_K_M at 2 threads. tests/tests/quantize.rs checks `superinfer quantize` against them.
#
#   scripts/quantize/make-fixtures.sh [F32_COPY]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(bash "$root/benches/build-llama-cpp.sh" | tail -1)
models=${SUPERINFER_MODELS:-$HOME/.cache/superinfer/models}
input=${1:-$models/derived/qwen2.5-0.5b-F32.gguf}
[ -f "$input" ] || { echo "no $input: run cargo test -p superinfer-tests --test quantize once" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
entry() { # name file
  printf '"%s": {"size": %s, "sha256": "%s"}' "$1" "$(stat -c %s "$2")" "$(sha256sum "$2" | cut -d' ' -f1)"
}
outs=()
for t in Q4_0 Q8_0 Q4_K_M; do
  "$bin/llama-quantize" "$input" "$tmp/$t.gguf" "$t" 2 > "$tmp/$t.log" 2>&1
  outs+=("    $(entry "$t" "$tmp/$t.gguf")")
  rm "$tmp/$t.gguf"
done
# with the synthetic imatrix the test writes (tests/src/imatrix.rs), named relative to the
# models dir as the test names it (the name is stored in quantize.imatrix.file)
[ -f "$models/derived/qwen2.5-0.5b-imatrix.gguf" ] || { echo "no imatrix: run the test once" >&2; exit 1; }
(cd "$models" && "$bin/llama-quantize" --imatrix derived/qwen2.5-0.5b-imatrix.gguf "$input" "$tmp/Q4_0i.gguf" Q4_0 2 > "$tmp/Q4_0i.log" 2>&1)
outs+=("    $(entry "Q4_0+imatrix" "$tmp/Q4_0i.gguf")")
rm "$tmp/Q4_0i.gguf"
version=$(grep -m1 '^version:' "$tmp/Q4_0.log" | sed 's/^version: //')
out=$root/tests/fixtures/quantize/qwen2.5-coder-0.5b.json
mkdir -p "$(dirname "$out")"
{
  echo '{'
  echo '  "made_by": "scripts/quantize/make-fixtures.sh: llama-quantize INPUT OUT TYPE 2",'
  echo "  \"llama_cpp\": \"llama-quantize $version\","
  echo "  \"input\": {\"file\": \"models/derived/qwen2.5-0.5b-F32.gguf (f32_copy of qwen2.5-coder-0.5b-instruct.gguf)\", $(entry x "$input" | sed 's/^"x": {//; s/}$//')},"
  echo '  "outputs": {'
  (IFS=$'\n'; echo "${outs[*]}" | sed '$!s/$/,/')
  echo '  }'
  echo '}'
} > "$out"
echo "wrote $out" >&2
