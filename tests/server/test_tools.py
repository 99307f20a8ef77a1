"""Tool calling through the OpenAI API on Qwen2.5-Coder-1.5B (its template's Hermes format,
`<tool_call>{...}</tool_call>`): a two-step loop (the call, the `role: tool` result, the
final answer), streamed and not, with the streamed calls (`delta.tool_calls` by index: `id`
and `function.name` once, `arguments` in fragments) adding up to the whole answer's;
`tool_choice` required and named force a call; a named tool that `tools` lacks is a 400.
"""

from __future__ import annotations

import json

import openai
import pytest

from serverlib import start_server

MODEL = "qwen2.5-1.5b"

WEATHER = {"type": "function", "function": {
    "name": "get_weather",
    "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"], "additionalProperties": False},
}}
TIME = {"type": "function", "function": {
    "name": "get_time",
    "description": "The current time in a time zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string"}},
                   "required": ["zone"], "additionalProperties": False},
}}
TOOLS = [WEATHER, TIME]
ASK = [{"role": "user",
        "content": "Use the tool to get the weather in Paris, then tell me in one sentence."}]


@pytest.fixture(scope="module")
def tool_server():
    s = start_server(MODEL, "-np", "2", "-c", "2048")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(tool_server):
    c = tool_server.client()
    c._alias = tool_server.props()["model_alias"]
    return c


def create(client, messages, stream=False, **kw):
    kw.setdefault("tools", TOOLS)
    return client.chat.completions.create(
        model=client._alias, messages=messages, stream=stream, max_tokens=64, temperature=0, **kw)


def collect_stream(stream):
    """A streamed answer put together: content, finish reason and calls (by index), checking
    that each call's id and name come once, in its first delta."""
    content, finish, calls = "", None, {}
    for chunk in stream:
        for c in chunk.choices:
            d = c.delta
            content += d.content or ""
            finish = c.finish_reason or finish
            for tc in d.tool_calls or []:
                if tc.index not in calls:
                    assert tc.id and tc.function.name, tc
                    calls[tc.index] = {"id": tc.id, "name": tc.function.name, "arguments": ""}
                else:
                    assert tc.id is None and tc.function.name is None, tc
                calls[tc.index]["arguments"] += tc.function.arguments or ""
    return content, finish, [calls[i] for i in sorted(calls)]


def whole_calls(r):
    return [{"id": t.id, "name": t.function.name, "arguments": t.function.arguments}
            for t in r.choices[0].message.tool_calls or []]


def strip_ids(calls):
    return [{k: v for k, v in c.items() if k != "id"} for c in calls]


def test_two_step_tool_loop_streamed_and_not(client):
    # step 1: the call
    r = create(client, ASK)
    assert r.choices[0].finish_reason == "tool_calls", r
    calls = whole_calls(r)
    assert [c["name"] for c in calls] == ["get_weather"], calls
    assert "paris" in json.loads(calls[0]["arguments"])["city"].lower(), calls
    content, finish, streamed = collect_stream(create(client, ASK, stream=True))
    assert finish == "tool_calls"
    assert strip_ids(streamed) == strip_ids(calls)
    assert content == (r.choices[0].message.content or "")

    # step 2: the result in a `tool` message, then the answer
    history = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]},
        {"role": "tool", "tool_call_id": calls[0]["id"],
         "content": json.dumps({"temperature_c": 22, "sky": "sunny"})},
    ]
    r2 = create(client, history)
    final = r2.choices[0].message
    assert r2.choices[0].finish_reason in ("stop", "length"), r2
    assert not final.tool_calls, final
    assert final.content and "22" in final.content, final.content
    content, finish, streamed = collect_stream(create(client, history, stream=True))
    assert (content, finish, streamed) == (final.content, r2.choices[0].finish_reason, [])


def test_required_forces_a_call(client):
    r = create(client, [{"role": "user", "content": "Hello! How are you?"}],
               tool_choice="required", parallel_tool_calls=False)
    assert r.choices[0].finish_reason == "tool_calls", r
    calls = whole_calls(r)
    assert calls and calls[0]["name"] in ("get_weather", "get_time"), calls
    json.loads(calls[0]["arguments"])


def test_named_tool_forces_that_call(client):
    r = create(client, ASK, tool_choice={"type": "function", "function": {"name": "get_time"}})
    calls = whole_calls(r)
    assert r.choices[0].finish_reason == "tool_calls", r
    assert [c["name"] for c in calls] == ["get_time"], calls
    assert isinstance(json.loads(calls[0]["arguments"])["zone"], str)


def test_unknown_named_tool_is_a_400(client):
    with pytest.raises(openai.BadRequestError) as ei:
        create(client, ASK, tool_choice={"type": "function", "function": {"name": "get_stock"}})
    err = ei.value.response.json()["error"]
    assert err["param"] == "tool_choice", err
    assert "get_stock" in err["message"], err


def test_tools_with_a_response_format_is_a_400(client):
    with pytest.raises(openai.BadRequestError) as ei:
        create(client, ASK, tool_choice="required", response_format={"type": "json_object"})
    assert ei.value.response.json()["error"]["param"] == "response_format"
