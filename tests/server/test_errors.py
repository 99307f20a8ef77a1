"""Client mistakes get OpenAI error objects with the right 4xx status, and the `openai`
client (left at its default of 2 retries) sends each of them exactly once: never a 5xx,
408, 409 or 429 that it would retry."""

from __future__ import annotations

import json
import threading
import time

import httpx
import openai
import pytest

from serverlib import N_CTX, Server, assert_error_body, raw_request, start_server

MSGS = [{"role": "user", "content": "Say hi."}]


def call_once(server: Server, exc: type, status: int, fn, type_=None, code=None, client=None):
    """Run fn(client) with an openai client at its default max_retries=2: it must raise
    `exc` with `status`, an error object, after exactly one request (counted by the client's
    transport and by the server's superinfer_requests_total{status})."""
    client = client or server.client(max_retries=2)
    before = server.metrics().requests(status)
    with pytest.raises(exc) as ei:
        fn(client)
    err = ei.value
    assert err.status_code == status, (err.status_code, err.response.text)
    assert_error_body(err.response.json(), type_=type_, code=code, what=f"{status}")
    assert len(client.sent) == 1, f"the client sent {client.sent}: it retried"
    after = server.metrics().requests(status)
    assert after - before == 1, f'superinfer_requests_total{{status="{status}"}} went {before} -> {after}'
    return err


def long_text(server: Server) -> str:
    text = "hello " * (N_CTX + 200)
    assert len(server.tokenize(text)) > N_CTX + 100
    return text


# -- malformed requests, sent raw ---------------------------------------------------------------

@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
@pytest.mark.parametrize("body", [b'{"model": "m", "messages": [', b"not json at all", b"",
                                  b'{"model": "m", "prompt": "x",}', b"[1, 2, 3]", b"\xff\xfe{}"],
                         ids=["truncated", "text", "empty", "trailing-comma", "array", "bad-utf8"])
def test_bad_json(server, path, body):
    r = raw_request(server.port, "POST", path, body)
    assert r.status == 400, (r.status, r.body[:300])
    assert_error_body(r.json(), type_="invalid_request_error", what=repr(body))


