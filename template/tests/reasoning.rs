//! The reasoning parser on llama.cpp's own cases (`tests/test-chat.cpp`, pinned sources: the
//! gpt-oss and Qwen3.5 `peg_tester` blocks), whole and streamed in pieces of every size.

use superinfer_template::reasoning::{Delta, Parser, Syntax};

const HARMONY_PROMPT: &str = "<|start|>user<|message|>Hi<|end|><|start|>assistant";

fn whole(syntax: Syntax, extract: bool, prompt: &str, text: &str) -> (String, String) {
    let d = Parser::parse(syntax, extract, prompt, text);
    (d.reasoning, d.content)
}

/// The text fed in pieces of `n` characters: the deltas must add up to the whole parse.
fn streamed(syntax: Syntax, extract: bool, prompt: &str, text: &str, n: usize) -> Delta {
    let mut p = Parser::new(syntax, extract, prompt);
    let mut all = Delta::default();
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(n) {
        let d = p.push(&piece.iter().collect::<String>());
        all.reasoning.push_str(&d.reasoning);
        all.content.push_str(&d.content);
    }
    let d = p.finish();
    all.reasoning.push_str(&d.reasoning);
    all.content.push_str(&d.content);
    all
}

fn check(syntax: Syntax, extract: bool, prompt: &str, text: &str, reasoning: &str, content: &str) {
    assert_eq!(
        whole(syntax, extract, prompt, text),
        (reasoning.to_string(), content.to_string()),
        "{text:?}"
    );
    for n in 1..=text.chars().count().max(1) {
        let d = streamed(syntax, extract, prompt, text, n);
        assert_eq!(
            (d.reasoning.as_str(), d.content.as_str()),
            (reasoning, content),
            "{text:?} in pieces of {n}"
        );
    }
}

#[test]
fn harmony_channels_as_llama_cpp_splits_them() {
    let h = Syntax::Harmony;
    let p = HARMONY_PROMPT;
    check(
        h,
        true,
        p,
        "<|channel|>final<|message|>Hello, world!\nWhat's up?",
        "",
        "Hello, world!\nWhat's up?",
    );
    check(
        h,
        true,
        p,
        "<|channel|>commentary<|message|>Hello, world!\nWhat's up?",
        "",
        "Hello, world!\nWhat's up?",
    );
    let both = "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final<|message|>Hello, world!\nWhat's up?";
    check(
        h,
        true,
        p,
        both,
        "I'm\nthinking",
        "Hello, world!\nWhat's up?",
    );
    // reasoning_format none: the analysis message stays in the content with its markers
    check(
        h,
        false,
        p,
        both,
        "",
        "<|channel|>analysis<|message|>I'm\nthinking<|end|>Hello, world!\nWhat's up?",
    );
    // cut short inside the analysis (max_tokens)
    check(
        h,
        true,
        p,
        "<|channel|>analysis<|message|>I'm\nthinking",
        "I'm\nthinking",
        "",
    );
    // stray "<|channel|>commentary to=assistant" before a channel
    check(h, true, p, "<|channel|>commentary to=assistant<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final<|message|>Hello, world!\nWhat's up?", "I'm\nthinking", "Hello, world!\nWhat's up?");
    check(h, true, p, "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary to=assistant<|channel|>final<|message|>Hello, world!\nWhat's up?", "I'm\nthinking", "Hello, world!\nWhat's up?");
    // unsolicited tool calls (no tools in the request): no content
    check(h, true, p, "<|channel|>analysis<|message|>I will execute python to say hello<|end|><|start|>assistant to=container.exec<|channel|>commentary<|message|>python3 -c 'print(\"hello\")'", "I will execute python to say hello", "");
    check(h, true, p, "<|channel|>analysis<|message|>I will execute python to say hello<|end|><|start|>assistant<|channel|>commentary to=python <|constrain|>code<|message|>print(\"hello\")", "I will execute python to say hello", "");
    // several analysis messages are concatenated; whitespace-only reasoning is dropped
    check(h, true, p, "<|channel|>analysis<|message|>a <|end|><|start|>assistant<|channel|>analysis<|message|>b<|end|><|start|>assistant<|channel|>final<|message|>c", "a b", "c");
    check(
        h,
        true,
        p,
        "<|channel|>analysis<|message|> \n<|end|><|start|>assistant<|channel|>final<|message|>c",
        "",
        "c",
    );
    // a model that ignores the format: its text is the content
    check(
        h,
        true,
        p,
        "Just text, no channels.",
        "",
        "Just text, no channels.",
    );
}

