#!/usr/bin/env bash
# The whole test suite: fetches the real models if missing (cached), then runs every test of
# the workspace, real-model fixture tests included (built with optimizations, see
# [profile.test] in Cargo.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh qwen2.5-0.5b gemma3-270m >/dev/null
cargo test --workspace "$@"
