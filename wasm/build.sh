#!/usr/bin/env bash
# Builds the npm package into wasm/pkg/: the engine for wasm32-unknown-unknown (release) in
# each variant of the table below, the JS sources and types, package.json and README.md;
# with --pack, also `npm pack`s it (wasm/pkg/superinfer-VERSION.tgz, printed on the last line).
# Needs: rustup (the wasm32-unknown-unknown target and the rust-src component, which the
# threaded variant's -Z build-std compiles std from, are added if missing); npm for --pack.
#
# The variants (the JS loader picks one at run time, js/src/variants.js is written from this
# table):
#   superinfer          simd128, one thread: pages that are not cross-origin isolated.
#   superinfer-threads  simd128 + wasm threads (atomics, bulk memory, shared memory imported
#                       from JS), `Parallel` over Web Workers / worker_threads (src/threads.rs):
#                       cross-origin isolated pages and Node. std must be rebuilt with atomics
#                       (the prebuilt wasm32 std assumes one thread: its locks and
#                       thread_locals are no-ops), hence `-Z build-std=panic_abort,std`, on our
#                       stable toolchain through RUSTC_BOOTSTRAP=1:
#     RUSTC_BOOTSTRAP=1 RUSTFLAGS="-C target-feature=+simd128,+atomics,+bulk-memory,+mutable-globals
#       -C link-arg=--max-memory=4294967296 -C link-arg=--export=__stack_pointer" \
#       cargo build --release -p superinfer-wasm --target wasm32-unknown-unknown \
#       -Z build-std=panic_abort,std
#     (rustc itself passes --shared-memory --import-memory and exports __wasm_init_tls,
#     __tls_size, __tls_align and __tls_base when +atomics is on; --max-memory raises its
#     1 GiB default to wasm32's 4 GiB; __stack_pointer is exported so that each worker's
#     instance can be given its own stack before it runs any code: see src/threads.rs.)
#   superinfer-relaxed, superinfer-relaxed-threads
#                       the same two with +relaxed-simd: core's kernels/wasm32/relaxed.rs
#                       (#[cfg(target_feature = "relaxed-simd")]: Q4_0, Q5_0 and the k-quants
#                       through i16x8.relaxed_dot_i8x16_i7x16_s, the flash tile through
#                       f32x4.relaxed_madd). The loader takes a "relaxed" variant only where
#                       WebAssembly.validate accepts a relaxed-simd instruction (Chromium >= 114,
#                       Node >= 22; Node 20 with --experimental-wasm-relaxed-simd), the plain
#                       one of the same threading otherwise.
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd .. && pwd)
target_root="${SUPERINFER_WASM_TARGET_DIR:-$root/target/wasm}"

simd="+simd128"
threads="+simd128,+atomics,+bulk-memory,+mutable-globals"
thread_link="-C link-arg=--shared-memory -C link-arg=--import-memory -C link-arg=--max-memory=4294967296"
for sym in __stack_pointer __wasm_init_tls __tls_size __tls_align __tls_base; do
    thread_link+=" -C link-arg=--export=$sym"
done
# name | target features | extra rustflags | build-std (yes/no) | threads (yes/no)
variants=(
    "superinfer|$simd||no|no"
    "superinfer-threads|$threads|$thread_link|yes|yes"
    "superinfer-relaxed|$simd,+relaxed-simd||no|no"
    "superinfer-relaxed-threads|$threads,+relaxed-simd|$thread_link|yes|yes"
)
# SUPERINFER_WASM_VARIANTS="superinfer" builds only the named ones (a quick single-thread build)
only=" ${SUPERINFER_WASM_VARIANTS:-} "

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    rustup target add wasm32-unknown-unknown
fi
# host flags (e.g. -C target-cpu=native) must not reach the wasm build
unset CARGO_ENCODED_RUSTFLAGS

rm -rf pkg
mkdir -p pkg
listing=""
for row in "${variants[@]}"; do
    IFS='|' read -r name features extra build_std threaded <<<"$row"
    if [ "$only" != "  " ] && [[ "$only" != *" $name "* ]]; then
        continue
    fi
    # one target directory per variant: their flags differ, and cargo would rebuild everything
    # on each switch in a shared one
    export CARGO_TARGET_DIR="$target_root/$name"
    # getrandom (the grammar engine's hash seeds) from src/random.rs: wasm32-unknown-unknown
    # has no source of its own without JS bindings
    export RUSTFLAGS="-C target-feature=$features $extra --cfg getrandom_backend=\"custom\""
    args=(build --release -p superinfer-wasm --target wasm32-unknown-unknown)
    if [ "$build_std" = yes ]; then
        if ! rustup component list --installed | grep -q '^rust-src'; then
            rustup component add rust-src
        fi
        RUSTC_BOOTSTRAP=1 cargo "${args[@]}" -Z build-std=panic_abort,std
    else
        cargo "${args[@]}"
    fi
    cp "$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/superinfer_wasm.wasm" "pkg/$name.wasm"
    relaxed=false; [[ "$features" == *relaxed-simd* ]] && relaxed=true
    listing+="  { name: '$name', file: '$name.wasm', threads: $([ "$threaded" = yes ] && echo true || echo false), relaxedSimd: $relaxed },"$'\n'
    echo "wasm/pkg: $name.wasm $(stat -c %s "pkg/$name.wasm") bytes"
done
cp js/src/*.js js/src/*.d.ts js/package.json README.md ../LICENSE-MIT ../LICENSE-APACHE pkg/
{
    echo "// Written by wasm/build.sh from its table: the engine builds in this package."
    echo "export const VARIANTS = ["
    printf '%s' "$listing"
    echo "];"
} >pkg/variants.js
if [ "${1:-}" = "--pack" ]; then
    (cd pkg && npm pack --silent | tail -n 1 | sed "s|^|$PWD/|")
fi
