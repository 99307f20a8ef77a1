"""Generation through the official `openai` client: chat and completions, streaming and
not, stop strings, max_tokens, usage, seeds, logprobs, stream_options, and a greedy chat
answer equal to `superinfer run` on the rendered prompt."""

from __future__ import annotations

import math
import subprocess

import pytest

from serverlib import MODELS, N_CTX, N_PARALLEL, binary, model_path, start_server, threads

COUNT_PROMPT = "1, 2, 3, 4, 5, 6,"
STORY_PROMPT = "Once upon a time, in a small village by the sea,"
CHAT = [{"role": "user", "content": "Write one long sentence about the sea."}]
GREEDY = {"temperature": 0}
IGNORE_EOS = {"ignore_eos": True}


# -- helpers --------------------------------------------------------------------------------

def complete(client, model, stream=False, **kw):
    """A /v1/completions call; streamed ones are folded into (text, finish_reason, chunks)."""
    r = client.completions.create(model=model, stream=stream, **kw)
    if not stream:
        assert len(r.choices) == 1
        return r.choices[0].text, r.choices[0].finish_reason, r
    chunks = list(r)
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finishes) == 1, f"want one finish_reason in the stream, got {finishes}"
    return text, finishes[0], chunks


def chat(client, model, messages=CHAT, stream=False, **kw):
    r = client.chat.completions.create(model=model, messages=messages, stream=stream, **kw)
    if not stream:
        assert len(r.choices) == 1
        assert r.choices[0].message.role == "assistant"
        return r.choices[0].message.content or "", r.choices[0].finish_reason, r
    chunks = list(r)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finishes) == 1, f"want one finish_reason in the stream, got {finishes}"
    return text, finishes[0], chunks


def chat_prompt_tokens(server, props, messages) -> int:
    """Prompt tokens of a chat request: its rendered prompt with special tokens parsed, plus
    BOS when the model adds one and the template did not already write it (never two)."""
    rendered = server.apply_template(messages, True)
    n = len(server.tokenize(rendered, add_special=False))
    n_bos = len(server.tokenize("", add_special=True))
    if n_bos and props.get("bos_token") and rendered.startswith(props["bos_token"]):
        return n
    return n + n_bos


def check_usage(usage, prompt_tokens=None, completion_tokens=None):
    assert usage is not None, "no usage"
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens, usage
    if prompt_tokens is not None:
        assert usage.prompt_tokens == prompt_tokens, usage
    if completion_tokens is not None:
        assert usage.completion_tokens == completion_tokens, usage


def check_token_logprob(entry, top_n: int, greedy: bool, where: str):
    assert entry.logprob <= 0.0, f"{where}: logprob {entry.logprob} > 0"
    assert math.isfinite(entry.logprob), f"{where}: logprob {entry.logprob}"
    top = entry.top_logprobs
    assert len(top) == top_n, f"{where}: {len(top)} top_logprobs, asked {top_n}"
    lps = [t.logprob for t in top]
    assert all(lp <= 0.0 for lp in lps), f"{where}: top logprobs {lps}"
    assert lps == sorted(lps, reverse=True), f"{where}: top logprobs not sorted: {lps}"
    assert sum(math.exp(lp) for lp in lps) <= 1.0 + 1e-3, f"{where}: probabilities sum over 1: {lps}"
    if greedy:
        assert entry.token == top[0].token, f"{where}: greedy picked {entry.token!r}, top is {top[0].token!r}"
        assert abs(entry.logprob - top[0].logprob) < 1e-3, f"{where}: {entry.logprob} vs {top[0].logprob}"
    else:
        assert entry.logprob <= top[0].logprob + 1e-3
    if entry.bytes is not None:
        assert bytes(entry.bytes) == entry.token.encode("utf-8") or "\ufffd" in entry.token, where


# -- endpoints that are not generation ---------------------------------------------------------

