#!/usr/bin/env bash
# Cross-ISA kernel parity: runs superinfer-core's kernel tests (`kernels::`) on targets this
# machine cannot run natively, and fails unless each ISA's parity test really ran and passed:
#   aarch64  under qemu-user, twice: CPU `max` (NEON + dotprod: the SDOT kernels, and the
#            interleaved-weight kernels, which need SDOT: `interleaved_parity_neon` must run
#            there too) and `cortex-a53` (ARMv8.0, NEON only: the widening-multiply kernels;
#            the table has no interleaved kernels and that test says it skipped);
#   wasm32   wasip1 built with simd128, under Node's WASI (scripts/wasi-runner.mjs), twice:
#            simd128 alone and simd128 + relaxed-simd (Node 20 runs relaxed-simd behind
#            --experimental-wasm-relaxed-simd); both must run the row kernels' parity test
#            (`rows_parity_simd128`: the kernels of several rows and tokens, bit for bit).
# Installs what it needs when missing (apt packages, rustup targets). Builds go to
# target-cross/ so they never disturb the native target/ directory.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CARGO_TARGET_DIR="$root/target-cross"
# host-specific flags (e.g. -C target-cpu=native) must not leak into the cross builds
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS

# ---- prerequisites ----

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo=sudo
fi
missing=()
command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
[ -e /usr/aarch64-linux-gnu/lib/libc.so ] || missing+=(libc6-dev-arm64-cross)
if [ ${#missing[@]} -gt 0 ]; then
    echo "test-cross: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
for target in aarch64-unknown-linux-gnu wasm32-wasip1; do
    if ! rustup target list --installed | grep -qx "$target"; then
        rustup target add "$target"
    fi
done
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
    echo "test-cross: Node >= 20 is required for WASI preview1 (found: $(node --version 2>/dev/null || echo none))" >&2
    exit 1
fi

# ---- runs ----

failures=0

# run_parity LABEL ISA X8 CARGO_ARGS... : runs the tests, then checks that parity_ISA ran,
# passed and was not skipped; with X8=x8, interleaved_parity_ISA too (the interleaved-weight
# kernels; it asserts the table has them for every interleaved format); with X8=rows,
# rows_parity_ISA, f16_ops_parity_ISA and the flash tiles' test (every ISA's tile against
# the scalar one) instead.
# all_ran LOG TEST... : every named test ran (called once the run passed; a test's own
# SKIPPED lines for other ISAs may come between its name and its "ok")
all_ran() {
    local log=$1 t
    shift
    for t in "$@"; do
        grep -q "^test $t \.\.\. " "$log" || return 1
    done
}

run_parity() {
    local label=$1 isa=$2 x8=$3
    shift 3
    local log start status=0
    log=$(mktemp)
    start=$SECONDS
    echo "== $label"
    "$@" 2>&1 | tee "$log" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "test-cross: $label: tests failed (exit $status)" >&2
        failures=$((failures + 1))
    elif grep -q "SKIPPED $isa " "$log"; then
        echo "test-cross: $label: parity_$isa was SKIPPED" >&2
        failures=$((failures + 1))
    elif ! grep -q "^test kernels::tests::parity_$isa \.\.\. ok$" "$log"; then
        echo "test-cross: $label: parity_$isa did not run" >&2
        failures=$((failures + 1))
    elif [ "$x8" = x8 ] && grep -q "SKIPPED interleaved $isa " "$log"; then
        echo "test-cross: $label: interleaved_parity_$isa was SKIPPED" >&2
        failures=$((failures + 1))
    elif [ "$x8" = x8 ] &&
        ! grep -q "^test kernels::tests::interleaved::interleaved_parity_$isa \.\.\. ok$" "$log"; then
        echo "test-cross: $label: interleaved_parity_$isa did not run" >&2
        failures=$((failures + 1))
    elif [ "$x8" = rows ] && ! all_ran "$log" "kernels::tests::rows::rows_parity_$isa" \
        "kernels::tests::f16_ops_parity_$isa" \
        "ops::attention::tests::flash_tiles_match_naive_attention_on_every_isa"; then
        echo "test-cross: $label: the row kernels', f16 rows' or flash tile's parity did not run" >&2
        failures=$((failures + 1))
    else
        echo "test-cross: $label: ok ($((SECONDS - start))s)"
    fi
    rm -f "$log"
}

qemu="qemu-aarch64 -L /usr/aarch64-linux-gnu"
# the interleaved kernels need dotprod: required under `max`, absent under `cortex-a53`.
# SUPERINFER_REQUIRE_ISAS makes a test of a required ISA (or feature) fail where it would
# say SKIPPED (core's kernel tests; qemu-user and Node's WASI pass the environment on).
for cpu_x8 in max:x8 cortex-a53:-; do
    cpu=${cpu_x8%:*}
    require=neon
    [ "${cpu_x8#*:}" = x8 ] && require=neon,dotprod
    SUPERINFER_REQUIRE_ISAS=$require \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$qemu -cpu $cpu" \
        run_parity "aarch64 (qemu -cpu $cpu)" neon "${cpu_x8#*:}" \
        cargo test -p superinfer-core --lib --target aarch64-unknown-linux-gnu \
        -- kernels:: --nocapture
done

# the relaxed build goes to its own directory: its flags differ, and sharing one would rebuild
# everything on each switch
for features in simd128 simd128,+relaxed-simd; do
    node_flags="--no-warnings"
    dir="$root/target-cross"
    if [[ "$features" == *relaxed-simd* ]]; then
        node_flags+=" --experimental-wasm-relaxed-simd"
        dir="$root/target-cross/relaxed"
    fi
    SUPERINFER_REQUIRE_ISAS=simd128 \
    CARGO_TARGET_DIR="$dir" RUSTFLAGS="-C target-feature=+$features" \
    CARGO_TARGET_WASM32_WASIP1_RUNNER="node $node_flags $root/scripts/wasi-runner.mjs" \
        run_parity "wasm32-wasip1 +$features (node $(node --version))" simd128 rows \
        cargo test -p superinfer-core --lib --target wasm32-wasip1 \
        -- kernels:: ops::attention:: --nocapture --test-threads=1
done

if [ "$failures" -ne 0 ]; then
    echo "test-cross: $failures run(s) failed" >&2
    exit 1
fi
echo "test-cross: all runs passed in ${SECONDS}s"
