"""Operating the server: big /tokenize bodies do not stall the streams (tokenizing runs off
the async workers), SIGTERM drains (no new connections, running streams finish, exit 0),
a second signal or the shutdown timeout ends the running requests, and the request log
(`--log-format json`) has one line per request with its tokens.

Each test starts its own server (it stops it, or needs a larger body limit)."""

from __future__ import annotations

import json
import random
import signal
import socket
import statistics
import threading
import time
from dataclasses import dataclass, field

import httpx

from serverlib import HOST, Server, start_server


@dataclass
class StreamLog:
    """A streamed completion read on its own thread: when each chunk came, and how it ended."""

    chunks: list[float] = field(default_factory=list)  # time.monotonic() of each data chunk
    finishes: list[str] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)  # error events in the stream
    done_at: float | None = None  # when `data: [DONE]` came
    ended_at: float | None = None  # when the connection ended, however
    status: int | None = None
    failure: str | None = None
    got: threading.Event = field(default_factory=threading.Event)
    want: int = 0
    cancel: bool = False  # set to drop the connection at the next chunk

    def count_between(self, t0: float, t1: float) -> int:
        return sum(1 for t in self.chunks if t0 <= t <= t1)


def stream_completion(server: Server, model: str, max_tokens: int, wait_for: int) -> tuple[StreamLog, threading.Thread]:
    """Start a greedy streamed completion of `max_tokens` (ignore_eos) and return once
    `wait_for` chunks have arrived."""
    log = StreamLog(want=wait_for)
    body = {"model": model, "prompt": "Once upon a time,", "max_tokens": max_tokens, "stream": True,
            "temperature": 0, "ignore_eos": True}

    def read():
        try:
            with httpx.stream("POST", server.url("/v1/completions"), json=body, timeout=600) as r:
                log.status = r.status_code
                for line in r.iter_lines():
                    if log.cancel:
                        break
                    if not line.startswith("data: "):
                        continue
                    data = line[len("data: "):]
                    if data == "[DONE]":
                        log.done_at = time.monotonic()
                        continue
                    ev = json.loads(data)
                    if "error" in ev:
                        log.errors.append(ev)
                        continue
                    log.chunks.append(time.monotonic())
                    fr = ev["choices"][0].get("finish_reason")
                    if fr:
                        log.finishes.append(fr)
                    if len(log.chunks) >= log.want:
                        log.got.set()
        except (httpx.HTTPError, ValueError) as e:
            log.failure = repr(e)
        finally:
            log.ended_at = time.monotonic()
            log.got.set()

    t = threading.Thread(target=read, daemon=True)
    t.start()
    assert log.got.wait(300), "the stream's first chunks did not come"
    assert log.failure is None and log.status == 200, (log.status, log.failure)
    assert len(log.chunks) >= wait_for, f"the stream ended after {len(log.chunks)} chunks"
    return log, t


def words(n_bytes: int, seed: int) -> str:
    """Prose-like text of about n_bytes: words of varied length and case, punctuation."""
    rng = random.Random(seed)
    vocab = ["the", "model", "server", "token", "stream", "quickly", "Tokenization", "of",
             "large", "bodies", "must", "not", "stall", "every", "running", "request", "while",
             "it", "works,", "and", "then", "answers.", "1984", "x86_64", "naïve", "café",
             "über", "—", "(see", "below)", "\n", "def", "f(x):", "return", "x*2;"]
    out, size = [], 0
    while size < n_bytes:
        w = rng.choice(vocab)
        out.append(w)
        size += len(w.encode()) + 1
    return " ".join(out)


def tokenize_seconds(server: Server, text: str) -> float:
    t0 = time.monotonic()
    r = httpx.post(server.url("/tokenize"), json={"content": text}, timeout=600)
    assert r.status_code == 200, (r.status_code, r.text[:300])
    assert len(r.json()["tokens"]) > len(text) // 20
    return time.monotonic() - t0