def test_health_models_props(server, props, model):
    r = server.get("/health")
    assert r.status_code == 200 and r.json() == {"status": "ok"}, (r.status_code, r.text)
    models = server.client().models.list()
    assert models.data and models.data[0].id == model, models
    assert props["model_alias"] == model, props
    assert props["n_ctx"] == N_CTX, props
    assert props["total_slots"] == N_PARALLEL, props
    for k in ("chat_template", "bos_token", "eos_token"):
        assert isinstance(props[k], str), (k, props)
    assert props["chat_template"], "empty chat_template"


def test_tokenize_detokenize(server):
    text = "Hello world, 1 2 3 — ünïcödé 🙂"
    toks = server.tokenize(text, add_special=False)
    assert toks and all(isinstance(t, int) for t in toks)
    assert server.detokenize(toks) == text
    with_special = server.tokenize(text, add_special=True)
    assert with_special[-len(toks):] == toks and len(with_special) - len(toks) in (0, 1)


# -- completions and chat, streaming and not --------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_completion(server, model, stream):
    client = server.client()
    text, finish, _ = complete(client, model, prompt=COUNT_PROMPT, max_tokens=8, **GREEDY)
    assert text and finish in ("stop", "length")
    if stream:
        s_text, s_finish, chunks = complete(client, model, stream=True, prompt=COUNT_PROMPT,
                                            max_tokens=8, **GREEDY)
        assert (s_text, s_finish) == (text, finish), "a stream must carry the same greedy answer"
        assert all(c.object == "text_completion" for c in chunks)
        assert len({c.id for c in chunks}) == 1, "one id for every chunk of a stream"


def test_completion_usage(server, model):
    client = server.client()
    text, finish, r = complete(client, model, prompt=COUNT_PROMPT, max_tokens=8, **GREEDY)
    assert r.object == "text_completion" and r.model == model
    check_usage(r.usage, prompt_tokens=len(server.tokenize(COUNT_PROMPT, add_special=True)))
    assert 1 <= r.usage.completion_tokens <= 8
    if finish == "length":
        assert r.usage.completion_tokens == 8


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_chat(server, props, model, stream):
    client = server.client()
    text, finish, r = chat(client, model, max_tokens=12, **GREEDY)
    assert text and finish in ("stop", "length")
    assert r.object == "chat.completion" and r.model == model
    check_usage(r.usage, prompt_tokens=chat_prompt_tokens(server, props, CHAT))
    if stream:
        s_text, s_finish, chunks = chat(client, model, stream=True, max_tokens=12, **GREEDY)
        assert (s_text, s_finish) == (text, finish), "a stream must carry the same greedy answer"
        assert all(c.object == "chat.completion.chunk" for c in chunks)
        assert chunks[0].choices[0].delta.role == "assistant", chunks[0]
        assert len({c.id for c in chunks}) == 1


# -- max_tokens, finish_reason and usage --------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_max_tokens_gives_length(server, model, endpoint, stream):
    client = server.client()
    n = 5
    opts = {"stream_options": {"include_usage": True}} if stream else {}
    if endpoint == "chat":
        text, finish, r = chat(client, model, stream=stream, max_tokens=n, extra_body=IGNORE_EOS,
                               **GREEDY, **opts)
    else:
        text, finish, r = complete(client, model, stream=stream, prompt=STORY_PROMPT, max_tokens=n,
                                   extra_body=IGNORE_EOS, **GREEDY, **opts)
    assert finish == "length"
    usage = r[-1].usage if stream else r.usage
    check_usage(usage, completion_tokens=n)


def test_max_completion_tokens(server, model):
    text, finish, r = chat(server.client(), model, max_completion_tokens=4, extra_body=IGNORE_EOS,
                           **GREEDY)
    assert finish == "length"
    check_usage(r.usage, completion_tokens=4)


