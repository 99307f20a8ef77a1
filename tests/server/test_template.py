"""The server's chat-template rendering (POST /apply-template) is byte-identical to the
Python `jinja2` package rendering the model's own template (GET /props) the way Hugging Face
transformers does (`apply_chat_template`): an ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and loop controls, `tojson` without HTML escaping, `raise_exception` and
`strftime_now`, and `messages`, `add_generation_prompt`, `bos_token`, `eos_token`.

Content given as text parts goes to a template as it is when the template takes parts;
a template that only takes strings gets the parts' texts joined with "\n" (llama.cpp's rule,
found by rendering a probe, as llama.cpp's template-capability check does)."""

from __future__ import annotations

import json
from datetime import datetime

import jinja2
import jinja2.ext
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

CONVERSATIONS = {
    "system+user": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the capital of France?"},
    ],
    "user only": [
        {"role": "user", "content": "Hello!"},
    ],
    "multi-turn": [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "content": "6"},
        {"role": "user", "content": "Thanks. Now 10*10?"},
    ],
    "text parts": [
        {"role": "system", "content": [{"type": "text", "text": "Be precise."}]},
        {"role": "user", "content": [{"type": "text", "text": "Describe a cat."}]},
    ],
    "several text parts": [
        {"role": "user", "content": [{"type": "text", "text": "First part."},
                                     {"type": "text", "text": "Second part."}]},
        {"role": "assistant", "content": "Understood."},
        {"role": "user", "content": [{"type": "text", "text": "Go on."}]},
    ],
    "unicode and emoji": [
        {"role": "system", "content": "Réponds en français, s'il te plaît. 日本語も大丈夫。"},
        {"role": "user", "content": "Ça va? 🙂👍🏽 — «quotes» \"double\" 'single' <tag> & \\ backslash"},
    ],
    "whitespace and newlines": [
        {"role": "user", "content": "  leading spaces\n\nline two\ttab\n"},
        {"role": "assistant", "content": "\nanswer with newlines\n\n"},
        {"role": "user", "content": "{{ not a template }} {% neither %}"},
    ],
    "empty content": [
        {"role": "user", "content": ""},
    ],
}


class TemplateError(Exception):
    pass


def hf_environment() -> ImmutableSandboxedEnvironment:
    """transformers' chat-template environment (utils/chat_template_utils.py)."""

    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def takes_text_parts(template: jinja2.Template, props: dict) -> bool:
    """Whether the template renders content given as text parts (the probe's text shows up,
    the parts' Python repr does not)."""
    marker = "PROBE-7f3a9c"
    msgs = [{"role": "user", "content": [{"type": "text", "text": marker}]}]
    try:
        out = template.render(messages=msgs, add_generation_prompt=False,
                              bos_token=props["bos_token"], eos_token=props["eos_token"])
    except Exception:
        return False
    return marker in out and "'type'" not in out and '"type"' not in out


def normalize(messages: list[dict], parts_ok: bool) -> list[dict]:
    if parts_ok:
        return messages
    out = []
    for m in messages:
        m = dict(m)
        if isinstance(m.get("content"), list):
            m["content"] = "\n".join(p["text"] for p in m["content"] if p.get("type") == "text")
        out.append(m)
    return out


@pytest.fixture(scope="module")
def reference(props):
    template = hf_environment().from_string(props["chat_template"])
    parts_ok = takes_text_parts(template, props)

    def render(messages, add_generation_prompt):
        return template.render(messages=normalize(messages, parts_ok),
                               add_generation_prompt=add_generation_prompt,
                               bos_token=props["bos_token"], eos_token=props["eos_token"])

    return render


@pytest.mark.parametrize("add_generation_prompt", [True, False], ids=["gen", "nogen"])
@pytest.mark.parametrize("name", list(CONVERSATIONS))
def test_template_matches_jinja2(server, reference, name, add_generation_prompt):
    messages = CONVERSATIONS[name]
    try:
        want = reference(messages, add_generation_prompt)
    except TemplateError as e:
        # the template refuses this conversation: the server must refuse it too, with a 400
        r = server.post("/apply-template", {"messages": messages,
                                            "add_generation_prompt": add_generation_prompt})
        assert r.status_code == 400, (str(e), r.status_code, r.text)
        return
    got = server.apply_template(messages, add_generation_prompt)
    assert got == want, f"\nserver: {got!r}\njinja2: {want!r}"


def test_add_generation_prompt_defaults_to_true(server, reference):
    messages = CONVERSATIONS["system+user"]
    r = server.post("/apply-template", {"messages": messages})
    assert r.status_code == 200, r.text
    assert r.json()["prompt"] == reference(messages, True)


def test_chat_prompt_is_the_rendered_template(server, props, model):
    """A chat request's prompt_tokens is the token count of the rendered template."""
    messages = CONVERSATIONS["multi-turn"]
    rendered = server.apply_template(messages, True)
    n = len(server.tokenize(rendered, add_special=False))
    n_bos = len(server.tokenize("", add_special=True))
    if not (props["bos_token"] and rendered.startswith(props["bos_token"])):
        n += n_bos
    r = server.client().chat.completions.create(model=model, messages=messages, max_tokens=1,
                                                temperature=0)
    assert r.usage.prompt_tokens == n, (r.usage, rendered)
