#!/usr/bin/env bash
# The npm package (wasm/) end to end: builds it (wasm/build.sh), packs it, installs the
# tarball into a temporary project, and runs its tests there with Node's test runner:
# the fixture prompts' greedy continuations on Gemma-3-270M and Qwen2.5-0.5B equal native
# `superinfer run` (target/release/superinfer, built first if missing), and every bad input
# gives its typed error; then headless Chromium (Debian's `chromium`, installed if missing,
# driven by playwright-core from npm, no browser download) on the demo page: a model loads,
# a reply streams, the Stop button ends it, a screenshot is saved (SUPERINFER_SCREENSHOT,
# default target/browser/demo.png). Prints node's `# pass N` / `# fail N` per part.
# Needs: rustup, node >= 20 and npm; the models (scripts/fetch-models.sh fetches them).
# SUPERINFER_SKIP_CHROMIUM=1 runs the Node part only.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
    echo "test-browser: Node >= 20 is required (found: $(node --version 2>/dev/null || echo none))" >&2
    exit 1
fi

models=$(scripts/fetch-models.sh qwen2.5-0.5b gemma3-270m)
export SUPERINFER_QWEN=$(awk '$1 == "qwen2.5-0.5b" {print $2}' <<<"$models")
export SUPERINFER_GEMMA=$(awk '$1 == "gemma3-270m" {print $2}' <<<"$models")
export SUPERINFER_FIXTURES=${SUPERINFER_FIXTURES:-$root/tests/fixtures}

# the native binary to compare against: SUPERINFER_BIN when set (CI: the test profile's build
# that scripts/test.sh made), else the release build, made when missing
export SUPERINFER_BIN=${SUPERINFER_BIN:-$root/target/release/superinfer}
if [ ! -x "$SUPERINFER_BIN" ]; then
    cargo build --release -p superinfer-cli
fi

PLAYWRIGHT_CORE=1.65.1
if [ "${SUPERINFER_SKIP_CHROMIUM:-0}" != 1 ] && ! command -v chromium >/dev/null; then
    sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi

tarball=$(wasm/build.sh --pack | tail -n 1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp wasm/js/test/*.mjs "$work/"
(
    cd "$work"
    npm init -y >/dev/null
    npm pkg set type=module >/dev/null
    npm install --no-audit --no-fund --silent "$tarball"
    echo "== the package in Node"
    node --test --test-concurrency=1 --test-reporter=tap errors.test.mjs threads.test.mjs variants.test.mjs split.test.mjs models.test.mjs moe.test.mjs structured.test.mjs
)
if [ "${SUPERINFER_SKIP_CHROMIUM:-0}" != 1 ]; then
    echo "== the demo page in headless Chromium ($(chromium --version 2>/dev/null | head -c 40))"
    mkdir -p target/browser
    export SUPERINFER_SCREENSHOT=${SUPERINFER_SCREENSHOT:-$root/target/browser/demo.png}
    export SUPERINFER_DEMO=$root/wasm/demo SUPERINFER_PKG=$work/node_modules/superinfer
    (
        cd "$work"
        npm install --no-audit --no-fund --silent "playwright-core@$PLAYWRIGHT_CORE"
        node --test --test-reporter=tap browser.test.mjs
    )
fi
