//! Templates for models whose file carries none: llama.cpp falls back to ChatML; a Gemma
//! model gets Gemma's turn format instead, which is what it was trained on.

/// ChatML (`<|im_start|>role\n...<|im_end|>`), llama.cpp's fallback.
pub const BUILTIN_CHATML: &str = "\
{%- for message in messages -%}
{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\\n' -}}
{%- endif -%}";

/// Gemma's turns (`<start_of_turn>user` / `model`), a system message folded into the first
/// user turn, roles alternating.
pub const BUILTIN_GEMMA: &str = "\
{{- bos_token -}}
{%- if messages and messages[0]['role'] == 'system' -%}
{%- set prefix = messages[0]['content'] | trim + '\\n\\n' -%}
{%- set turns = messages[1:] -%}
{%- else -%}
{%- set prefix = '' -%}
{%- set turns = messages -%}
{%- endif -%}
{%- for message in turns -%}
{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') -}}
{%- endif -%}
{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
{{- '<start_of_turn>' + role + '\\n' + (prefix if loop.first else '') + message['content'] | trim + '<end_of_turn>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<start_of_turn>model\\n' -}}
{%- endif -%}";

/// The built-in template for a model of architecture `arch` (`general.architecture`) whose
/// file has no chat template.
pub fn builtin_for(arch: &str) -> &'static str {
    if arch.starts_with("gemma") {
        BUILTIN_GEMMA
    } else {
        BUILTIN_CHATML
    }
}
