#!/usr/bin/env bash
# Quantizes each model copy to each type with llama-quantize and with `superinfer quantize`
# (alternated, same thread count), compares the files byte for byte and prints wall times.
#
#   [IMATRIX=FILE] scripts/quantize/compare.sh SUPERINFER_BIN THREADS "TYPE..." MODEL.gguf...
#
# (IMATRIX: both get --imatrix FILE, given as written: its name goes into the file.)
# Writes ref-*/our-* files and logs beside the working directory; on this machine wrap it
# in `flock /tmp/superinfer-cpu.lock` (the times are only comparable on an idle machine).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(bash "$root/benches/build-llama-cpp.sh" | tail -1)
ours=$1; threads=$2; types=$3; shift 3
printf '%-44s %-7s %-10s %9s %9s\n' model type result llama_s ours_s
for m in "$@"; do
  base=$(basename "$m" .gguf)
  for t in $types; do
    ref=ref-$base-$t.gguf our=our-$base-$t.gguf
    s=$(date +%s.%N)
    im=(); [ -n "${IMATRIX:-}" ] && im=(--imatrix "$IMATRIX")
    "$bin/llama-quantize" "${im[@]}" "$m" "$ref" "$t" "$threads" > "$ref.log" 2>&1
    e=$(date +%s.%N); lt=$(echo "$e - $s" | bc)
    s=$(date +%s.%N)
    "$ours" quantize "${im[@]}" "$m" "$our" "$t" -t "$threads" > "$our.log" 2>&1
    e=$(date +%s.%N); ot=$(echo "$e - $s" | bc)
    if cmp -s "$ref" "$our"; then r=identical; else r=DIFFER; fi
    printf '%-44s %-7s %-10s %9.2f %9.2f\n' "$base" "$t" "$r" "$lt" "$ot"
    [ "$r" = identical ] && rm -f "$ref" "$our"
  done
done
