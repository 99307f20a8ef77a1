#!/usr/bin/env bash
# The edge firmware (edge/, issue 20) under QEMU: superinfer-core generating on bare metal.
#
#   scripts/test-edge.sh
#
# 1. installs what it needs when missing: qemu-system-arm / qemu-system-misc (Debian 12's 7.2,
#    installed together with qemu-utils pinned to the same version: a newer preinstalled
#    qemu-utils otherwise breaks qemu-system-common) and the two rustup targets;
# 2. writes the tiny model (llama, Q8_0, Qwen2.5's first 1024 tokens) twice and checks that
#    the two files are identical (the writer is deterministic);
# 3. builds the firmware for thumbv7em-none-eabihf (QEMU mps2-an386, Cortex-M4F) and
#    riscv32imac-unknown-none-elf (QEMU virt), the tiny model embedded;
# 4. runs both under QEMU with -icount and checks, against the host running the same
#    superinfer_core::generate path (edge/host, scalar kernels): the prompt's and the
#    generated token ids; against the native CLI (`superinfer run --isa scalar`): the text;
#    the heap high-water mark <= KV cache + scratch + 80 KiB; no allocation after the first
#    generated token;
# 5. runs Gemma-3-270M Q4_K_M on riscv32 (virt -m 512M, the file placed in RAM by QEMU's
#    -device loader) and checks its token ids and text the same way;
# 6. bad arguments (a context over the trained one, an unknown flag), then a model with a
#    flipped magic (Cortex-M) and a truncated one (RISC-V) embedded: each must print a clear
#    error over semihosting and exit non-zero.
# Prints per target: firmware size without the model (text + rodata), heap high-water mark,
# allocations per generated token and instructions per token (QEMU -icount; a regression
# figure, not a speed claim). Exits non-zero on any mismatch.
#
# Expects the models of scripts/fetch-models.sh (fetched when missing) and runs
# $SUPERINFER_BIN, else target/release/superinfer (built when it is not there).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
edge=$root/edge
out=$edge/target/test-edge
mkdir -p "$out"
# host-specific flags (e.g. -C target-cpu=native) must not leak into the firmware builds
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS
export CARGO_TERM_COLOR=never

PROMPT="Once upon a time"
N_TINY=24
N_GEMMA=8
CTX_GEMMA=64
# (80 KiB since session 22: the tokenizer keeps a hash index of its vocabulary, 7 KB on the tiny model)
SLACK=$((80 * 1024))

# ---- prerequisites ----

sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
if ! command -v qemu-system-arm >/dev/null || ! command -v qemu-system-riscv32 >/dev/null; then
    echo "test-edge: installing qemu-system-arm qemu-system-misc"
    $sudo apt-get update -qq
    version=$(apt-cache madison qemu-system-common | awk 'NR == 1 { print $3 }')
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
        --allow-downgrades qemu-system-arm qemu-system-misc "qemu-utils=$version" >/dev/null
fi
for target in thumbv7em-none-eabihf riscv32imac-unknown-none-elf; do
    if ! rustup target list --installed | grep -qx "$target"; then
        rustup target add "$target"
    fi
done
qwen=$(scripts/fetch-models.sh --path qwen2.5-0.5b)
gemma=$(scripts/fetch-models.sh --path gemma3-270m)
# the host binary: SUPERINFER_BIN when set (CI: the test profile's build of scripts/test.sh)
cli=${SUPERINFER_BIN:-$root/target/release/superinfer}
[ -x "$cli" ] || cargo build -q --release -p superinfer-cli

failures=0
fail() {
    echo "test-edge: FAIL: $*" >&2
    failures=$((failures + 1))
}

# ---- the tiny model and the builds ----

echo "== host tools (edge/host)"
cargo build -q --release --manifest-path edge/Cargo.toml -p superinfer-edge-host
host=$edge/target/release/superinfer-edge-host
tiny=$edge/target/tiny-model/tiny.gguf
"$host" tiny-model --vocab-from "$qwen" -o "$tiny"
"$host" tiny-model --vocab-from "$qwen" -o "$out/tiny-again.gguf" >/dev/null
cmp -s "$tiny" "$out/tiny-again.gguf" || fail "the tiny model writer is not deterministic"
model_bytes=$(stat -c %s "$tiny")

echo "== firmware"
build_firmware() { # DIR MODEL
    (cd "$edge/$1" && EDGE_MODEL=$2 cargo build -q --release)
}
build_firmware cortex-m "$tiny"
build_firmware riscv "$tiny"
fw_arm=$edge/target/thumbv7em-none-eabihf/release/edge-cortex-m
fw_rv=$edge/target/riscv32imac-unknown-none-elf/release/edge-riscv
cp "$fw_arm" "$out/edge-cortex-m.elf"
cp "$fw_rv" "$out/edge-riscv.elf"

