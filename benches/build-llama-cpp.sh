#!/usr/bin/env bash
# Build llama.cpp's benchmark tools and llama-server from the sources vendored in the
# llama-cpp-python sdist (pinned), cached under ${SUPERINFER_CACHE:-~/.cache/superinfer}/llama.cpp.
# llama.cpp is the speed baseline and the oracle only; superinfer never links it.
# llama-speculative and llama-lookup are examples (LLAMA_BUILD_EXAMPLES=ON; only those two of
# them are built): the baselines of benches/spec.py.
# llama-server is built without its web UI (no npm, no download of prebuilt assets) and
# without OpenSSL: it only serves the HTTP API on loopback (benches/serve_load.py --compare).
#
#   benches/build-llama-cpp.sh         # prints the bin directory
#   benches/build-llama-cpp.sh avx2    # a second build limited to AVX2 (no AVX-512, no
#                                      # AVX-VNNI): the baseline for `compare.py --isa avx2`,
#                                      # which stands in for an AVX2-only CPU such as Zen 3
#   benches/build-llama-cpp.sh avx-vnni  # AVX2 + AVX-VNNI, no AVX-512: `--isa avx-vnni`'s
#                                      # baseline, a stand-in for a laptop (Alder Lake and on)
#   benches/build-llama-cpp.sh amx-probe  # only say whether this process may use AMX
#
# AMX: a VM can show amx_tile/amx_int8 in /proc/cpuinfo while its kernel does not let a
# process use the tile registers (XCR0 without bits 17/18, or arch_prctl(ARCH_REQ_XCOMP_PERM,
# XFEATURE_XTILEDATA) refused); llama.cpp's -march=native build then dies with SIGILL in
# prompt processing. In that case the native build is made with -mno-amx-* on top of
# -march=native. The cmake options a build was configured with are kept in its
# superinfer-config stamp: a cached build whose options differ (or that has no stamp) is
# reconfigured and rebuilt.
set -euo pipefail
VARIANT="${1:-native}"

VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
CACHE="${SUPERINFER_CACHE:-$HOME/.cache/superinfer}/llama.cpp"
SRC="$CACHE/llama_cpp_python-$VERSION/vendor/llama.cpp"

# Prints what it found on stdout; exit status 0 when AMX is usable by this process.
amx_probe() {
  local dir rc=0
  dir=$(mktemp -d)
  cat >"$dir/amx-probe.c" <<'C'
#include <cpuid.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) {
        printf("no OSXSAVE, XCR0 unreadable");
        return 1;
    }
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    int cfg = (lo >> 17) & 1, data = (lo >> 18) & 1;
    long r = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */);
    int err = errno;
    printf("XCR0=0x%x: XTILECFG (bit 17) %s, XTILEDATA (bit 18) %s; "
           "arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) ",
           lo, cfg ? "on" : "off", data ? "on" : "off");
    if (r == 0) printf("granted");
    else printf("refused: %s", strerror(err));
    return cfg && data && r == 0 ? 0 : 1;
}
C
  if gcc -O1 "$dir/amx-probe.c" -o "$dir/amx-probe" 2>"$dir/cc.log"; then
    "$dir/amx-probe" || rc=$?
  else
    printf 'the probe did not compile: %s' "$(tr '\n' ' ' <"$dir/cc.log")"; rc=2
  fi
  rm -rf "$dir"
  return "$rc"
}

amx_flagged() { grep -qE '^flags.*\bamx_(tile|int8)\b' /proc/cpuinfo 2>/dev/null; }

EXTRA_FLAGS=""
case "$VARIANT" in
  amx-probe)
    amx_flagged && echo "cpuinfo: AMX flagged" >&2 || echo "cpuinfo: AMX not flagged" >&2
    rc=0; amx_probe || rc=$?; echo; exit "$rc" ;;
  native) BUILD="$SRC/build"; ISA_FLAGS=(-DGGML_NATIVE=ON)
    if amx_flagged; then
      # the probe passing is not enough: on a KVM Sapphire Rapids guest (2026-11-28) it passed
      # and ggml's AMX kernels still trapped (SIGILL on tilezero in its threads), so AMX is
      # left out wherever the CPU flags it (llama.cpp's AVX-512 VNNI kernels run instead)
      rc=0; why=$(amx_probe) || rc=$?
      [ "$rc" = 0 ] && why="the probe passes, but ggml's AMX kernels may still trap in a guest"
      echo "AMX is flagged by the CPU ($why); building llama.cpp without AMX" >&2
      EXTRA_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    fi ;;
  avx2) BUILD="$SRC/build-avx2"
    ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
      -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF
      -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_BF16=OFF) ;;
  avx-vnni) BUILD="$SRC/build-avx-vnni"
    ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
      -DGGML_BMI2=ON -DGGML_AVX_VNNI=ON -DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF
      -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_BF16=OFF) ;;
  *) echo "usage: $0 [native|avx2|avx-vnni|amx-probe]" >&2; exit 2 ;;
esac
BIN="$BUILD/bin"
TOOLS=(llama-bench llama-batched-bench llama-perplexity llama-quantize llama-tokenize llama-server
  llama-speculative llama-lookup)
# C/CXX flags are always passed (empty or not) so a reconfigure drops earlier ones
CMAKE_ARGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release "${ISA_FLAGS[@]}"
  "-DCMAKE_C_FLAGS=$EXTRA_FLAGS" "-DCMAKE_CXX_FLAGS=$EXTRA_FLAGS"
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF)
STAMP="$BUILD/superinfer-config"
CONFIG="${CMAKE_ARGS[*]}"

have_all() { for t in "${TOOLS[@]}"; do [ -x "$BIN/$t" ] || return 1; done; }
if have_all && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$CONFIG" ]; then echo "$BIN"; exit 0; fi

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
  if [ ! -f "$CACHE/llama_cpp_python-$VERSION.tar.gz" ]; then
    "$(dirname "$0")/../scripts/fetch-sdist.py" llama-cpp-python "$VERSION" "$SHA256" "$CACHE" >&2
  fi
  tar -xzf "$CACHE/llama_cpp_python-$VERSION.tar.gz" -C "$CACHE"
fi

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" != "$CONFIG" ]; then
  echo "llama.cpp build in $BUILD was configured differently; reconfiguring and rebuilding" >&2
fi
rm -f "$STAMP"
cmake -S "$SRC" -B "$BUILD" "${CMAKE_ARGS[@]}" >&2
# a changed configuration (e.g. the -mno-amx-* flags) rebuilds everything; an unchanged
# one only builds what is missing
cmake --build "$BUILD" --target "${TOOLS[@]}" -j "$(nproc)" >&2
have_all || { echo "error: llama.cpp build did not produce ${TOOLS[*]}" >&2; exit 1; }
printf '%s' "$CONFIG" >"$STAMP"
echo "$BIN"
