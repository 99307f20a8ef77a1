#!/usr/bin/env bash
# The whole test suite: fetches the real models if missing (cached), then runs every test of
# the workspace, real-model fixture tests included (built with optimizations, see
# [profile.test] in Cargo.toml), then the doc examples. Ends with one "tests: N passed, N failed"
# line counting both.
set -euo pipefail
cd "$(dirname "$0")/.."
# Qwen2.5-Coder-1.5B: the speculative decoding test (tests/tests/speculative.rs) drafts it with 0.5B
scripts/fetch-models.sh qwen2.5-0.5b gemma3-270m qwen2.5-1.5b minilm >/dev/null
# llama.cpp's tokenizer test suite (tests/tests/vocab_suite.rs): vocab-only files from the sdist
scripts/fetch-vocabs.sh >/dev/null
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --lib --bins --tests "$@" 2>&1 | tee "$log" || status=$?
# the doc examples (`no_run` ones are compiled, not run): a separate cargo call, since
# `--doc` cannot be combined with the target selection above
cargo test --workspace --doc "$@" 2>&1 | tee -a "$log" || status=$?
# sum cargo's per-binary "test result:" lines into one closing line
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit $status
