#!/usr/bin/env bash
# The Python suite of `superinfer serve` (tests/server): the official `openai` client and
# jinja2 (pinned in tests/server/requirements.txt) against servers the suite starts on free
# loopback ports, for both test models.
#
#   scripts/test-server.sh [PYTEST ARGS...]      e.g. -k stop, -x, --lf
#
# Installs the pinned packages, fetches the test models if missing, builds the release
# binary only if it is missing (CI has built it already), runs pytest -q and exits with
# pytest's status. Environment: SUPERINFER_BIN (default target/release/superinfer),
# SUPERINFER_TEST_MODELS (e.g. "qwen2.5-0.5b"; default both), SUPERINFER_TEST_THREADS (2).
set -euo pipefail
cd "$(dirname "$0")/.."

req=tests/server/requirements.txt
pip_install() { python3 -m pip install -q --disable-pip-version-check "$@" -r "$req"; }
if ! out=$(pip_install 2>&1); then
  if grep -q externally-managed-environment <<<"$out"; then
    pip_install --break-system-packages
  else
    printf '%s\n' "$out" >&2; exit 1
  fi
fi

scripts/fetch-models.sh qwen2.5-0.5b gemma3-270m >/dev/null

bin="${SUPERINFER_BIN:-target/release/superinfer}"
if [ ! -x "$bin" ]; then
  if [ -n "${SUPERINFER_BIN:-}" ]; then echo "error: SUPERINFER_BIN=$bin is not an executable" >&2; exit 1; fi
  echo "building $bin" >&2
  cargo build --release -p superinfer-cli
fi
if ! "$bin" serve --help >/dev/null 2>&1; then
  echo "error: $bin has no 'serve' command (rebuild it: cargo build --release -p superinfer-cli)" >&2
  exit 1
fi

status=0
python3 -m pytest -q -p no:cacheprovider tests/server "$@" || status=$?
exit $status
