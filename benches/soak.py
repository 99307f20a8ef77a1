#!/usr/bin/env python3
"""A long soak of `superinfer serve` (not in CI): mixed load for --minutes, then checks that
the server is healthy, idle, holds no KV block, answered no 5xx, and that its resident memory
at the end is within --rss-tolerance of what it was after the first minute (no leak).

The load, from --workers threads, each picking at random: streamed completions of mixed
prompt lengths, whole chat answers, streams cut after a few chunks (the client goes away),
malformed bodies, prompts over the context. Only 127.0.0.1 is ever contacted.

  benches/soak.py -m qwen2.5-0.5b --minutes 10
  benches/soak.py -m PATH.gguf --minutes 2 --json-out soak.json
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly pack "
         "boxes of liquor and jugs of milk near the old river bank every morning").split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def model_path(m: str) -> str:
    if Path(m).is_file():
        return m
    out = subprocess.run([str(REPO / "scripts" / "fetch-models.sh"), "--path", m],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def request(port: int, method: str, path: str, body: bytes | None = None,
            timeout: float = 120) -> tuple[int, bytes]:
    c = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def metrics(port: int) -> dict[str, float]:
    _, body = request(port, "GET", "/metrics")
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


class Load:
    def __init__(self, port: int, deadline: float, seed: int):
        self.port, self.deadline = port, deadline
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.failures: list[str] = []

    def text(self, n_words: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n_words))

    def note(self, kind: str, problem: str | None) -> None:
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if problem and len(self.failures) < 50:
                self.failures.append(f"{kind}: {problem}")

    def stream(self, cut: bool) -> str | None:
        body = json.dumps({"prompt": self.text(self.rng.randint(10, 600)), "stream": True,
                           "max_tokens": self.rng.randint(16, 96), "temperature": 0.7}).encode()
        c = http.client.HTTPConnection(HOST, self.port, timeout=300)
        try:
            c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                return f"status {r.status}: {r.read()[:200]!r}"
            chunks = 0
            for line in r:
                if line.startswith(b"data: [DONE]"):
                    return None if not cut else None
                if line.startswith(b"data: "):
                    chunks += 1
                    if b'"error"' in line:
                        return f"error event: {line[:200]!r}"
                    if cut and chunks >= 3:
                        return None  # closing the socket below cancels the request
            return None if cut else "the stream ended without [DONE]"
        finally:
            c.close()

    def chat(self) -> str | None:
        body = json.dumps({"messages": [{"role": "system", "content": "Be brief."},
                                        {"role": "user", "content": self.text(self.rng.randint(5, 80))}],
                           "max_tokens": self.rng.randint(8, 48)}).encode()
        status, data = request(self.port, "POST", "/v1/chat/completions", body, timeout=300)
        return None if status == 200 and b'"choices"' in data else f"status {status}: {data[:200]!r}"

    def bad(self) -> str | None:
        body = self.rng.choice([b"{not json", b'{"prompt": 5}', b'{"prompt": "x", "temperature": -3}',
                                b'{"messages": []}', b'{"prompt": "x", "n": 4}'])
        status, data = request(self.port, "POST", "/v1/completions", body)
        return None if 400 <= status < 500 else f"status {status}: {data[:200]!r}"

    def over_context(self) -> str | None:
        body = json.dumps({"prompt": self.text(3000), "max_tokens": 4}).encode()
        status, data = request(self.port, "POST", "/v1/completions", body)
        return None if status == 400 else f"status {status}: {data[:200]!r}"

    def worker(self) -> None:
        kinds = [("stream", 50), ("chat", 15), ("cut", 15), ("bad", 10), ("over_context", 10)]
        names = [k for k, _ in kinds]
        weights = [w for _, w in kinds]
        while time.monotonic() < self.deadline:
            with self.lock:
                kind = self.rng.choices(names, weights)[0]
            try:
                problem = {"stream": lambda: self.stream(False), "cut": lambda: self.stream(True),
                           "chat": self.chat, "bad": self.bad, "over_context": self.over_context}[kind]()
            except (OSError, http.client.HTTPException) as e:
                problem = repr(e)
            self.note(kind, problem)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default="qwen2.5-0.5b", help="fetch-models.sh name or a GGUF path")
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=12, help="client threads (default 12: more than -np)")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-np", "--parallel", type=int, default=8)
    ap.add_argument("-c", "--ctx", type=int, default=1024)
    ap.add_argument("--rss-tolerance", type=float, default=0.05)
    ap.add_argument("--superinfer", default=str(REPO / "target" / "release" / "superinfer"))
    ap.add_argument("--json-out")
    a = ap.parse_args(argv)

    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="soak-", suffix=".log", delete=False)
    proc = subprocess.Popen([a.superinfer, "serve", "-m", model_path(a.model), "--host", HOST,
                             "--port", str(port), "-np", str(a.parallel), "-c", str(a.ctx),
                             "-t", str(a.threads)], stdout=log, stderr=subprocess.STDOUT)
    try:
        t0 = time.monotonic()
        while True:
            try:
                if request(port, "GET", "/health", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() - t0 > 120:
                print(f"the server did not become healthy; its log: {log.name}", file=sys.stderr)
                return 1
            time.sleep(0.2)
        # the 503s /health answered while the model loaded are not the load's
        before = {k: v for k, v in metrics(port).items() if k.startswith("superinfer_requests_total")}
        start = time.monotonic()
        load = Load(port, start + a.minutes * 60, seed=1)
        threads = [threading.Thread(target=load.worker, daemon=True) for _ in range(a.workers)]
        for t in threads:
            t.start()
        samples = []
        rss_first_minute = None
        while any(t.is_alive() for t in threads):
            time.sleep(5)
            el = time.monotonic() - start
            samples.append((round(el, 1), rss_kib(proc.pid)))
            if rss_first_minute is None and el >= 60:
                rss_first_minute = samples[-1][1]
            print(f"[{el:6.0f} s] rss {samples[-1][1] / 1024:.1f} MiB, requests {sum(load.counts.values())}",
                  flush=True)
        for t in threads:
            t.join()
        # idle: nothing running, no block held
        t1 = time.monotonic()
        while True:
            m = metrics(port)
            if m.get("superinfer_requests_running") == 0 and m.get("superinfer_kv_blocks_used") == 0:
                break
            if time.monotonic() - t1 > 5:
                load.failures.append(f"not idle 5 s after the load: running "
                                     f"{m.get('superinfer_requests_running')}, blocks used "
                                     f"{m.get('superinfer_kv_blocks_used')}")
                break
            time.sleep(0.1)
        rss_end = rss_kib(proc.pid)
        healthy = request(port, "GET", "/health")[0] == 200
        fivexx = {k: v - before.get(k, 0) for k, v in m.items()
                  if k.startswith("superinfer_requests_total") and '"5' in k and v != before.get(k, 0)}
        base = rss_first_minute or samples[0][1]
        growth = (rss_end - base) / base
        ok = healthy and not load.failures and not fivexx and abs(growth) <= a.rss_tolerance
        result = {"minutes": a.minutes, "requests": load.counts, "failures": load.failures,
                  "five_xx": fivexx, "healthy": healthy, "rss_after_first_minute_kib": base,
                  "rss_end_kib": rss_end, "rss_growth": growth, "rss_samples": samples, "ok": ok}
        print(json.dumps({k: v for k, v in result.items() if k != "rss_samples"}, indent=2))
        if a.json_out:
            Path(a.json_out).write_text(json.dumps(result, indent=2))
        return 0 if ok else 1
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    sys.exit(main())