#[test]
fn harmony_tool_calls_are_kept_aside() {
    let text = "<|channel|>analysis<|message|>Thinking about edit...<|end|><|start|>assistant<|channel|>commentary to=functions.edit <|constrain|>json<|message|>{\"a\": 1}";
    for n in [1, 3, 1000] {
        let mut p = Parser::new(Syntax::Harmony, true, HARMONY_PROMPT);
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(n) {
            p.push(&piece.iter().collect::<String>());
        }
        p.finish();
        let c = &p.calls()[0];
        assert_eq!(
            (
                c.recipient.as_str(),
                c.constrain.as_deref(),
                c.body.as_str()
            ),
            ("functions.edit", Some("json"), "{\"a\": 1}")
        );
    }
}

#[test]
fn a_partial_marker_is_held_back_until_it_is_known() {
    let mut p = Parser::new(Syntax::Harmony, true, HARMONY_PROMPT);
    assert_eq!(
        p.push("<|channel|>final<|message|>Hi <|"),
        Delta {
            reasoning: String::new(),
            content: "Hi ".into()
        }
    );
    // "<|" then turns out to be text
    assert_eq!(p.push("x").content, "<|x");
    let mut p = Parser::new(Syntax::Think, true, "");
    assert_eq!(p.push("<think>a</th").reasoning, "a");
    let d = p.push("ink>b");
    assert_eq!((d.reasoning.as_str(), d.content.as_str()), ("", "b"));
}

#[test]
fn think_blocks_as_llama_cpp_splits_them() {
    let t = Syntax::Think;
    // the prompt opened the reasoning (Qwen3.5 with thinking enabled, DeepSeek-R1)
    let opened = "<|im_start|>assistant\n<think>\n";
    check(
        t,
        true,
        opened,
        "I'm\nthinking\n</think>\n\nHello, world!\nWhat's up?",
        "I'm\nthinking",
        "Hello, world!\nWhat's up?",
    );
    check(
        t,
        false,
        opened,
        "I'm\nthinking\n</think>\n\nHello, world!\nWhat's up?",
        "",
        "<think>\nI'm\nthinking\n</think>\n\nHello, world!\nWhat's up?",
    );
    // the model opens it (Qwen3)
    let plain = "<|im_start|>assistant\n";
    check(
        t,
        true,
        plain,
        "<think>\nI'm\nthinking\n</think>\n\nHello, world!\nWhat's up?",
        "I'm\nthinking",
        "Hello, world!\nWhat's up?",
    );
    check(t, true, plain, "<think>\n\n</think>\n\nHello", "", "Hello");
    check(
        t,
        true,
        plain,
        "Hello, no thoughts",
        "",
        "Hello, no thoughts",
    );
    check(
        t,
        false,
        plain,
        "<think>x</think>y",
        "",
        "<think>x</think>y",
    );
    // cut short while thinking
    check(t, true, plain, "<think>\nhmm ", "hmm", "");
}

#[test]
fn the_syntax_comes_from_the_template() {
    assert_eq!(
        Syntax::of_template("{{ '<|start|>assistant<|channel|>final' }}"),
        Syntax::Harmony
    );
    assert_eq!(Syntax::of_template("{{ '<think>\\n' }}"), Syntax::Think);
    assert_eq!(Syntax::of_template("{{ '<|im_start|>' }}"), Syntax::Plain);
    check(
        Syntax::Plain,
        true,
        "",
        "<think>x</think>",
        "",
        "<think>x</think>",
    );
}
