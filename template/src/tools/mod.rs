//! Tool calling in the model's own format, read off its chat template: which format the
//! model writes its calls in ([`ToolFormat::of_template`]), the conversation prepared for the
//! template ([`prepare_messages`]: the request's `tools` and earlier calls and results), the
//! grammar that makes the calls fit the tools' schemas and the trigger it engages from
//! ([`call_grammar`]), and a streaming parser that turns the generated text into content,
//! reasoning and calls ([`ToolParser`]).
//!
//! Four formats, as llama.cpp's `common/chat.cpp` tells them apart:
//!
//! - **Hermes** (Qwen2.5, Hermes 2/3): `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`;
//! - **Llama 3.x**: `{"name": …, "parameters": {…}}`, possibly after `<|python_tag|>`;
//! - **Mistral**: `[TOOL_CALLS][{"name": …, "arguments": {…}}, …]`;
//! - **Harmony** (gpt-oss): `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>`.

mod detect;
mod grammar;
mod json_call;
mod messages;
mod stream;

pub use detect::ToolFormat;
pub use grammar::{call_grammar, CallGrammar, Mode, ToolSchema};
pub use messages::{call_id, prepare_messages};
pub use stream::{CallDelta, ToolCall, ToolDelta, ToolParser};
