#!/usr/bin/env bash
# Build llama.cpp's benchmark tools from the sources vendored in the llama-cpp-python
# sdist (pinned), cached under ${SUPERINFER_CACHE:-~/.cache/superinfer}/llama.cpp.
# llama.cpp is the speed baseline and the oracle only; superinfer never links it.
#
#   benches/build-llama-cpp.sh         # prints the bin directory
#   benches/build-llama-cpp.sh avx2    # a second build limited to AVX2 (no AVX-512, no
#                                      # AVX-VNNI): the baseline for `compare.py --isa avx2`,
#                                      # which stands in for an AVX2-only CPU such as Zen 3
set -euo pipefail
VARIANT="${1:-native}"

VERSION=0.3.36
CACHE="${SUPERINFER_CACHE:-$HOME/.cache/superinfer}/llama.cpp"
SRC="$CACHE/llama_cpp_python-$VERSION/vendor/llama.cpp"
case "$VARIANT" in
  native) BUILD="$SRC/build"; ISA_FLAGS=(-DGGML_NATIVE=ON) ;;
  avx2) BUILD="$SRC/build-avx2"
    ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
      -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF
      -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_BF16=OFF) ;;
  *) echo "usage: $0 [native|avx2]" >&2; exit 2 ;;
esac
BIN="$BUILD/bin"
TOOLS=(llama-bench llama-perplexity llama-quantize llama-tokenize)

have_all() { for t in "${TOOLS[@]}"; do [ -x "$BIN/$t" ] || return 1; done; }
if have_all; then echo "$BIN"; exit 0; fi

need_pkgs=()
command -v cmake >/dev/null || need_pkgs+=(cmake)
command -v ninja >/dev/null || need_pkgs+=(ninja-build)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "installing ${need_pkgs[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >&2
fi

mkdir -p "$CACHE"
if [ ! -d "$SRC" ]; then
  # --no-build-isolation: pip must not build cmake from source just to read the sdist's metadata
  python3 -m pip install --quiet --disable-pip-version-check scikit-build-core >&2
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-build-isolation \
    --no-binary llama-cpp-python -d "$CACHE" "llama-cpp-python==$VERSION" >&2
  tar -xzf "$CACHE/llama_cpp_python-$VERSION.tar.gz" -C "$CACHE"
fi

cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  "${ISA_FLAGS[@]}" -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON >&2
cmake --build "$BUILD" --target "${TOOLS[@]}" -j "$(nproc)" >&2
have_all || { echo "error: llama.cpp build did not produce ${TOOLS[*]}" >&2; exit 1; }
echo "$BIN"