def test_usage_counts_generated_tokens(server, props, model):
    """completion_tokens is the number of tokens really generated: one logprob entry per
    token, whole and streamed, and the tokens' bytes make up the text."""
    client = server.client()
    n = 10
    text, finish, r = chat(client, model, max_tokens=n, logprobs=True, **GREEDY)
    entries = r.choices[0].logprobs.content
    assert r.usage.completion_tokens == len(entries), (r.usage, len(entries))
    if finish == "length":
        assert len(entries) == n
    got = b"".join(bytes(e.bytes) for e in entries if e.bytes is not None)
    if all(e.bytes is not None for e in entries):
        assert got == text.encode(), (got, text)

    s_text, s_finish, chunks = chat(client, model, stream=True, max_tokens=n, logprobs=True,
                                    stream_options={"include_usage": True}, **GREEDY)
    streamed = sum(len(c.choices[0].logprobs.content) for c in chunks
                   if c.choices and c.choices[0].logprobs and c.choices[0].logprobs.content)
    usage = chunks[-1].usage
    assert (s_text, s_finish) == (text, finish)
    check_usage(usage, prompt_tokens=chat_prompt_tokens(server, props, CHAT),
                completion_tokens=streamed)
    assert usage.completion_tokens == r.usage.completion_tokens


def test_include_usage_final_chunk(server, model):
    client = server.client()
    _, _, whole = chat(client, model, max_tokens=6, **GREEDY)
    _, _, chunks = chat(client, model, stream=True, max_tokens=6,
                        stream_options={"include_usage": True}, **GREEDY)
    last = chunks[-1]
    assert last.choices == [], f"the usage chunk has no choices: {last}"
    assert last.usage is not None
    assert all(c.usage is None for c in chunks[:-1]), "usage only in the final chunk"
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == \
        (whole.usage.prompt_tokens, whole.usage.completion_tokens)

    _, _, plain = chat(client, model, stream=True, max_tokens=6, **GREEDY)
    assert all(c.choices for c in plain), \
        "without stream_options.include_usage no chunk may come without choices"


def test_cached_prompt_tokens_reported(server, model):
    """The same long prompt twice: the second request's prompt comes from the prefix cache,
    and usage.prompt_tokens_details.cached_tokens says so."""
    prompt = "Here is a list of fruits: " + ", ".join(["apple", "pear", "plum", "fig"] * 20) + "."
    client = server.client()
    complete(client, model, prompt=prompt, max_tokens=2, **GREEDY)
    r = client.completions.create(model=model, prompt=prompt, max_tokens=2, **GREEDY)
    details = r.usage.prompt_tokens_details
    assert details is not None and details.cached_tokens is not None, r.usage
    assert 16 <= details.cached_tokens < r.usage.prompt_tokens, r.usage
    timings = (r.model_extra or {}).get("timings")
    assert timings is not None, "the response carries timings"
    cached = timings.get("cache_n", timings.get("cached_n"))  # llama-server calls it cache_n
    assert cached == details.cached_tokens, (timings, r.usage)
    assert timings["prompt_n"] == r.usage.prompt_tokens - details.cached_tokens, (timings, r.usage)
    assert timings["predicted_n"] == r.usage.completion_tokens, (timings, r.usage)


# -- stop strings ---------------------------------------------------------------------------------

def stop_across_tokens(text: str) -> str:
    """A 3-character stop string from `text` holding a digit and something else: both test
    models give every digit a token of its own, so it is split over at least two tokens."""
    for i in range(3, len(text) - 3):
        s = text[i:i + 3]
        if any(ch.isdigit() for ch in s) and not s.isdigit() and text.find(s) == i:
            return s
    pytest.fail(f"no stop string to cut out of {text!r}")