def test_big_tokenize_does_not_stall_streams(model):
    """Two large /tokenize bodies at once (one per async worker) while a stream runs: the
    stream's chunks keep coming during the tokenizations. Before tokenizing moved to the
    blocking pool, both workers were busy tokenizing and the stream stopped until one was
    done. The bodies are sized from a measured tokenizing speed and a measured token
    interval, so the window is long on any machine; the check is that chunks arrive within
    it, not how fast."""
    s = start_server(model, "-np", "2", "-c", "4096", "--body-limit-mib", "128")
    try:
        # the tokenizer's speed here, alone
        sample = words(128 * 1024, seed=1)
        rate = len(sample) / max(tokenize_seconds(s, sample), 1e-3)  # bytes per second

        log, reader = stream_completion(s, model, max_tokens=3000, wait_for=12)
        gaps = [b - a for a, b in zip(log.chunks[4:12], log.chunks[5:12])]
        gap = statistics.median(gaps)
        # each tokenization should last 40 token intervals (and at least 2 s) alone
        want_s = max(40 * gap, 2.0)
        n_bytes = int(min(rate * want_s, 100 * 1024 * 1024))
        texts = [words(n_bytes, seed=2), words(n_bytes, seed=3)]

        ends: list[float] = []
        errors: list[str] = []

        def tok(text):
            try:
                with httpx.stream("POST", s.url("/tokenize"), json={"content": text}, timeout=600) as r:
                    ends.append(time.monotonic())  # the answer's head: tokenizing is done
                    body = r.read()
                if r.status_code != 200:
                    errors.append(f"{r.status_code} {body[:200]!r}")
                elif len(json.loads(body)["tokens"]) <= len(text) // 20:
                    errors.append("too few tokens")
            except httpx.HTTPError as e:
                errors.append(repr(e))
                ends.append(time.monotonic())

        sent = time.monotonic()
        threads = [threading.Thread(target=tok, args=(t,)) for t in texts]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        assert not errors, errors
        both_until = min(ends)  # both tokenizations ran until here
        window = both_until - sent
        assert log.ended_at is None or log.ended_at > both_until, \
            f"the stream ended during the tokenizations: {log.failure or log.errors}"
        # A stalled stream gets no chunk for the whole window, then its backlog at once: the
        # largest silence would be about the window. A flowing one's is a few token intervals.
        during = [t for t in log.chunks if sent <= t <= both_until]
        points = [sent] + during + [both_until]
        silence = max(b - a for a, b in zip(points, points[1:]))
        print(f"window {window:.2f} s, {len(during)} chunks, longest silence {silence:.3f} s, "
              f"token interval before {gap * 1000:.1f} ms, {n_bytes} bytes each")
        assert len(during) >= 3 and silence < window / 3, (
            f"while both tokenizations ran ({window:.2f} s, {n_bytes} bytes each), the stream "
            f"got {len(during)} chunks and was silent for up to {silence:.2f} s (a chunk every "
            f"{gap * 1000:.1f} ms before): it stalled")
        log.cancel = True
        reader.join(60)
    finally:
        s.stop()


