//! Chat templates: the Jinja template a GGUF file carries (`tokenizer.chat_template`),
//! rendered the way Hugging Face transformers renders it, so a conversation becomes the
//! same prompt text here as in Python.
//!
//! transformers renders with jinja2's sandbox and `trim_blocks`, `lstrip_blocks`, loop
//! controls, a `tojson` filter that is Python's `json.dumps` (no HTML escaping, non-ASCII
//! kept), and the globals `raise_exception` and `strftime_now`; the variables are the
//! conversation (`messages`), `add_generation_prompt` and the special tokens' texts
//! (`bos_token`, `eos_token`). This crate sets up minijinja the same way, with
//! minijinja-contrib's Python methods (`str.strip`, `dict.items`, ...).
//!
//! ```
//! use superinfer_template::{ChatTemplate, Message};
//! let t = ChatTemplate::new(
//!     "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}\
//!      {% if add_generation_prompt %}<|assistant|>{% endif %}",
//!     "<s>",
//!     "</s>",
//! )
//! .unwrap();
//! let prompt = t.render(&[Message::new("user", "Hi")], true).unwrap();
//! assert_eq!(prompt, "<|user|>Hi\n<|assistant|>");
//! ```

mod builtin;
mod choose;
mod pyjson;
pub mod reasoning;
mod time;
pub mod tools;

use std::fmt;

use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Serde, Value};
use minijinja::{Environment, ErrorKind};
use serde::{Deserialize, Serialize};

pub use builtin::{builtin_for, BUILTIN_CHATML, BUILTIN_GEMMA};
pub use choose::{choose, choose_with_file, Override, TemplateOrigin};
pub use reasoning::Syntax;

/// One turn of a conversation, as the templates see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// A template that failed to compile or to render, with the template's own message (a
/// `raise_exception` text, an undefined variable) and the line it happened on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError(pub String);

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TemplateError {}

fn error(what: &str, e: minijinja::Error) -> TemplateError {
    let mut m = match (e.kind(), e.detail()) {
        (ErrorKind::InvalidOperation, Some(d)) => d.to_string(),
        (_, Some(d)) => format!("{}: {d}", e.kind()),
        (_, None) => e.kind().to_string(),
    };
    if let Some(line) = e.line() {
        m = format!("{m} (line {line})");
    }
    TemplateError(format!("{what}: {m}"))
}

/// A compiled chat template with the special tokens' texts it renders with.
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    bos: String,
    eos: String,
}

impl fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("source", &self.source)
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .finish()
    }
}

const NAME: &str = "chat_template";

