"""Structured output through the OpenAI API: `chat.completions.parse` with Pydantic models
(the client sends `response_format: {"type": "json_schema", "json_schema": {..., "strict":
true}}` and parses the answer back into the model), `json_object`, a streamed schema
answer, llama-server's `grammar` (GBNF) on /v1/completions, and the 400s of schemas and
grammars that cannot be enforced. Every answer must fit: the server holds the output to
the schema token by token, so even the 270M model and a sampled answer are valid.

The schemas bound every string, number and list (a float's digits are not bounded), so that
even an answer that fills every string to its limit ends within `max_tokens`.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from typing import Annotated, Literal, Optional

import openai
import pytest
from pydantic import BaseModel, ConfigDict, Field

from serverlib import sse_events


class Strict(BaseModel):
    """No properties beyond the model's (`additionalProperties: false`, as the client's
    strict schemas say anyway): a bare schema would let the model add keys forever."""

    model_config = ConfigDict(extra="forbid")


class Color(str, Enum):
    red = "red"
    green = "green"
    blue = "blue"


class City(Strict):
    name: str = Field(max_length=12)
    country: str = Field(max_length=12)


class Person(Strict):
    name: str = Field(max_length=16)
    age: int = Field(ge=0, le=120)


class Flag(Strict):
    ok: bool


class Pick(Strict):
    color: Color


class Mood(Strict):
    mood: Literal["happy", "sad", "neutral"]
    score: int = Field(ge=0, le=10)


class Tags(Strict):
    tags: list[Annotated[str, Field(max_length=12)]] = Field(max_length=3)


class Point(Strict):
    x: int = Field(ge=-100, le=100)
    y: int = Field(ge=-100, le=100)


class Trip(Strict):
    origin: City
    destination: City
    days: int = Field(ge=1, le=30)


class Code(Strict):
    code: str = Field(pattern=r"^[A-Z]{3}-[0-9]{2}$")


class Maybe(Strict):
    title: str = Field(max_length=16)
    subtitle: Optional[str] = Field(max_length=16)


class Scores(Strict):
    scores: list[int] = Field(min_length=1, max_length=3)
    best: Literal["a", "b"]


CASES = [
    (City, "Name a city and its country."),
    (Person, "Invent a person: name and age."),
    (Flag, "Is water wet? Answer ok true or false."),
    (Pick, "Pick a color."),
    (Mood, "How do you feel today?"),
    (Tags, "Give up to three tags for a blog post about cooking."),
    (Point, "Give a point on a grid."),
    (Trip, "Plan a short trip between two cities."),
    (Code, "Make up a product code."),
    (Maybe, "Give a book title and maybe a subtitle."),
    (Scores, "Give a few scores and say which team won."),
]
assert len(CASES) >= 10

MAX_TOKENS = 160


def parse(client, model_cls, prompt, temperature, seed=None):
    return client.chat.completions.parse(
        model=client._superinfer_model,
        messages=[{"role": "user", "content": prompt}],
        response_format=model_cls,
        max_tokens=MAX_TOKENS,
        temperature=temperature,
        seed=seed,
    )


@pytest.fixture(scope="module")
def client(server, props):
    c = server.client()
    c._superinfer_model = props["model_alias"]
    return c


@pytest.mark.parametrize("sampled", [False, True], ids=["greedy", "sampled"])
def test_parse_pydantic_models(client, sampled):
    """Every case, all at once (the server batches them): each answer parses into its
    model (the client validates it), and it was not cut short."""

    def one(i):
        model_cls, prompt = CASES[i]
        r = parse(client, model_cls, prompt, 1.0 if sampled else 0.0, seed=100 + i)
        choice = r.choices[0]
        assert choice.finish_reason == "stop", (model_cls.__name__, choice.message.content)
        parsed = choice.message.parsed
        assert isinstance(parsed, model_cls), (model_cls.__name__, choice.message.content)
        # the raw content is the JSON the parsed object came from
        assert model_cls.model_validate_json(choice.message.content) == parsed
        return r

    with ThreadPoolExecutor(max_workers=len(CASES)) as ex:
        answers = list(ex.map(one, range(len(CASES))))
    timings = answers[0].model_extra.get("timings") or {}
    assert "mask_ms" in timings and "grammar_ms" in timings, timings
    assert timings["mask_ms"]["max"] >= timings["mask_ms"]["median"] >= 0


def test_json_object(client):
    r = client.chat.completions.create(
        model=client._superinfer_model,
        messages=[{"role": "user", "content": "Describe a cat as JSON with keys name and age."}],
        response_format={"type": "json_object"},
        max_tokens=MAX_TOKENS,
        temperature=0,
    )
    text = r.choices[0].message.content
    assert text.lstrip().startswith("{"), text
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(text), dict), text


def test_streamed_schema_answer_equals_the_whole(client):
    schema = Trip.model_json_schema()
    kw = dict(
        model=client._superinfer_model,
        messages=[{"role": "user", "content": CASES[7][1]}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": "Trip", "schema": schema, "strict": True}},
        max_tokens=MAX_TOKENS,
        temperature=0,
    )
    whole = client.chat.completions.create(**kw).choices[0].message.content
    parts = []
    for chunk in client.chat.completions.create(stream=True, **kw):
        for c in chunk.choices:
            if c.delta.content:
                parts.append(c.delta.content)
    streamed = "".join(parts)
    assert streamed == whole
    Trip.model_validate_json(streamed)


def test_gbnf_grammar_on_completions(server, props):
    r = server.post("/v1/completions", {
        "model": props["model_alias"],
        "prompt": "Is the sky blue? Answer:",
        "grammar": 'root ::= " " ("yes" | "no") "."',
        "max_tokens": 8,
        "temperature": 1.0,
        "seed": 3,
    })
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["choices"][0]["text"] in (" yes.", " no."), body


@pytest.mark.parametrize("schema,code,param", [
    ({"type": "object", "properties": {"a": {"type": "nonsense"}}}, "invalid_schema", None),
    ({"type": "string", "format": "no-such-format"}, "unsupported_schema_keyword", "format"),
])
def test_bad_schemas_are_400s_with_their_code(client, schema, code, param):
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(
            model=client._superinfer_model,
            messages=[{"role": "user", "content": "hi"}],
            response_format={"type": "json_schema",
                             "json_schema": {"name": "x", "schema": schema}},
            max_tokens=4,
        )
    err = ei.value.response.json()["error"]
    assert err["code"] == code, err
    if param:
        assert err["param"] == param, err


def test_bad_grammar_is_a_400(server, props):
    r = server.post("/v1/completions", {
        "model": props["model_alias"], "prompt": "x", "grammar": "root ::= (", "max_tokens": 4,
    })
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_grammar", r.text


def test_pathological_grammar_does_not_stall_a_plain_stream(server, props):
    """A huge schema (~1 MB) and an exponential alternation, sent while a plain stream
    runs: each is refused (400) or finishes, and the stream keeps getting its tokens."""
    gaps = []

    def plain():
        last = time.monotonic()
        with server.client().chat.completions.create(
            model=props["model_alias"], stream=True, max_tokens=48, temperature=0,
            messages=[{"role": "user", "content": "Count from one to thirty."}],
        ) as stream:
            for _ in stream:
                now = time.monotonic()
                gaps.append(now - last)
                last = now

    t = threading.Thread(target=plain)
    t.start()
    big = {"type": "object",
           "properties": {f"key_{i}": {"type": "string", "maxLength": 5} for i in range(25000)}}
    assert len(json.dumps(big)) > 900_000
    alternation = "root ::= x x x x x x x x x x x x x x x x\nx ::= (\"a\" | \"a\" \"\" | \"\" \"a\")*\n"
    results = []
    for body in (
        {"prompt": "x", "json_schema": big, "max_tokens": 8},
        {"prompt": "x", "grammar": alternation, "max_tokens": 8},
    ):
        t0 = time.monotonic()
        r = server.post("/v1/completions", {"model": props["model_alias"], **body})
        results.append((r.status_code, time.monotonic() - t0, r.text[:300]))
    t.join(timeout=120)
    assert not t.is_alive()
    for status, secs, text in results:
        assert status in (200, 400), (status, text)
        assert secs < 60, (secs, text)
    assert len(gaps) > 10
    # no gap between the stream's chunks near the time a grammar could take
    assert max(gaps[1:]) < 5.0, max(gaps[1:])