def refused(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def request_lines(text: str) -> list[dict]:
    """The request log's JSON lines in the server's output."""
    out = []
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        ev = json.loads(line)  # with --log-format json, every log line is JSON
        if ev.get("message") == "request":
            out.append(ev)
    return out


def test_sigterm_drains_and_logs_requests(model):
    """SIGTERM while a stream runs: new connections are refused at once, the stream still
    ends with its finish_reason and [DONE], the process exits 0; the JSON request log has
    a line for each request with method, route, status, latency and tokens."""
    s = start_server(model, "-np", "2", "--log-format", "json", "--shutdown-timeout", "300")
    try:
        assert s.tokenize("Hello there") and s.get("/v1/nope").status_code == 404
        n = 200
        log, reader = stream_completion(s, model, max_tokens=n, wait_for=3)
        s.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        refused_at = None
        while time.monotonic() < deadline and s.proc.poll() is None:
            if refused(s.port):
                refused_at = time.monotonic()
                break
            time.sleep(0.02)
        reader.join(600)
        assert refused_at is not None, "new connections were still accepted after SIGTERM"
        assert log.failure is None and not log.errors, (log.failure, log.errors)
        assert log.done_at is not None, "the stream ended without [DONE]"
        assert refused_at < log.done_at, "the stream was not running any more when connections were refused"
        assert log.finishes == ["length"] and len(log.chunks) >= n // 2, (log.finishes, len(log.chunks))
        rc = s.proc.wait(timeout=60)
        assert rc == 0, f"exit status {rc}; output:\n{s.log()}"

        lines = request_lines(s.log(200_000))
        by_route = {}
        for ev in lines:
            by_route.setdefault(ev["route"], []).append(ev)
        gen = by_route.get("/v1/completions")
        assert gen and len(gen) == 1, lines
        g = gen[0]
        assert g["method"] == "POST" and g["status"] == 200 and g["finish"] == "length", g
        assert g["completion_tokens"] == n and g["prompt_tokens"] > 0, g
        # the line is written when the stream ends: its latency covers the whole stream
        stream_s = log.done_at - log.chunks[0]
        assert g["latency_ms"] >= 1000 * stream_s * 0.9, (g, stream_s)
        assert g["level"] == "INFO" and "timestamp" in g, g
        tok = by_route["/tokenize"][0]
        assert tok["status"] == 200 and "prompt_tokens" not in tok, tok
        nope = by_route["/v1/nope"][0]
        assert nope["status"] == 404 and nope["error"], nope
    finally:
        s.stop()


def test_second_signal_or_timeout_ends_requests(model):
    """A drain that takes too long ends: after --shutdown-timeout, or at a second SIGTERM,
    the running stream gets an error event and the process exits 0 soon after."""
    for how in ("timeout", "second signal"):
        timeout = "2" if how == "timeout" else "300"
        s = start_server(model, "-np", "2", "-c", "4096", "--shutdown-timeout", timeout)
        try:
            log, reader = stream_completion(s, model, max_tokens=4000, wait_for=3)
            s.proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            assert s.proc.poll() is None and log.ended_at is None, f"{how}: stopped before it was forced"
            t0 = time.monotonic()
            if how == "second signal":
                s.proc.send_signal(signal.SIGTERM)
            rc = s.proc.wait(timeout=60)
            took = time.monotonic() - t0
            reader.join(30)
            assert rc == 0, f"{how}: exit status {rc}; output:\n{s.log()}"
            assert log.ended_at is not None and log.done_at is None and not log.finishes, \
                f"{how}: the stream finished ({len(log.chunks)} chunks)"
            assert log.errors or log.failure, f"{how}: the stream ended without an error"
            assert took < 30, f"{how}: exiting took {took:.1f} s"
        finally:
            s.stop()


def test_ready_turns_503_while_draining_and_vllm_metrics(model):
    """`/ready` is 200 while the replica takes work and 503 `draining` from SIGTERM on, while
    `--drain-delay` keeps the port open (a load balancer's time to notice) and `/health`
    (liveness) stays 200; a request sent in that window is still served. `/metrics` carries
    vLLM's names with the served model's name as `model_name`, equal to ours."""
    s = start_server(model, "-np", "2", "--drain-delay", "4")  # served as --alias {model}
    try:
        r = s.get("/ready")
        assert r.status_code == 200 and r.json() == {"status": "ready"}, r.text
        c = s.client()
        out = c.completions.create(model=model, prompt="Hello", max_tokens=4, temperature=0)
        assert out.usage.completion_tokens == 4
        m = s.metrics()
        label = {"model_name": model}
        assert m.get("vllm:generation_tokens_total", **label) == m.get("superinfer_generation_tokens_total") >= 4
        assert m.get("vllm:prompt_tokens_total", **label) == m.get("superinfer_prompt_tokens_total") > 0
        assert m.get("vllm:num_requests_running", **label) == 0
        assert m.get("vllm:num_requests_waiting", **label) == 0
        assert m.get("vllm:kv_cache_usage_perc", **label) == 0
        assert m.get("vllm:request_success_total", finished_reason="length", **label) == 1
        assert m.get("vllm:time_to_first_token_seconds_count", **label) == 1
        assert m.get("vllm:num_preemptions_total", **label) == 0

        s.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 3
        r = s.get("/ready")
        while r.status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.05)
            r = s.get("/ready")
        assert r.status_code == 503 and r.json()["error"]["code"] == "draining", r.text
        assert s.get("/health").status_code == 200
        # still accepting during the delay: a request sent now is served
        out = c.completions.create(model=model, prompt="Hi", max_tokens=2, temperature=0)
        assert out.usage.completion_tokens == 2
        rc = s.proc.wait(timeout=60)
        assert rc == 0, f"exit status {rc}; output:\n{s.log()}"
    finally:
        s.stop()
