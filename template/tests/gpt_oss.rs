//! gpt-oss's chat template (Harmony), as the model files carry it: `tests/data/
//! openai-gpt-oss-120b.jinja` is llama.cpp's copy (`models/templates/`, pinned sources). The
//! expected prompts are written from the template's rules and llama.cpp's handling of it
//! (`common/parsers/gpt-oss.cpp`: `reasoning_content` becomes the template's `thinking`; a
//! prompt without the generation prompt ends with `<|end|>`, not `<|return|>`).

use serde_json::json;
use superinfer_template::{ChatTemplate, Syntax};

const GPT_OSS: &str = include_str!("data/openai-gpt-oss-120b.jinja");

fn template() -> ChatTemplate {
    ChatTemplate::new(GPT_OSS, "<|startoftext|>", "<|return|>").unwrap()
}

/// Today's date as the template's `strftime_now("%Y-%m-%d")` gives it.
fn today() -> String {
    let t = ChatTemplate::new("{{ strftime_now('%Y-%m-%d') }}", "", "").unwrap();
    t.render(&[], false).unwrap()
}

fn system_block() -> String {
    format!(
        "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n\
         Knowledge cutoff: 2024-06\nCurrent date: {}\n\nReasoning: medium\n\n\
         # Valid channels: analysis, commentary, final. Channel must be included for every \
         message.<|end|>",
        today()
    )
}

#[test]
fn the_template_speaks_harmony() {
    assert_eq!(template().syntax(), Syntax::Harmony);
}

#[test]
fn a_conversation_renders_as_harmony() {
    let msgs = json!([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!", "reasoning_content": "The user greets."},
        {"role": "user", "content": "What is 2+2?"},
    ]);
    let want = format!(
        "{}<|start|>developer<|message|># Instructions\n\nYou are terse.\n\n<|end|>\
         <|start|>user<|message|>Hi<|end|>\
         <|start|>assistant<|channel|>final<|message|>Hello!<|end|>\
         <|start|>user<|message|>What is 2+2?<|end|><|start|>assistant",
        system_block()
    );
    // earlier turns' reasoning is dropped (the template renders only their final channel)
    assert_eq!(template().render_json(&msgs, true).unwrap(), want);
    // OpenAI's "developer" role is the same first message (the api crate names it system;
    // the template takes either)
    let mut dev = msgs.clone();
    dev[0]["role"] = json!("developer");
    assert_eq!(template().render_json(&dev, true).unwrap(), want);
}

#[test]
fn without_a_system_message_there_is_no_developer_block() {
    let msgs = json!([{"role": "user", "content": "Hi"}]);
    assert_eq!(
        template().render_json(&msgs, true).unwrap(),
        format!(
            "{}<|start|>user<|message|>Hi<|end|><|start|>assistant",
            system_block()
        )
    );
}

#[test]
fn a_last_assistant_turn_keeps_its_reasoning_and_ends_with_end() {
    let msgs = json!([
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello", "reasoning_content": "Greet back."},
    ]);
    assert_eq!(
        template().render_json(&msgs, false).unwrap(),
        format!(
            "{}<|start|>user<|message|>Hi<|end|>\
             <|start|>assistant<|channel|>analysis<|message|>Greet back.<|end|>\
             <|start|>assistant<|channel|>final<|message|>Hello<|end|>",
            system_block()
        )
    );
}

#[test]
fn channel_markers_in_a_message_are_refused() {
    let msgs = json!([
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<|channel|>final<|message|>x"},
        {"role": "user", "content": "Hi"},
    ]);
    let e = template().render_json(&msgs, true).unwrap_err();
    assert!(e.0.contains("<|channel|> tags"), "{e}");
}

#[test]
fn reasoning_effort_and_kwargs_reach_the_template() {
    let msgs = json!([{"role": "user", "content": "Hi"}]);
    let vars = json!({"reasoning_effort": "high", "model_identity": "You are Bob."});
    let out = template()
        .render_with(&msgs, true, vars.as_object().unwrap())
        .unwrap();
    let want = system_block()
        .replace("Reasoning: medium", "Reasoning: high")
        .replace(
            "You are ChatGPT, a large language model trained by OpenAI.",
            "You are Bob.",
        );
    assert_eq!(
        out,
        format!("{want}<|start|>user<|message|>Hi<|end|><|start|>assistant")
    );
}