def test_bad_json_with_httpx(server):
    before = server.metrics().requests(400)
    r = httpx.post(server.url("/v1/chat/completions"), content=b'{"model": "x", "messages": [{"role":',
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert_error_body(r.json(), type_="invalid_request_error")
    assert server.metrics().requests(400) - before == 1


def test_wrong_content_type(server, model):
    body = json.dumps({"model": model, "messages": MSGS}).encode()
    r = raw_request(server.port, "POST", "/v1/chat/completions", body, headers={"Content-Type": "text/plain"})
    assert 400 <= r.status < 500, (r.status, r.body[:300])
    assert_error_body(r.json())


# -- wrong types and out-of-range values, through the openai client ---------------------------------

WRONG_TYPES = {
    "temperature": "hot",
    "max_tokens": "ten",
    "top_p": [0.5],
    "stop": 5,
    "stream": "yes",
    "seed": "abc",
    "messages": "not a list",
}


@pytest.mark.parametrize("field", list(WRONG_TYPES))
def test_wrong_types(server, model, field):
    kw = {"model": model, "messages": MSGS, "max_tokens": 4}
    kw[field] = WRONG_TYPES[field]
    call_once(server, openai.BadRequestError, 400, lambda c: c.chat.completions.create(**kw),
              type_="invalid_request_error")


OUT_OF_RANGE = [
    ("temperature", -1), ("top_p", 2), ("top_p", -0.5), ("max_tokens", -5), ("n", 2), ("n", 0),
    ("top_logprobs", 21), ("presence_penalty", 3), ("frequency_penalty", -3),
]


@pytest.mark.parametrize("field,value", OUT_OF_RANGE, ids=[f"{f}={v}" for f, v in OUT_OF_RANGE])
def test_out_of_range_chat(server, model, field, value):
    kw = {"model": model, "messages": MSGS, "max_tokens": 4}
    if field == "top_logprobs":
        kw["logprobs"] = True
    kw[field] = value
    err = call_once(server, openai.BadRequestError, 400, lambda c: c.chat.completions.create(**kw),
                    type_="invalid_request_error")
    assert err.response.json()["error"]["param"] in (field, None)


@pytest.mark.parametrize("field,value", [("temperature", -1), ("max_tokens", -5), ("n", 2), ("top_p", 2)])
def test_out_of_range_completions(server, model, field, value):
    kw = {"model": model, "prompt": "Hello", "max_tokens": 4, field: value}
    call_once(server, openai.BadRequestError, 400, lambda c: c.completions.create(**kw),
              type_="invalid_request_error")


@pytest.mark.parametrize("messages", [[], [{"role": "wizard", "content": "hi"}], [{"content": "no role"}],
                                      [{"role": "user"}], [{"role": "user", "content": 5}]],
                         ids=["empty", "unknown-role", "no-role", "no-content", "content-int"])
def test_bad_messages(server, model, messages):
    call_once(server, openai.BadRequestError, 400,
              lambda c: c.chat.completions.create(model=model, messages=messages, max_tokens=4),
              type_="invalid_request_error")


def test_missing_fields(server, model):
    for path, body in [("/v1/chat/completions", {"model": model}),
                       ("/v1/completions", {"model": model})]:
        r = server.post(path, body)
        assert r.status_code == 400, (path, r.status_code, r.text)
        assert_error_body(r.json(), type_="invalid_request_error", what=path)


# -- prompt over the context ----------------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_prompt_over_context(server, model, endpoint, stream):
    text = long_text(server)
    if endpoint == "chat":
        fn = lambda c: c.chat.completions.create(model=model, messages=[{"role": "user", "content": text}],
                                                 max_tokens=4, stream=stream)
    else:
        fn = lambda c: c.completions.create(model=model, prompt=text, max_tokens=4, stream=stream)
    call_once(server, openai.BadRequestError, 400, fn, type_="invalid_request_error",
              code="context_length_exceeded")


# -- unknown model, route, method; body limit ---------------------------------------------------------

@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_unknown_model(server, endpoint):
    if endpoint == "chat":
        fn = lambda c: c.chat.completions.create(model="no-such-model", messages=MSGS, max_tokens=4)
    else:
        fn = lambda c: c.completions.create(model="no-such-model", prompt="Hi", max_tokens=4)
    call_once(server, openai.NotFoundError, 404, fn, type_="not_found_error", code="model_not_found")


def test_unknown_route(server):
    for method, path in [("GET", "/v2/nothing"), ("POST", "/v1/embeddingz"), ("GET", "/")]:
        r = raw_request(server.port, method, path, b"{}" if method == "POST" else b"")
        assert r.status == 404, (method, path, r.status, r.body[:200])
        assert_error_body(r.json(), type_="not_found_error", what=path)


def test_wrong_method(server):
    for method, path in [("GET", "/v1/chat/completions"), ("DELETE", "/v1/completions"),
                         ("POST", "/health"), ("PUT", "/v1/models")]:
        r = raw_request(server.port, method, path, b"")
        assert r.status == 405, (method, path, r.status, r.body[:200])
        assert_error_body(r.json(), what=f"{method} {path}")


def test_body_over_limit(server, model):
    filler = "x" * (4 * 1024 * 1024 + 1024)
    body = json.dumps({"model": model, "prompt": filler, "max_tokens": 1}).encode()
    r = raw_request(server.port, "POST", "/v1/completions", body)
    assert r.status == 413, (r.status, r.body[:200])
    assert_error_body(r.json())
    assert server.get("/health").status_code == 200


# -- API key --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def auth_server(model):
    s = start_server(model, "-np", "2", "-c", "512", api_key="sekrit-key")
    yield s
    s.stop()


def test_api_key_wrong(auth_server, model):
    client = auth_server.client(max_retries=2, api_key="wrong-key")
    call_once(auth_server, openai.AuthenticationError, 401,
              lambda c: c.chat.completions.create(model=model, messages=MSGS, max_tokens=2),
              type_="authentication_error", client=client)


def test_api_key_missing(auth_server, model):
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/models"):
        body = json.dumps({"model": model, "messages": MSGS, "prompt": "Hi", "max_tokens": 2}).encode()
        r = raw_request(auth_server.port, "GET" if path == "/v1/models" else "POST", path,
                        b"" if path == "/v1/models" else body)
        assert r.status == 401, (path, r.status, r.body[:200])
        assert_error_body(r.json(), type_="authentication_error", what=path)


def test_api_key_right(auth_server, model):
    client = auth_server.client(max_retries=2)
    r = client.chat.completions.create(model=model, messages=MSGS, max_tokens=2, temperature=0)
    assert r.choices[0].finish_reason in ("stop", "length")
    assert len(client.sent) == 1


# -- queue full ---------------------------------------------------------------------------------

def test_queue_full_is_429(model):
    """One slot, a queue of one: with one request running and one waiting, a third is
    refused at once with 429 rate_limit_error / queue_full (not a 5xx)."""
    s = start_server(model, "-np", "1", "--max-queue", "1", "-c", "512")
    stop = threading.Event()

    def hold(i):
        body = {"model": model, "prompt": f"Hold {i}:", "max_tokens": 400, "stream": True,
                "ignore_eos": True}
        with httpx.stream("POST", s.url("/v1/completions"), json=body, timeout=120) as r:
            for _ in r.iter_lines():
                if stop.is_set():
                    break

    threads = [threading.Thread(target=hold, args=(i,), daemon=True) for i in range(2)]

    def wait_for(running, waiting):
        deadline = time.monotonic() + 30
        while True:
            m = s.metrics()
            if (m.get("superinfer_requests_running") == running
                    and m.get("superinfer_requests_waiting") == waiting):
                return
            assert time.monotonic() < deadline, \
                f"never {running} running and {waiting} waiting: {m.text[-800:]}"
            time.sleep(0.02)

    try:
        # the second only once the first has its slot: sent together, the second can find
        # the first still in the queue of one and be refused itself
        threads[0].start()
        wait_for(1, 0)
        threads[1].start()
        wait_for(1, 1)
        client = s.client(max_retries=0)
        err = call_once(s, openai.RateLimitError, 429,
                        lambda c: c.completions.create(model=model, prompt="One more", max_tokens=2),
                        type_="rate_limit_error", code="queue_full", client=client)
        assert err.status_code == 429
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        s.stop()
