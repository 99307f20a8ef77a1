"""Helpers for the `superinfer serve` test suite: start and stop a server, read its
Prometheus metrics, make raw HTTP requests and build clients that count what they send.

Nothing here talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import openai

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"

# The two small test models, by their scripts/fetch-models.sh names.
MODELS = ["qwen2.5-0.5b", "gemma3-270m"]

# What the suite's main servers are started with: `-np N_PARALLEL -c N_CTX`.
N_PARALLEL = 8
N_CTX = 1024  # per-sequence context


def binary() -> Path:
    """The superinfer binary: $SUPERINFER_BIN, else target/release/superinfer."""
    p = Path(os.environ.get("SUPERINFER_BIN", REPO / "target" / "release" / "superinfer"))
    if not p.is_absolute():
        p = REPO / p
    return p


def model_path(name: str) -> str:
    """Path of a test model (fetched and verified by scripts/fetch-models.sh if missing)."""
    out = subprocess.run(
        [str(REPO / "scripts" / "fetch-models.sh"), "--path", name],
        check=True, capture_output=True, text=True, timeout=1800,
    )
    return out.stdout.strip().splitlines()[-1]


_model_paths: dict[str, str] = {}


def start_server(model: str, *args: str, api_key: str | None = None) -> "Server":
    """`superinfer serve` for a test model with these extra arguments, ready."""
    if model not in _model_paths:
        _model_paths[model] = model_path(model)
    return Server(model=model, path=_model_paths[model], args=list(args), api_key=api_key).start()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def threads() -> int:
    return int(os.environ.get("SUPERINFER_TEST_THREADS", "2"))


@dataclass
class Server:
    """One `superinfer serve` process on a free loopback port."""

    model: str  # fetch-models.sh name, used as --alias
    path: str
    args: list[str] = field(default_factory=list)
    api_key: str | None = None
    proc: subprocess.Popen | None = None
    port: int = 0
    log_path: str = ""

    # -- lifecycle -----------------------------------------------------------------
    def command(self) -> list[str]:
        cmd = [str(binary()), "serve", "-m", self.path, "--host", HOST, "--port", str(self.port),
               "--alias", self.model, "-t", str(threads())] + self.args
        if self.api_key is not None:
            cmd += ["--api-key", self.api_key]
        return cmd

    def start(self, timeout: float = 180.0) -> "Server":
        if not binary().exists():
            raise RuntimeError(f"superinfer binary not found at {binary()} "
                               "(build it with `cargo build --release -p superinfer-cli` "
                               "or set SUPERINFER_BIN)")
        # the free port can be taken between our probe and the server's bind: retry a few times
        for attempt in range(3):
            self.port = free_port()
            fd, self.log_path = tempfile.mkstemp(prefix=f"superinfer-serve-{self.model}-", suffix=".log")
            with os.fdopen(fd, "wb") as log:
                self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, cwd=REPO)
            try:
                self.wait_ready(timeout)
                return self
            except RuntimeError:
                if self.proc.poll() is not None and "in use" in self.log().lower() and attempt < 2:
                    continue
                self.stop()
                raise
        raise AssertionError("unreachable")

    def wait_ready(self, timeout: float) -> None:
        """Wait for GET /health to answer 200 (it is 503 while the model loads)."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"`{' '.join(self.command())}` exited with status {self.proc.returncode} "
                    f"before /health was 200; its output:\n{self.log()}")
            try:
                r = httpx.get(self.url("/health"), timeout=2.0)
                if r.status_code == 200:
                    return
                last = f"{r.status_code} {r.text[:200]}"
            except httpx.HTTPError as e:
                last = repr(e)
            time.sleep(0.1)
        raise RuntimeError(
            f"`{' '.join(self.command())}`: GET /health was not 200 within {timeout:.0f} s "
            f"(last: {last}); its output:\n{self.log()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def log(self, tail: int = 8000) -> str:
        try:
            text = Path(self.log_path).read_text(errors="replace")
        except OSError:
            return "(no log)"
        return text[-tail:]

    # -- addressing ----------------------------------------------------------------
    def url(self, path: str = "") -> str:
        return f"http://{HOST}:{self.port}{path}"

    @property
    def base_url(self) -> str:
        return self.url("/v1")

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def client(self, max_retries: int = 0, api_key: str | None = None,
               timeout: float = 120.0) -> "CountingClient":
        return CountingClient(self, max_retries=max_retries,
                              api_key=api_key if api_key is not None else (self.api_key or "none"),
                              timeout=timeout)

    # -- plain JSON endpoints ----------------------------------------------------------
    def get(self, path: str, **kw) -> httpx.Response:
        return httpx.get(self.url(path), headers=self.headers(), timeout=60.0, **kw)

    def post(self, path: str, body, **kw) -> httpx.Response:
        return httpx.post(self.url(path), json=body, headers=self.headers(), timeout=120.0, **kw)

    def props(self) -> dict:
        r = self.get("/props")
        assert r.status_code == 200, (r.status_code, r.text)
        return r.json()

    def tokenize(self, text: str, add_special: bool = False) -> list[int]:
        r = self.post("/tokenize", {"content": text, "add_special": add_special})
        assert r.status_code == 200, (r.status_code, r.text)
        return r.json()["tokens"]

    def detokenize(self, tokens: list[int]) -> str:
        r = self.post("/detokenize", {"tokens": tokens})
        assert r.status_code == 200, (r.status_code, r.text)
        return r.json()["content"]

    def apply_template(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        r = self.post("/apply-template", {"messages": messages,
                                          "add_generation_prompt": add_generation_prompt})
        assert r.status_code == 200, (r.status_code, r.text)
        return r.json()["prompt"]

    def metrics(self) -> "Metrics":
        r = httpx.get(self.url("/metrics"), headers=self.headers(), timeout=10.0)
        assert r.status_code == 200, (r.status_code, r.text)
        return Metrics.parse(r.text)


class Metrics:
    """Prometheus text exposition, parsed: {(name, ((label, value), ...)): float}."""

    def __init__(self, samples: dict[tuple[str, tuple], float], text: str):
        self.samples = samples
        self.text = text

    @staticmethod
    def parse(text: str) -> "Metrics":
        samples = {}
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if "{" in line:
                name, rest = line.split("{", 1)
                labels_s, value_s = rest.rsplit("}", 1)
                labels = []
                for part in _split_labels(labels_s):
                    k, v = part.split("=", 1)
                    labels.append((k.strip(), json.loads(v.strip())))
                key = (name.strip(), tuple(sorted(labels)))
            else:
                name, value_s = line.split(None, 1)
                key = (name, ())
            samples[key] = float(value_s.split()[0])
        return Metrics(samples, text)

    def get(self, name: str, **labels) -> float | None:
        """The sample with exactly these labels (None if absent)."""
        return self.samples.get((name, tuple(sorted(labels.items()))))

    def total(self, name: str, **labels) -> float:
        """Sum over every sample of `name` whose labels include `labels`."""
        want = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and want <= set(ls))

    def by_label(self, name: str, label: str) -> dict[str, float]:
        out = {}
        for (n, ls), v in self.samples.items():
            if n == name:
                d = dict(ls)
                if label in d:
                    out[d[label]] = out.get(d[label], 0.0) + v
        return out

    def requests(self, status: int | str) -> float:
        return self.get("superinfer_requests_total", status=str(status)) or 0.0


def _split_labels(s: str) -> list[str]:
    """Split `a="x",b="y,z"` on the commas outside quotes."""
    parts, cur, quoted, esc = [], "", False, False
    for ch in s:
        if esc:
            cur += ch; esc = False; continue
        if ch == "\\":
            cur += ch; esc = True; continue
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            if cur.strip():
                parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


class CountingClient(openai.OpenAI):
    """An openai.OpenAI client whose transport counts the HTTP requests it sends, so a
    test can tell whether the client retried."""

    def __init__(self, server: Server, *, max_retries: int, api_key: str, timeout: float):
        self.sent: list[str] = []

        def on_request(request):
            self.sent.append(f"{request.method} {request.url.path}")

        http = openai.DefaultHttpxClient(event_hooks={"request": [on_request]})
        super().__init__(base_url=server.base_url, api_key=api_key, max_retries=max_retries,
                         timeout=timeout, http_client=http)


# -- raw HTTP ---------------------------------------------------------------------------

@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


def raw_request(port: int, method: str, path: str, body: bytes = b"",
                headers: dict[str, str] | None = None, timeout: float = 60.0,
                content_length: int | None = None) -> RawResponse:
    """One HTTP/1.1 request on its own connection, written by hand so that any body can be
    sent (malformed JSON, a wrong content type, a body over the server's limit).

    The body is written while watching for the answer: a server that answers (413) before
    it has read the whole body is read normally instead of failing on a reset."""
    hdrs = {"Host": f"{HOST}:{port}", "Connection": "close", "Content-Type": "application/json"}
    hdrs.update(headers or {})
    hdrs = {k: v for k, v in hdrs.items() if v is not None}
    hdrs["Content-Length"] = str(len(body) if content_length is None else content_length)
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
    pending = memoryview(head.encode() + body)
    deadline = time.monotonic() + timeout
    received = b""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.setblocking(False)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{method} {path}: no complete answer within {timeout} s")
            r, w, _ = select.select([s], [s] if len(pending) else [], [], left)
            if r:
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    break
                received += chunk
                if _complete(received):
                    break
            elif w:
                try:
                    n = s.send(pending[:262144])
                    pending = pending[n:]
                except (BrokenPipeError, ConnectionResetError):
                    pending = pending[:0]  # the server stopped reading: wait for its answer
    return _parse_response(received, f"{method} {path}")


def _complete(data: bytes) -> bool:
    if b"\r\n\r\n" not in data:
        return False
    head, rest = data.split(b"\r\n\r\n", 1)
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return len(rest) >= int(v.strip())
        if k.strip().lower() == b"transfer-encoding" and b"chunked" in v.lower():
            return rest.endswith(b"0\r\n\r\n")
    return False


def _parse_response(data: bytes, what: str) -> RawResponse:
    if b"\r\n\r\n" not in data:
        raise ConnectionError(f"{what}: incomplete answer {data[:200]!r}")
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if "chunked" in headers.get("transfer-encoding", ""):
        out, rest = b"", body
        while rest:
            size_s, _, rest = rest.partition(b"\r\n")
            size = int(size_s.split(b";")[0], 16)
            if size == 0:
                break
            out += rest[:size]
            rest = rest[size + 2:]
        body = out
    return RawResponse(status, headers, body)


# -- checks shared by the tests ------------------------------------------------------------

def assert_error_body(body: dict, status: int | None = None, type_: str | None = None,
                      code: str | None = None, what: str = "") -> None:
    """OpenAI's error object: {"error": {"message", "type", "param", "code"}}."""
    assert isinstance(body, dict) and isinstance(body.get("error"), dict), \
        f"{what}: not an error object: {body!r}"
    err = body["error"]
    for k in ("message", "type", "param", "code"):
        assert k in err, f"{what}: error object without {k!r}: {body!r}"
    assert isinstance(err["message"], str) and err["message"], f"{what}: empty message: {body!r}"
    assert isinstance(err["type"], str) and err["type"], f"{what}: empty type: {body!r}"
    if type_ is not None:
        assert err["type"] == type_, f"{what}: type {err['type']!r}, want {type_!r}: {body!r}"
    if code is not None:
        assert err["code"] == code, f"{what}: code {err['code']!r}, want {code!r}: {body!r}"


def sse_events(lines) -> list:
    """The JSON payloads of an SSE stream up to `data: [DONE]` (which must come)."""
    events, done = [], False
    for line in lines:
        if not line or line.startswith(":"):
            continue
        assert line.startswith("data: "), f"not an SSE data line: {line!r}"
        data = line[len("data: "):]
        if data == "[DONE]":
            done = True
            break
        events.append(json.loads(data))
    assert done, "the stream ended without data: [DONE]"
    return events
