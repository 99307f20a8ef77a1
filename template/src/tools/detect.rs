//! Which format a model writes its tool calls in, from its chat template's source.

/// A model's tool-call format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    /// `<tool_call>{"name": …, "arguments": …}</tool_call>` (Qwen2.5, Hermes).
    Hermes,
    /// `{"name": …, "parameters": …}`, possibly after `<|python_tag|>` (Llama 3.x).
    Llama3,
    /// `[TOOL_CALLS][{"name": …, "arguments": …}]` (Mistral).
    Mistral,
    /// gpt-oss's Harmony: a message to `functions.NAME` on the commentary channel.
    Harmony,
}

impl ToolFormat {
    /// The format the template's model writes: Harmony if it speaks of `<|channel|>`,
    /// Mistral of `[TOOL_CALLS]`, Hermes of `<tool_call>`, Llama 3.x of `<|start_header_id|>`
    /// with `ipython` (its tool role); `None` for a template that knows no tools (the
    /// server then still renders `tools` and parses the Hermes form, the most common one).
    pub fn of_template(source: &str) -> Option<ToolFormat> {
        if source.contains("<|channel|>") {
            Some(ToolFormat::Harmony)
        } else if source.contains("[TOOL_CALLS]") {
            Some(ToolFormat::Mistral)
        } else if source.contains("<tool_call>") {
            Some(ToolFormat::Hermes)
        } else if source.contains("<|start_header_id|>") && source.contains("ipython") {
            Some(ToolFormat::Llama3)
        } else {
            None
        }
    }

    /// The format's name, for logs and errors.
    pub fn name(self) -> &'static str {
        match self {
            ToolFormat::Hermes => "hermes",
            ToolFormat::Llama3 => "llama3",
            ToolFormat::Mistral => "mistral",
            ToolFormat::Harmony => "harmony",
        }
    }

    /// The key of a call's arguments in the format's JSON (`parameters` for Llama 3.x).
    pub(crate) fn args_key(self) -> &'static str {
        match self {
            ToolFormat::Llama3 => "parameters",
            _ => "arguments",
        }
    }
}