# the machines (-icount shift=0: one instruction is one nanosecond of virtual time); then
# -kernel ELF and -append "ARGUMENTS" (the firmware reads them over semihosting)
qemu_arm=(qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none
    -semihosting-config enable=on,target=native -icount shift=0)
qemu_rv=(qemu-system-riscv32 -M virt -m 512M -bios none -nographic -monitor none -serial none
    -semihosting-config enable=on,target=native -icount shift=0)

# ---- checks ----

field() { sed -n "s/^edge: $1 //p" "$2"; }
# the streamed text: between the plan line and the ids (the firmware ends it with a newline)
firmware_text() { awk '/^edge: plan:/ { on = 1; next } /^edge: prompt_ids/ { on = 0 } on' "$1"; }
same_text() { # A B: equal up to trailing newlines
    python3 - "$1" "$2" <<'EOF'
import sys
a, b = (open(p, encoding="utf-8", errors="replace").read().rstrip("\n") for p in sys.argv[1:])
sys.exit(0 if a == b else 1)
EOF
}

# check LABEL LOG HOST_LOG CLI_TEXT BUDGET_CHECK(yes|no)
check() {
    local label=$1 log=$2 ref=$3 cli_text=$4 budget=$5
    for f in prompt_ids generated_ids; do
        if [ -z "$(field $f "$log")" ]; then
            fail "$label: no $f in the firmware's output (see $log)"
        elif [ "$(field $f "$log")" != "$(field $f "$ref")" ]; then
            fail "$label: $f differ: firmware '$(field $f "$log")', host '$(field $f "$ref")'"
        fi
    done
    firmware_text "$log" >"$log.text"
    same_text "$log.text" "$cli_text" ||
        fail "$label: text differs from superinfer run --isa scalar: '$(cat "$log.text")' vs '$(cat "$cli_text")'"
    local after over counted
    # the instruction counter against a 2,000,000-instruction loop (SysTick ticks are 40)
    counted=$(sed -n 's/^edge: counter check: a 2000000-instruction loop counted as \([0-9]*\)$/\1/p' "$log")
    if [ -z "$counted" ] || [ $((counted - 2000000)) -lt -64 ] || [ $((counted - 2000000)) -gt 64 ]; then
        fail "$label: the instruction counter is off: a 2000000-instruction loop counted as ${counted:-?}"
    fi
    after=$(sed -n 's/^edge: allocations: .*, \([0-9]*\) in the [0-9]* tokens after it$/\1/p' "$log")
    [ "$after" = 0 ] || fail "$label: ${after:-?} allocations after the first generated token (want 0)"
    over=$(sed -n 's/^edge: heap high-water .* + \(-\{0,1\}[0-9]*\) bytes$/\1/p' "$log")
    if [ "$budget" = yes ] && { [ -z "$over" ] || [ "$over" -gt "$SLACK" ]; }; then
        fail "$label: heap high-water exceeds KV cache + scratch + $((SLACK / 1024)) KiB by $((${over:-0} - SLACK)) bytes"
    fi
}

# size ELF MODEL_BYTES: text + rodata without the embedded model
fw_size() {
    size -A "$1" | awk -v m="$2" '$1 == ".text" || $1 == ".rodata" || $1 == ".vector_table" || $1 == ".init.rust" { s += $2 }
        END { printf "%d bytes (text + rodata, the %d-byte model excluded)", s - m, m }'
}

summary=()
summarize() { # LABEL LOG ELF MODEL_BYTES
    summary+=("$1: firmware $(fw_size "$3" "$4")"
        "$1: $(sed -n 's/^edge: heap high-water /heap high-water /p' "$2")"
        "$1: $(sed -n 's/^edge: allocations: /allocations: /p' "$2")"
        "$1: $(sed -n 's/^edge: instructions: /instructions: /p' "$2")")
}

run_timed() { # LOG CMD...: runs, keeps stdout+stderr, returns the exit code
    local log=$1 start=$SECONDS status=0
    shift
    "$@" >"$log" 2>&1 || status=$?
    echo "   exit $status, $((SECONDS - start)) s"
    return $status
}

echo "== host reference (tiny model, scalar, greedy)"
"$host" run -m "$tiny" -p "$PROMPT" -n $N_TINY -c 256 >"$out/host-tiny.txt"
"$cli" run -m "$tiny" -p "$PROMPT" -n $N_TINY -c 256 --temp 0 --isa scalar -t 1 \
    >"$out/cli-tiny.txt" 2>/dev/null

