//! Tool calling with real chat templates (llama.cpp's `models/templates/`, pinned
//! llama-cpp-python 0.3.36): the format each template's model writes, the tools and an
//! earlier call and its result rendered into the next turn, and the call parser on each
//! format's answers, whole and streamed in pieces of every size.

use serde_json::{json, Map, Value};
use superinfer_template::reasoning::Syntax;
use superinfer_template::tools::{prepare_messages, ToolCall, ToolDelta, ToolFormat, ToolParser};
use superinfer_template::ChatTemplate;

const QWEN: &str = include_str!("data/Qwen-Qwen2.5-7B-Instruct.jinja");
const LLAMA: &str = include_str!("data/meta-llama-Llama-3.1-8B-Instruct.jinja");
const MISTRAL: &str = include_str!("data/mistralai-Mistral-Nemo-Instruct-2407.jinja");
const GPT_OSS: &str = include_str!("data/openai-gpt-oss-120b.jinja");

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}])
}

/// A conversation with a call (arguments as the OpenAI client sends them: a string) and
/// its result.
fn conversation() -> Value {
    json!([
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "abcDEF123", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "abcDEF123", "content": "22 C, sunny"},
    ])
}

fn render(source: &str, bos: &str, eos: &str) -> String {
    let t = ChatTemplate::new(source, bos, eos).unwrap();
    let mut vars = Map::new();
    vars.insert("tools".into(), tools());
    t.render_with(&prepare_messages(&conversation()), true, &vars)
        .unwrap()
}

#[test]
fn formats_from_templates() {
    assert_eq!(ToolFormat::of_template(QWEN), Some(ToolFormat::Hermes));
    assert_eq!(ToolFormat::of_template(LLAMA), Some(ToolFormat::Llama3));
    assert_eq!(ToolFormat::of_template(MISTRAL), Some(ToolFormat::Mistral));
    assert_eq!(ToolFormat::of_template(GPT_OSS), Some(ToolFormat::Harmony));
    assert_eq!(
        ToolFormat::of_template(superinfer_template::BUILTIN_GEMMA),
        None
    );
}

#[test]
fn qwen_renders_tools_the_call_and_its_result() {
    let p = render(QWEN, "", "<|im_end|>");
    assert!(p.contains("# Tools\n"), "{p}");
    assert!(
        p.contains("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\""),
        "{p}"
    );
    // the arguments string became the object the template dumps
    assert!(
        p.contains("<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"),
        "{p}"
    );
    assert!(
        p.contains("<|im_start|>user\n<tool_response>\n22 C, sunny\n</tool_response><|im_end|>\n"),
        "{p}"
    );
    assert!(p.ends_with("<|im_start|>assistant\n"), "{p}");
}

#[test]
fn llama_and_mistral_render_theirs() {
    let p = render(LLAMA, "<|begin_of_text|>", "<|eot_id|>");
    assert!(p.contains("Environment: ipython\n"), "{p}");
    assert!(
        p.contains("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"),
        "{p}"
    );
    assert!(
        p.contains("<|start_header_id|>ipython<|end_header_id|>\n\n"),
        "{p}"
    );
    let p = render(MISTRAL, "<s>", "</s>");
    assert!(
        p.contains("[AVAILABLE_TOOLS][{\"type\": \"function\""),
        "{p}"
    );
    assert!(
        p.contains("[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abcDEF123\"}]</s>"),
        "{p}"
    );
    assert!(
        p.contains(
            "[TOOL_RESULTS]{\"content\": 22 C, sunny, \"call_id\": \"abcDEF123\"}[/TOOL_RESULTS]"
        ),
        "{p}"
    );
}

#[test]
fn gpt_oss_renders_the_tool_namespace_and_call() {
    let p = render(GPT_OSS, "", "");
    assert!(p.contains("namespace functions {"), "{p}");
    assert!(p.contains("type get_weather = (_: {"), "{p}");
    assert!(p.contains("to=functions.get_weather"), "{p}");
    assert!(
        p.contains("<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>"),
        "{p}"
    );
    assert!(
        p.contains("<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"22 C, sunny\"<|end|>"),
        "{p}"
    );
}

/// Parses `text` whole and in pieces of every size: the deltas must add up to the whole.
fn parse(
    format: ToolFormat,
    syntax: Syntax,
    prompt: &str,
    text: &str,
) -> (ToolDelta, Vec<ToolCall>) {
    let (whole, calls) = ToolParser::parse(Some(format), syntax, true, prompt, text, 42);
    let chars: Vec<char> = text.chars().collect();
    for n in 1..=chars.len().max(1) {
        let mut p = ToolParser::new(Some(format), syntax, true, prompt, 42);
        let mut all = ToolDelta::default();
        let mut firsts = Vec::new();
        for piece in chars.chunks(n) {
            let d = p.push(&piece.iter().collect::<String>());
            for c in &d.calls {
                if c.name.is_some() {
                    firsts.push(c.index);
                }
            }
            all.add(d);
        }
        all.add(p.finish());
        assert_eq!(all, whole, "{text:?} in pieces of {n}");
        assert_eq!(p.calls(), calls.as_slice(), "{text:?} in pieces of {n}");
        // each call's id and name come once, in its first delta
        assert_eq!(
            firsts,
            (0..calls.len()).collect::<Vec<_>>(),
            "{text:?} in pieces of {n}"
        );
    }
    for (i, c) in calls.iter().enumerate() {
        assert_eq!(whole.calls[i].arguments, c.arguments);
        assert_eq!(whole.calls[i].name.as_deref(), Some(c.name.as_str()));
        assert_eq!(whole.calls[i].id.as_deref(), Some(c.id.as_str()));
    }
    (whole, calls)
}

