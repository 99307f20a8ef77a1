"""Robustness under abuse: a thousand malformed requests among valid streams, streams cut
mid-generation, and more concurrent requests than slots."""

from __future__ import annotations

import json
import random
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from serverlib import N_CTX, N_PARALLEL, Server, assert_error_body, raw_request, sse_events

N_BAD = 1000
N_VALID_STREAMS = 16
WORKERS = 8
BUDGET_S = 240  # the flood stops (and fails) past this, whatever the server does


def bad_requests(model: str, long_prompt: str) -> list[tuple[str, str, str, bytes, dict, int]]:
    """(kind, method, path, body, headers, expected status) for every kind of mistake."""
    def j(obj) -> bytes:
        return json.dumps(obj).encode()

    msgs = [{"role": "user", "content": "Hi"}]
    valid = j({"model": model, "messages": msgs, "max_tokens": 4})
    chat, comp = "/v1/chat/completions", "/v1/completions"
    return [
        ("bad json", "POST", chat, b'{"model": "m", "messages": [}', {}, 400),
        ("truncated json", "POST", chat, valid[: len(valid) // 2], {}, 400),
        ("not json", "POST", comp, b"prompt=hello&max_tokens=3", {}, 400),
        ("wrong content-type", "POST", chat, valid, {"Content-Type": "text/plain"}, None),
        ("wrong type", "POST", chat, j({"model": model, "messages": msgs, "temperature": "hot"}), {}, 400),
        ("wrong type (messages)", "POST", chat, j({"model": model, "messages": {"role": "user"}}), {}, 400),
        ("missing messages", "POST", chat, j({"model": model, "max_tokens": 4}), {}, 400),
        ("missing prompt", "POST", comp, j({"model": model, "max_tokens": 4}), {}, 400),
        ("empty messages", "POST", chat, j({"model": model, "messages": []}), {}, 400),
        ("unknown role", "POST", chat, j({"model": model, "messages": [{"role": "oracle", "content": "x"}]}), {}, 400),
        ("negative max_tokens", "POST", comp, j({"model": model, "prompt": "x", "max_tokens": -5}), {}, 400),
        ("top_p out of range", "POST", chat, j({"model": model, "messages": msgs, "top_p": 2}), {}, 400),
        ("n=2", "POST", chat, j({"model": model, "messages": msgs, "n": 2}), {}, 400),
        ("unknown model", "POST", chat, j({"model": "no-such-model", "messages": msgs}), {}, 404),
        ("wrong method", "GET", chat, b"", {}, 405),
        ("wrong method (DELETE)", "DELETE", "/v1/models", b"", {}, 405),
        ("unknown route", "POST", "/v1/nope", valid, {}, 404),
        ("prompt over context", "POST", comp, j({"model": model, "prompt": long_prompt, "max_tokens": 4}), {}, 400),
    ]


def over_limit(model: str) -> tuple[str, str, str, bytes, dict, int]:
    body = json.dumps({"model": model, "prompt": "x" * (4 * 1024 * 1024 + 100), "max_tokens": 1}).encode()
    return ("body over the limit", "POST", "/v1/completions", body, {}, 413)


def valid_stream(server: Server, model: str, i: int) -> str | None:
    """A valid streamed completion; None when it completed properly, else what went wrong."""
    body = {"model": model, "prompt": f"Request {i}: count to ten.", "max_tokens": 8, "stream": True,
            "temperature": 0.7, "seed": i, "ignore_eos": True}
    try:
        with httpx.stream("POST", server.url("/v1/completions"), json=body, timeout=120) as r:
            if r.status_code != 200:
                return f"valid stream {i}: status {r.status_code}: {r.read()[:200]!r}"
            events = sse_events(r.iter_lines())
    except (AssertionError, httpx.HTTPError) as e:
        return f"valid stream {i}: {e!r}"
    finishes = [e["choices"][0].get("finish_reason") for e in events if e.get("choices")]
    if "length" not in finishes:
        return f"valid stream {i}: no finish_reason 'length' in {finishes}"
    return None


def test_malformed_flood(server, model):
    long_prompt = "hello " * (N_CTX + 200)
    kinds = bad_requests(model, long_prompt)
    rng = random.Random(1234)
    jobs = []
    for i in range(N_BAD):
        if i % 40 == 39:
            jobs.append(("bad", over_limit(model)))  # 25 bodies of 4 MiB
        else:
            jobs.append(("bad", kinds[i % len(kinds)]))
    rng.shuffle(jobs)
    # valid streams spread through the flood, and /health checks
    for k in range(N_VALID_STREAMS):
        jobs.insert((k + 1) * len(jobs) // (N_VALID_STREAMS + 1), ("valid", k))
    for k in range(10):
        jobs.insert((k + 1) * len(jobs) // 11, ("health", k))

    deadline = time.monotonic() + BUDGET_S

    def run(job):
        what, arg = job
        if time.monotonic() > deadline:
            return f"not sent: the flood went over its {BUDGET_S} s budget"
        if what == "valid":
            return valid_stream(server, model, arg)
        if what == "health":
            r = httpx.get(server.url("/health"), timeout=30)
            return None if r.status_code == 200 else f"/health {r.status_code} {r.text[:200]}"
        kind, method, path, body, headers, want = arg
        try:
            r = raw_request(server.port, method, path, body, headers=headers, timeout=30)
        except (OSError, ConnectionError) as e:
            return f"{kind}: {method} {path}: {e!r}"
        ok = (r.status == want) if want is not None else (400 <= r.status < 500)
        if not ok:
            return f"{kind}: {method} {path}: status {r.status}, want {want or '4xx'}: {r.body[:200]!r}"
        try:
            assert_error_body(r.json(), what=kind)
        except (AssertionError, ValueError) as e:
            return f"{kind}: {method} {path}: {e}"
        return None

    # the 503s of /health while the model loaded are counted too: compare with before
    before = server.metrics().by_label("superinfer_requests_total", "status")
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        problems = [p for p in pool.map(run, jobs) if p]
    elapsed = time.monotonic() - t0
    assert not problems, f"{len(problems)} of {len(jobs)} requests went wrong ({elapsed:.1f} s), first ones:\n" + \
        "\n".join(problems[:15])
    assert httpx.get(server.url("/health"), timeout=10).status_code == 200
    after = server.metrics().by_label("superinfer_requests_total", "status")
    new = {s: n - before.get(s, 0) for s, n in after.items() if n != before.get(s, 0)}
    assert not [s for s in new if s.startswith("5")], f"5xx answers during the flood: {new}"


def wait_idle(server: Server, within: float) -> tuple[bool, dict]:
    deadline = time.monotonic() + within
    while True:
        m = server.metrics()
        state = {k: m.get(k) for k in ("superinfer_requests_running", "superinfer_requests_waiting",
                                       "superinfer_kv_blocks_used")}
        if all(v == 0 for v in state.values()):
            return True, state
        if time.monotonic() > deadline:
            return False, state
        time.sleep(0.02)


def cut_stream(server: Server, model: str, i: int, chunks: int) -> str | None:
    """Open a long stream, read `chunks` events, then drop the connection."""
    if i % 2:
        path, body = "/v1/chat/completions", {"messages": [{"role": "user", "content": f"Story {i}, please."}]}
    else:
        path, body = "/v1/completions", {"prompt": f"Story number {i}:"}
    body.update(model=model, max_tokens=500, stream=True, ignore_eos=True, temperature=0.8, seed=i)
    with httpx.Client(timeout=120) as client:
        with client.stream("POST", server.url(path), json=body) as r:
            if r.status_code != 200:
                return f"stream {i}: status {r.status_code}"
            seen = 0
            for line in r.iter_lines():
                if line.startswith("data: "):
                    if line == "data: [DONE]":
                        return f"stream {i}: finished before it was cut"
                    seen += 1
                    if seen >= chunks:
                        break
    return None  # leaving both `with` blocks closes the connection mid-stream


def test_cut_streams_free_everything(server, model):
    """50 streams dropped mid-generation: within a second nothing runs, waits or holds a
    KV block, and generation has stopped."""
    problems = []
    with ThreadPoolExecutor(max_workers=10) as pool:
        for wave in range(5):
            ids = range(wave * 10, wave * 10 + 10)
            problems += [p for p in pool.map(lambda i: cut_stream(server, model, i, 2 + i % 4), ids) if p]
    assert not problems, problems
    idle, state = wait_idle(server, within=1.0)
    assert idle, f"1 s after the last disconnect: {state}"
    gen = server.metrics().get("superinfer_generation_tokens_total")
    time.sleep(0.3)
    assert server.metrics().get("superinfer_generation_tokens_total") == gen, "still generating"
    # and the server still answers
    r = server.client().completions.create(model=model, prompt="Hello", max_tokens=2)
    assert r.choices[0].finish_reason in ("stop", "length")


def test_more_requests_than_slots(server, model):
    """32 concurrent requests on 8 slots all complete (the rest wait in the queue)."""
    n = 4 * N_PARALLEL
    client = server.client(max_retries=0)

    def one(i):
        if i % 2:
            r = client.chat.completions.create(model=model, max_tokens=6, temperature=0.5, seed=i,
                                               messages=[{"role": "user", "content": f"Say a word about {i}."}],
                                               extra_body={"ignore_eos": True})
        else:
            r = client.completions.create(model=model, prompt=f"{i} apples and", max_tokens=6,
                                          temperature=0.5, seed=i, extra_body={"ignore_eos": True})
        return r.choices[0].finish_reason, r.usage.completion_tokens

    with ThreadPoolExecutor(max_workers=n) as pool:
        results = list(pool.map(one, range(n)))
    assert results == [("length", 6)] * n, results
    idle, state = wait_idle(server, within=1.0)
    assert idle, state