echo "== cortex-m4f (qemu-system-arm -M mps2-an386), tiny model"
run_timed "$out/arm-tiny.txt" "${qemu_arm[@]}" -kernel "$out/edge-cortex-m.elf" -append "-n $N_TINY -c 256 -p $PROMPT" ||
    fail "cortex-m tiny: exit code $?: $(tail -3 "$out/arm-tiny.txt")"
check "cortex-m tiny" "$out/arm-tiny.txt" "$out/host-tiny.txt" "$out/cli-tiny.txt" yes
summarize "cortex-m4f tiny" "$out/arm-tiny.txt" "$out/edge-cortex-m.elf" "$model_bytes"

echo "== rv32imac (qemu-system-riscv32 -M virt), tiny model"
run_timed "$out/rv-tiny.txt" "${qemu_rv[@]}" -kernel "$out/edge-riscv.elf" -append "-n $N_TINY -c 256 -p $PROMPT" ||
    fail "riscv tiny: exit code $?: $(tail -3 "$out/rv-tiny.txt")"
check "riscv tiny" "$out/rv-tiny.txt" "$out/host-tiny.txt" "$out/cli-tiny.txt" yes
summarize "rv32imac tiny" "$out/rv-tiny.txt" "$out/edge-riscv.elf" "$model_bytes"

echo "== rv32imac, Gemma-3-270M Q4_K_M placed at 0x90000000 by -device loader"
gemma_bytes=$(stat -c %s "$gemma")
"$host" run -m "$gemma" -p "$PROMPT" -n $N_GEMMA -c $CTX_GEMMA >"$out/host-gemma.txt"
"$cli" run -m "$gemma" -p "$PROMPT" -n $N_GEMMA -c $CTX_GEMMA --temp 0 --isa scalar -t 1 \
    >"$out/cli-gemma.txt" 2>/dev/null
run_timed "$out/rv-gemma.txt" "${qemu_rv[@]}" -kernel "$out/edge-riscv.elf" \
    -device "loader,file=$gemma,addr=0x90000000,force-raw=on" \
    -append "-n $N_GEMMA -c $CTX_GEMMA --model-at 0x90000000 --model-len $gemma_bytes -p $PROMPT" ||
    fail "riscv gemma: exit code $?: $(tail -3 "$out/rv-gemma.txt")"
check "riscv gemma" "$out/rv-gemma.txt" "$out/host-gemma.txt" "$out/cli-gemma.txt" no
summarize "rv32imac gemma-3-270m" "$out/rv-gemma.txt" "$out/edge-riscv.elf" "$model_bytes"

echo "== bad arguments: a clear error and a non-zero exit"
expect_fail() { # LABEL LOG PATTERN CMD...
    local label=$1 log=$2 pattern=$3 status=0
    shift 3
    timeout 120 "$@" >"$log" 2>&1 || status=$?
    if [ "$status" -eq 0 ] || [ "$status" -eq 124 ]; then
        fail "$label: exit $status (want a non-zero exit, not a hang)"
    elif ! grep -q "^edge: error: .*$pattern" "$log"; then
        fail "$label: no clear error: $(cat "$log")"
    else
        echo "   $label: exit $status: $(grep '^edge: error' "$log")"
    fi
}
expect_fail "riscv context over the trained one" "$out/rv-ctx.txt" "exceeds the model's trained context" \
    "${qemu_rv[@]}" -kernel "$out/edge-riscv.elf" -append "-c 4096 -p hi"
expect_fail "cortex-m unknown argument" "$out/arm-arg.txt" "unknown argument '--tokens'" \
    "${qemu_arm[@]}" -kernel "$out/edge-cortex-m.elf" -append "--tokens 3"

echo "== corrupt embedded models: a clear error and a non-zero exit"
python3 - "$tiny" "$out/bad-magic.gguf" "$out/truncated.gguf" <<'EOF'
import sys
data = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(b"GGUX" + data[4:])      # the magic flipped
open(sys.argv[3], "wb").write(data[: len(data) // 2])  # cut in the middle of the tensors
EOF
build_firmware cortex-m "$out/bad-magic.gguf"
build_firmware riscv "$out/truncated.gguf"
expect_fail "cortex-m flipped magic" "$out/arm-bad.txt" \
    "cannot load the embedded model: not a GGUF file" "${qemu_arm[@]}" -kernel "$fw_arm"
expect_fail "riscv truncated" "$out/rv-bad.txt" \
    "cannot load the embedded model: corrupt GGUF: .* lies outside the file" \
    "${qemu_rv[@]}" -kernel "$fw_rv"

echo
echo "== figures (QEMU 7.2 TCG with -icount shift=0: instructions, not time)"
for line in "${summary[@]}"; do echo "   $line"; done
if [ "$failures" -ne 0 ]; then
    echo "test-edge: $failures check(s) failed (logs in $out)" >&2
    exit 1
fi
echo "test-edge: all checks passed in ${SECONDS}s"