impl ChatTemplate {
    /// Compiles `source`; `bos` and `eos` are the texts of the model's BOS and EOS tokens.
    pub fn new(source: &str, bos: &str, eos: &str) -> Result<ChatTemplate, TemplateError> {
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(false)
            .build()
            .map_err(|e| error("the chat template's syntax settings", e))?;
        env.set_syntax(syntax);
        // no auto-escaping, whatever a template is named (jinja2's default in transformers)
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", pyjson::tojson);
        env.add_function("raise_exception", |msg: String| -> Result<Value, _> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_function("strftime_now", time::strftime_now);
        env.add_template_owned(NAME, source.to_string())
            .map_err(|e| error("the chat template does not compile", e))?;
        Ok(ChatTemplate {
            env,
            source: source.to_string(),
            bos: bos.to_string(),
            eos: eos.to_string(),
        })
    }

    /// The template's Jinja source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// How the template's model writes its reasoning (Harmony channels, `<think>`, none).
    pub fn syntax(&self) -> Syntax {
        Syntax::of_template(&self.source)
    }

    pub fn bos_token(&self) -> &str {
        &self.bos
    }

    pub fn eos_token(&self) -> &str {
        &self.eos
    }

    /// Renders a conversation; `add_generation_prompt` ends the text with the opening of
    /// the assistant's turn.
    pub fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, TemplateError> {
        self.render_json(
            &serde_json::to_value(messages).expect("messages serialize"),
            add_generation_prompt,
        )
    }

    /// Renders messages given as JSON (an array of objects with `role`, `content` and any
    /// other fields the template reads, such as `tool_calls`).
    pub fn render_json(
        &self,
        messages: &serde_json::Value,
        add_generation_prompt: bool,
    ) -> Result<String, TemplateError> {
        self.render_with(messages, add_generation_prompt, &serde_json::Map::new())
    }

    /// [`ChatTemplate::render_json`] with more variables for the template (a request's
    /// `chat_template_kwargs`, gpt-oss's `reasoning_effort`), set over the usual ones as
    /// llama.cpp sets its `extra_context`.
    pub fn render_with(
        &self,
        messages: &serde_json::Value,
        add_generation_prompt: bool,
        vars: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<String, TemplateError> {
        let tmpl = self
            .env
            .get_template(NAME)
            .map_err(|e| error("the chat template", e))?;
        let harmony = self.syntax() == Syntax::Harmony;
        let adjusted;
        let messages = if harmony {
            adjusted = harmony_messages(messages);
            &adjusted
        } else {
            messages
        };
        let ctx = minijinja::context! {
            messages => Value::from(Serde(messages)),
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos.as_str(),
            eos_token => self.eos.as_str(),
        };
        let ctx = if vars.is_empty() {
            ctx
        } else {
            // the first context that has a name gives its value
            minijinja::context! { ..Value::from(Serde(vars)), ..ctx }
        };
        let mut text = tmpl
            .render(ctx)
            .map_err(|e| error("the chat template failed to render", e))?;
        if harmony && !add_generation_prompt {
            // the answer goes on after the last message: it ends with <|end|>, not with the
            // end of generation (llama.cpp's common_chat_params_init_gpt_oss)
            if let Some(p) = text.rfind("<|return|>") {
                text.replace_range(p..p + "<|return|>".len(), "<|end|>");
            }
        }
        Ok(text)
    }
}

/// Messages as gpt-oss's template wants them (llama.cpp's `common_chat_params_init_gpt_oss`):
/// an assistant's `reasoning_content` is the template's `thinking`, and a message with both
/// reasoning and tool calls drops its `content` (the template renders one or the other).
fn harmony_messages(messages: &serde_json::Value) -> serde_json::Value {
    let Some(list) = messages.as_array() else {
        return messages.clone();
    };
    let adjust = |m: &serde_json::Value| {
        let mut m = m.clone();
        if let Some(obj) = m.as_object_mut() {
            if let Some(r) = obj.get("reasoning_content").filter(|r| r.is_string()) {
                let r = r.clone();
                obj.insert("thinking".into(), r);
                let calls = obj.get("tool_calls").and_then(|c| c.as_array());
                if calls.is_some_and(|c| !c.is_empty()) {
                    obj.remove("content");
                }
            }
        }
        m
    };
    serde_json::Value::Array(list.iter().map(adjust).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_blocks_like_transformers() {
        let t = ChatTemplate::new(
            "{% for m in messages %}\n  {% if m.role == 'user' %}\nU:{{ m.content }}\n  {% endif %}\n{% endfor %}\n",
            "",
            "",
        )
        .unwrap();
        let out = t
            .render(
                &[Message::new("user", "a"), Message::new("user", "b")],
                false,
            )
            .unwrap();
        // jinja2 with trim_blocks + lstrip_blocks, trailing newline dropped
        assert_eq!(out, "U:a\nU:b\n");
    }

    #[test]
    fn raise_exception_is_an_error_with_its_message() {
        let t = ChatTemplate::new(
            "{% if messages[0].role != 'user' %}{{ raise_exception('roles must alternate') }}{% endif %}",
            "",
            "",
        )
        .unwrap();
        let e = t.render(&[Message::new("system", "x")], true).unwrap_err();
        assert!(e.0.contains("roles must alternate"), "{e}");
    }

    #[test]
    fn syntax_errors_are_reported_at_compile_time() {
        let e = ChatTemplate::new("{% for m in messages %}", "", "").unwrap_err();
        assert!(e.0.contains("does not compile"), "{e}");
    }

    #[test]
    fn python_methods_and_loop_controls() {
        let t = ChatTemplate::new(
            "{% for m in messages %}{% if loop.index0 == 1 %}{% continue %}{% endif %}\
             {{ m.content.strip().upper() }}{% if m.content.startswith(' x') %}!{% endif %}\
             {% endfor %}{{ bos_token }}{{ eos_token }}",
            "<s>",
            "</s>",
        )
        .unwrap();
        let out = t
            .render(
                &[
                    Message::new("user", " xa "),
                    Message::new("user", "skipped"),
                    Message::new("user", "b"),
                ],
                false,
            )
            .unwrap();
        assert_eq!(out, "XA!B<s></s>");
    }

    #[test]
    fn builtin_templates_render_their_formats() {
        let chatml = ChatTemplate::new(BUILTIN_CHATML, "", "").unwrap();
        let msgs = [Message::new("system", "S"), Message::new("user", "Hi")];
        assert_eq!(
            chatml.render(&msgs, true).unwrap(),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let gemma = ChatTemplate::new(BUILTIN_GEMMA, "<bos>", "<eos>").unwrap();
        assert_eq!(
            gemma.render(&msgs, true).unwrap(),
            "<bos><start_of_turn>user\nS\n\nHi<end_of_turn>\n<start_of_turn>model\n"
        );
        let e = gemma
            .render(&[Message::new("assistant", "x")], true)
            .unwrap_err();
        assert!(e.0.contains("alternate"), "{e}");
    }
}
