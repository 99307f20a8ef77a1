"""Fixtures of the `superinfer serve` suite.

`server` is one `superinfer serve -np 8 -c 1024` per test model (session-scoped, both
models unless SUPERINFER_TEST_MODELS narrows them, e.g. "qwen2.5-0.5b"), on a free
loopback port, ready (GET /health == 200) before the first test that uses it and
stopped after the last. The binary is $SUPERINFER_BIN or target/release/superinfer.
"""

from __future__ import annotations

import os

import pytest

from serverlib import MODELS, N_CTX, N_PARALLEL, Server, start_server


def selected_models() -> list[str]:
    env = os.environ.get("SUPERINFER_TEST_MODELS")
    if not env:
        return MODELS
    names = [m.strip() for m in env.replace(",", " ").split()]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        raise pytest.UsageError(f"SUPERINFER_TEST_MODELS: unknown model(s) {unknown}, known {MODELS}")
    return names


@pytest.fixture(scope="session", params=selected_models())
def model(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def server(model):
    s = start_server(model, "-np", str(N_PARALLEL), "-c", str(N_CTX))
    yield s
    s.stop()


@pytest.fixture(scope="session")
def props(server) -> dict:
    return server.props()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failure, show the end of the server's output under the test's report."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for name in ("server", "auth_server"):
            s = item.funcargs.get(name) if hasattr(item, "funcargs") else None
            if isinstance(s, Server):
                rep.sections.append((f"{name} output (tail)", s.log(3000)))
