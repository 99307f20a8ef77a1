"""Reasoning in chat answers: `reasoning_content` beside `content`, as llama-server returns
it for models that think (gpt-oss's Harmony analysis channel, `<think>…</think>`).

No test model thinks, so the server is started with a chat template whose generation prompt
opens a `<think>` block (as DeepSeek-R1's and Qwen3.5's do): everything the model writes up
to a `</think>` is then its reasoning. The expected split is computed here from the raw text
the same request gives with `"reasoning_format": "none"` (the template's `<think>\\n` and the
answer, unsplit), so the tests hold whatever the model writes. The Harmony parser itself is
tested in Rust (template/tests/reasoning.rs, server/src/openai.rs) on llama.cpp's own cases.
"""

from __future__ import annotations

import pytest

from serverlib import sse_events, start_server

THINK_TEMPLATE = (
    "{% if reasoning_effort is defined %}[effort={{ reasoning_effort }}]{% endif %}"
    "{% if enable_thinking is defined and not enable_thinking %}[thinking off]{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)

MESSAGES = [{"role": "user", "content": "Count from one to five, then say done."}]


@pytest.fixture(scope="module")
def think_server(model, tmp_path_factory):
    path = tmp_path_factory.mktemp("templates") / "think.jinja"
    path.write_text(THINK_TEMPLATE)
    s = start_server(model, "-np", "2", "-c", "512", "--chat-template", str(path))
    yield s
    s.stop()


def split(raw: str) -> tuple[str, str]:
    """llama-server's split of a `<think>`-opened answer (common/chat.cpp): the reasoning
    trimmed, the content after `</think>` without its leading whitespace."""
    assert raw.startswith("<think>\n"), raw
    body = raw[len("<think>\n"):]
    if "</think>" in body:
        thought, rest = body.split("</think>", 1)
        return thought.strip(), rest.lstrip()
    return body.strip(), ""


def chat(server, stream: bool, **extra):
    body = {"messages": MESSAGES, "max_tokens": 24, "temperature": 0, "stream": stream, **extra}
    r = server.post("/v1/chat/completions", body)
    assert r.status_code == 200, r.text
    if not stream:
        return r.json()["choices"][0]["message"]
    reasoning, content = "", ""
    for ev in sse_events(r.text.splitlines()):
        for choice in ev["choices"]:
            delta = choice["delta"]
            reasoning += delta.get("reasoning_content") or ""
            content += delta.get("content") or ""
    return {"reasoning_content": reasoning, "content": content}


def test_reasoning_goes_to_reasoning_content(think_server):
    raw = chat(think_server, False, reasoning_format="none")
    assert "reasoning_content" not in raw, raw
    reasoning, content = split(raw["content"])
    assert reasoning, f"the model wrote nothing: {raw!r}"
    whole = chat(think_server, False)
    assert (whole.get("reasoning_content", ""), whole["content"]) == (reasoning, content)
    streamed = chat(think_server, True)
    assert (streamed["reasoning_content"], streamed["content"]) == (reasoning, content)
    # the same with the request's own "auto"
    assert chat(think_server, False, reasoning_format="auto") == whole


def test_reasoning_format_none_streams_the_raw_text(think_server):
    raw = chat(think_server, False, reasoning_format="none")
    streamed = chat(think_server, True, reasoning_format="none")
    assert streamed == {"reasoning_content": "", "content": raw["content"]}


def test_unknown_reasoning_format_is_a_400(think_server):
    r = think_server.post("/v1/chat/completions", {"messages": MESSAGES, "reasoning_format": "x"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "reasoning_format" and "auto, deepseek or none" in err["message"]


def test_a_model_that_does_not_think_has_no_reasoning_field(server, model):
    r = server.post("/v1/chat/completions",
                    {"messages": MESSAGES, "max_tokens": 8, "temperature": 0})
    assert r.status_code == 200, r.text
    msg = r.json()["choices"][0]["message"]
    assert "reasoning_content" not in msg and msg["content"], msg


@pytest.mark.parametrize("extra, want", [
    ({}, ""),
    ({"reasoning_effort": "high"}, "[effort=high]"),
    ({"chat_template_kwargs": {"reasoning_effort": "low"}}, "[effort=low]"),
    # the request's field over the kwarg, as llama-server
    ({"chat_template_kwargs": {"reasoning_effort": "low"}, "reasoning_effort": "high"}, "[effort=high]"),
    ({"chat_template_kwargs": {"reasoning_effort": "low"}, "reasoning_effort": "none"}, "[thinking off]"),
])
def test_reasoning_effort_and_template_kwargs_reach_the_template(think_server, extra, want):
    r = think_server.post("/apply-template", {"messages": MESSAGES, **extra})
    assert r.status_code == 200, r.text
    prompt = r.json()["prompt"]
    assert prompt.startswith(want + "<|im_start|>user\n"), prompt


def test_template_kwargs_must_be_an_object(think_server):
    r = think_server.post("/v1/chat/completions", {"messages": MESSAGES, "chat_template_kwargs": 3})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "chat_template_kwargs" and err["code"] == "invalid_type", err