fn names_args(calls: &[ToolCall]) -> Vec<(&str, &str)> {
    calls
        .iter()
        .map(|c| (c.name.as_str(), c.arguments.as_str()))
        .collect()
}

#[test]
fn hermes_calls_and_free_text_before_them() {
    let h = ToolFormat::Hermes;
    let (d, calls) = parse(
        h,
        Syntax::Plain,
        "",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
    );
    assert_eq!(d.content, "");
    assert_eq!(
        names_args(&calls),
        [("get_weather", "{\"city\": \"Paris\"}")]
    );
    assert_eq!(calls[0].id.len(), 9);
    let (d, calls) = parse(
        h,
        Syntax::Plain,
        "",
        "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": \"}<tool_call>\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>",
    );
    assert_eq!(d.content, "Let me check.\n");
    assert_eq!(
        names_args(&calls),
        [("a", "{\"x\": \"}<tool_call>\"}"), ("b", "{}")]
    );
    assert_ne!(calls[0].id, calls[1].id);
    // no call: all content, a lone '<' included
    let (d, calls) = parse(h, Syntax::Plain, "", "It is 3 < 4 <tool");
    assert_eq!((d.content.as_str(), calls.len()), ("It is 3 < 4 <tool", 0));
    // a call without arguments gets {}
    let (_, calls) = parse(
        h,
        Syntax::Plain,
        "",
        "<tool_call>\n{\"name\": \"now\"}\n</tool_call>",
    );
    assert_eq!(names_args(&calls), [("now", "{}")]);
}

#[test]
fn without_tools_a_call_is_content() {
    let text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
    let (d, calls) = ToolParser::parse(None, Syntax::Plain, true, "", text, 1);
    assert_eq!(
        (d.content.as_str(), calls.len(), d.calls.len()),
        (text, 0, 0)
    );
}

#[test]
fn thinking_then_a_call() {
    let (d, calls) = parse(
        ToolFormat::Hermes,
        Syntax::Think,
        "<|im_start|>assistant\n",
        "<think>\nNeed weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
    );
    assert_eq!(
        (d.reasoning.as_str(), d.content.as_str()),
        ("Need weather.", "")
    );
    assert_eq!(
        names_args(&calls),
        [("get_weather", "{\"city\": \"Oslo\"}")]
    );
}

#[test]
fn llama_mistral_and_harmony_calls() {
    let (d, calls) = parse(
        ToolFormat::Llama3,
        Syntax::Plain,
        "",
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}",
    );
    assert_eq!(
        (d.content.as_str(), names_args(&calls)),
        ("", vec![("get_weather", "{\"city\": \"Rome\"}")])
    );
    let (_, calls) = parse(
        ToolFormat::Llama3,
        Syntax::Plain,
        "",
        "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}",
    );
    assert_eq!(names_args(&calls), [("f", "{\"a\": 1}")]);
    let (d, calls) = parse(
        ToolFormat::Mistral,
        Syntax::Plain,
        "",
        "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {\"b\": [2]}}]",
    );
    assert_eq!(d.content, "");
    assert_eq!(
        names_args(&calls),
        [("f", "{\"a\": 1}"), ("g", "{\"b\": [2]}")]
    );
    let (d, calls) = parse(
        ToolFormat::Harmony,
        Syntax::Harmony,
        "<|start|>assistant",
        "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
    );
    assert_eq!(
        (d.reasoning.as_str(), d.content.as_str()),
        ("Need weather.", "")
    );
    assert_eq!(
        names_args(&calls),
        [("get_weather", "{\"city\": \"Paris\"}")]
    );
}

/// Small models write calls in a ```json fence or as a bare object, beside their format's
/// markers: read as calls when they name one of the tools, else left as content.
#[test]
fn loosely_written_calls_name_a_tool() {
    let h = Some(ToolFormat::Hermes);
    let names = || vec!["get_weather".to_string()];
    let check = |text: &str, content: &str, calls: &[(&str, &str)]| {
        let chars: Vec<char> = text.chars().collect();
        for n in 1..=chars.len() {
            let mut p = ToolParser::new(h, Syntax::Plain, true, "", 5).with_tools(names());
            let mut all = ToolDelta::default();
            for piece in chars.chunks(n) {
                all.add(p.push(&piece.iter().collect::<String>()));
            }
            all.add(p.finish());
            assert_eq!(all.content, content, "{text:?} in pieces of {n}");
            assert_eq!(names_args(p.calls()), calls, "{text:?} in pieces of {n}");
        }
    };
    let fenced = "```json\n{\n  \"name\": \"get_weather\",\n  \"arguments\": {\n    \"city\": \"Paris\"\n  }\n}\n```";
    check(
        fenced,
        "",
        &[("get_weather", "{\n    \"city\": \"Paris\"\n  }")],
    );
    check(
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}",
        "",
        &[("get_weather", "{\"city\": \"Rome\"}")],
    );
    // JSON that is no call stays content, byte for byte
    for text in [
        "Here:\n```json\n{\"name\": \"Bob\", \"age\": 3}\n```\nDone.",
        "```json\n[1, 2]\n```",
        "{\"a\": 1} is an object",
        "```json\n{\"a\": {\"name\": \"get_weather\"}}\n```",
    ] {
        check(text, text, &[]);
    }
    // a bare object is a call only at the start of the answer
    let later = "I would call {\"name\": \"get_weather\", \"arguments\": {}}";
    check(later, later, &[]);
}