@pytest.mark.parametrize("form", ["string", "list"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_stop_string_completions(server, model, stream, form):
    client = server.client()
    full, _, _ = complete(client, model, prompt=COUNT_PROMPT, max_tokens=16, **GREEDY)
    s = stop_across_tokens(full)
    stop = s if form == "string" else ["@@never@@", s, "%%nope%%"]
    text, finish, chunks = complete(client, model, stream=stream, prompt=COUNT_PROMPT, max_tokens=16,
                                    stop=stop, **GREEDY)
    assert text == full[:full.find(s)], (full, s, text)
    assert s not in text
    assert finish == "stop"
    if stream:
        assert all(s not in (c.choices[0].text if c.choices else "") for c in chunks)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_stop_string_chat(server, model, stream):
    client = server.client()
    full, _, _ = chat(client, model, max_tokens=24, **GREEDY)
    if len(full) < 12:
        pytest.skip(f"greedy answer too short to cut: {full!r}")
    k = len(full) // 2
    s = full[k:k + 4]
    k = full.find(s)
    text, finish, _ = chat(client, model, stream=stream, max_tokens=24, stop=[s], **GREEDY)
    assert text == full[:k], (full, s, text)
    assert finish == "stop"


def test_stop_that_never_matches(server, model):
    client = server.client()
    full, finish, _ = complete(client, model, prompt=COUNT_PROMPT, max_tokens=10, **GREEDY)
    text, finish2, _ = complete(client, model, prompt=COUNT_PROMPT, max_tokens=10,
                                stop=["@@never@@"], **GREEDY)
    assert (text, finish2) == (full, finish)


# -- sampling ------------------------------------------------------------------------------------

@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_seed_determinism(server, model, endpoint):
    client = server.client()

    def sample(seed):
        kw = dict(max_tokens=16, temperature=0.8, seed=seed, extra_body=IGNORE_EOS)
        if endpoint == "chat":
            return chat(client, model, messages=[{"role": "user", "content": "Tell me a story."}], **kw)[0]
        return complete(client, model, prompt=STORY_PROMPT, **kw)[0]

    first = sample(1234)
    assert sample(1234) == first, "same seed, same text"
    others = {sample(seed) for seed in (1, 2, 3)}
    assert len(others | {first}) >= 2, f"four seeds gave one text: {first!r}"


def test_logprobs_chat(server, model):
    client = server.client()
    text, _, r = chat(client, model, max_tokens=8, logprobs=True, top_logprobs=5, **GREEDY)
    entries = r.choices[0].logprobs.content
    assert len(entries) == r.usage.completion_tokens
    for i, e in enumerate(entries):
        check_token_logprob(e, 5, greedy=True, where=f"token {i}")
    assert "".join(e.token for e in entries) == text

    # sampled: the chosen token need not be the top one, but the numbers stay sane
    _, _, r = chat(client, model, max_tokens=8, logprobs=True, top_logprobs=3, temperature=0.9,
                   seed=7)
    for i, e in enumerate(r.choices[0].logprobs.content):
        check_token_logprob(e, 3, greedy=False, where=f"sampled token {i}")


def test_logprobs_chat_stream(server, model):
    client = server.client()
    text, _, chunks = chat(client, model, stream=True, max_tokens=8, logprobs=True, top_logprobs=2,
                           **GREEDY)
    entries = [e for c in chunks if c.choices and c.choices[0].logprobs
               for e in (c.choices[0].logprobs.content or [])]
    assert entries, "a stream with logprobs carries them"
    for i, e in enumerate(entries):
        check_token_logprob(e, 2, greedy=True, where=f"token {i}")
    assert "".join(e.token for e in entries) == text


def test_logprobs_completions(server, model):
    """Legacy completions logprobs: {tokens, token_logprobs, top_logprobs, text_offset}."""
    client = server.client()
    r = client.completions.create(model=model, prompt=COUNT_PROMPT, max_tokens=6, logprobs=3, **GREEDY)
    lp = r.choices[0].logprobs
    assert lp is not None and lp.tokens, r
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == r.usage.completion_tokens
    assert "".join(lp.tokens) == r.choices[0].text
    for tok, tlp, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert tlp <= 0.0 and len(top) == 3
        assert max(top.values()) == pytest.approx(tlp, abs=1e-3), (tok, tlp, top)
        assert top.get(tok) == pytest.approx(tlp, abs=1e-3), (tok, tlp, top)


# -- the server's greedy answer is `superinfer run`'s ---------------------------------------------

def test_greedy_chat_equals_cli(server, props, model):
    messages = [{"role": "system", "content": "You are a terse assistant."},
                {"role": "user", "content": "Name three colors."}]
    n = 24
    answer, _, _ = chat(server.client(), model, messages=messages, max_tokens=n, **GREEDY)
    rendered = server.apply_template(messages, True)
    cmd = [str(binary()), "run", "-m", server.path, "-p", rendered, "-n", str(n), "--temp", "0",
           "-c", str(N_CTX), "-t", str(threads())]
    if props["bos_token"] and rendered.startswith(props["bos_token"]):
        cmd.append("--no-bos")  # the template wrote BOS; the CLI must not add a second one
    out = subprocess.run(cmd, capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    cli = out.stdout.decode()
    assert cli.endswith("\n")  # `run` ends its output with a newline of its own
    assert answer == cli[:-1], f"server {answer!r}\n   cli {cli[:-1]!r}\n({out.stderr.decode()[-300:]})"


def _cli_run(server, prompt, *flags):
    """`superinfer run` greedy on the server's model: (text, stop reason, generated tokens)."""
    cmd = [str(binary()), "run", "-m", server.path, "-p", prompt, "--temp", "0",
           "-c", str(N_CTX), "-t", str(threads()), *flags]
    out = subprocess.run(cmd, capture_output=True, timeout=300)
    err = out.stderr.decode(errors="replace")
    assert out.returncode == 0, err
    text = out.stdout.decode()
    assert text.endswith("\n")  # `run` ends its output with a newline of its own
    stop = err.split("stop: ", 1)[1].split(" ", 1)[0]
    generated = int(err.split("generation: ", 1)[1].split(" ", 1)[0])
    return text[:-1], stop, generated


FINISH = {"EndOfGeneration": "stop", "StopSequence": "stop", "Length": "length",
          "ContextFull": "length"}


@pytest.mark.parametrize("stream", [False, True])
def test_stop_ignore_eos_and_max_tokens_equal_cli(server, props, model, stream):
    """The per-token rules are core's, the same in `run` and the server: greedy, the model's
    own end (an end-of-generation token, not part of the answer), `ignore_eos` masking it up to
    `max_tokens`, and a stop string that only the text past that end contains."""
    rendered = server.apply_template([{"role": "user", "content": "What is 2+2? One word."}], True)
    if props["bos_token"] and rendered.startswith(props["bos_token"]):
        rendered = rendered[len(props["bos_token"]):]  # the server and `run` both add BOS
    c = server.client()

    def served(**kw):
        opts = {"stream_options": {"include_usage": True}} if stream else {}
        text, finish, r = complete(c, model, stream=stream, prompt=rendered, **opts, **GREEDY,
                                   **kw)
        usage = r.usage if not stream else next(x.usage for x in r if x.usage)
        return text, finish, usage.completion_tokens

    # the model's own end, when it ends (an instruction-tuned model does: Qwen; the base
    # Gemma-3-270M goes on): `run` counts the end-of-generation token it sampled,
    # completion_tokens only the answer's tokens
    ends, why, n = _cli_run(server, rendered, "-n", "48")
    eog = why == "EndOfGeneration"
    assert served(max_tokens=48) == (ends, FINISH[why], n - eog)

    longer, why, n = _cli_run(server, rendered, "-n", "32", "--ignore-eos")
    assert (why, n) == ("Length", 32)
    assert served(max_tokens=32, extra_body=IGNORE_EOS) == (longer, "length", 32)
    start = 0
    if eog:
        assert longer.startswith(ends) and len(longer) > len(ends), (ends, longer)
        start = len(ends)

    # three characters whose first appearance is past the model's own end
    stop = next(longer[i:i + 3] for i in range(start + 1, len(longer) - 2)
                if longer.find(longer[i:i + 3]) > start)
    cut, why, n = _cli_run(server, rendered, "-n", "32", "--ignore-eos", "--stop", stop)
    assert why == "StopSequence" and cut == longer[:longer.find(stop)], (stop, cut)
    assert served(max_tokens=32, stop=[stop], extra_body=IGNORE_EOS) == (cut, "stop", n)


# -- speculative decoding by prompt lookup -----------------------------------------------------

EDIT_PROMPT = (
    "def total(items):\n    result = 0\n    for item in items:\n        result += item.price\n"
    "    return result\n\n# The same function, with the loop variable renamed to `entry`:\n"
    "def total(items):\n"
)


def test_prompt_lookup_gives_the_same_answer(server, model):
    """Per request: greedy output is the same with and without prompt lookup, the draft
    counts reach `timings` and /metrics, and `speculative: false` turns it off."""
    c = server.client()
    before = server.metrics()
    plain, _, _ = complete(c, model, prompt=EDIT_PROMPT, max_tokens=48, extra_body=IGNORE_EOS,
                           **GREEDY)
    r = server.post("/v1/completions", {"model": model, "prompt": EDIT_PROMPT, "max_tokens": 48,
                                        "temperature": 0, "ignore_eos": True,
                                        "lookup_ngram": 3, "draft_max": 8})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["choices"][0]["text"] == plain
    t = body["timings"]
    assert t["draft_n"] > 0, t
    assert 0 <= t["draft_n_accepted"] <= t["draft_n"], t
    off = server.post("/v1/completions", {"model": model, "prompt": EDIT_PROMPT, "max_tokens": 8,
                                          "temperature": 0, "lookup_ngram": 3,
                                          "speculative": False})
    assert off.status_code == 200 and off.json()["timings"]["draft_n"] == 0, off.text
    after = server.metrics()
    drafted = (after.total("superinfer_spec_decode_draft_tokens_total")
               - before.total("superinfer_spec_decode_draft_tokens_total"))
    accepted = (after.total("superinfer_spec_decode_accepted_tokens_total")
                - before.total("superinfer_spec_decode_accepted_tokens_total"))
    assert drafted == t["draft_n"] and accepted == t["draft_n_accepted"], (drafted, accepted, t)


def test_draft_model_gives_the_same_answer(model):
    """`serve --model-draft`: requests draft with the server's draft model (here the model
    itself, which shares its vocabulary), the greedy answer is the one without, the counts
    reach `timings` and /metrics, and `speculative: false` turns it off per request."""
    s = start_server(model, "-np", "2", "-c", "512", "--model-draft", model_path(model),
                     "--draft-max", "6", "--draft-p-min", "0")
    try:
        body = {"model": model, "prompt": EDIT_PROMPT, "max_tokens": 32, "temperature": 0,
                "ignore_eos": True}
        plain = s.post("/v1/completions", {**body, "speculative": False})
        assert plain.status_code == 200, plain.text
        assert plain.json()["timings"]["draft_n"] == 0
        before = s.metrics()
        r = s.post("/v1/completions", body)
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["text"] == plain.json()["choices"][0]["text"]
        t = r.json()["timings"]
        # a draft that is the model itself is always right: every drafted token is accepted
        assert t["draft_n"] > 0 and t["draft_n_accepted"] == t["draft_n"], t
        after = s.metrics()
        assert (after.total("superinfer_spec_decode_draft_tokens_total")
                - before.total("superinfer_spec_decode_draft_tokens_total")) == t["draft_n"]
        # a request's own length, and lookup instead of the draft model
        short = s.post("/v1/completions", {**body, "draft_max": 2, "max_tokens": 8})
        assert short.status_code == 200 and short.json()["timings"]["draft_n"] > 0, short.text
        bad = s.post("/v1/completions", {**body, "draft_max": 65})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "draft_max", bad.text
    finally:
        s.stop()


def test_a_draft_model_of_another_vocabulary_stops_the_server_with_a_clear_error(model):
    other = next(m for m in MODELS if m != model)
    with pytest.raises(RuntimeError, match="tokenizer"):
        start_server(model, "-np", "1", "-c", "256", "--model-draft", model_path(other))


@pytest.mark.parametrize("field,value", [("lookup_ngram", 17), ("lookup_ngram", -1),
                                         ("draft_max", 0), ("draft_max", 65),
                                         ("speculative", "yes")])
def test_bad_lookup_settings_are_400(server, model, field, value):
    r = server.post("/v1/completions", {"model": model, "prompt": "Hello", "max_tokens": 4,
                                        field: value})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == field
