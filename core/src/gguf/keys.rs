//! GGUF metadata key names in one place (as in llama.cpp's `llama-arch.cpp`). Per-architecture
//! keys are formatted with the architecture name, e.g. `qwen2.block_count`.

pub const GENERAL_ALIGNMENT: &str = "general.alignment";
pub const GENERAL_ARCHITECTURE: &str = "general.architecture";
pub const GENERAL_NAME: &str = "general.name";
pub const GENERAL_FILE_TYPE: &str = "general.file_type";

/// llama.cpp's `gguf-split`: the shard's number (0-based, u16), the number of shards (u16)
/// and the tensors of all shards together (i32).
pub const SPLIT_NO: &str = "split.no";
pub const SPLIT_COUNT: &str = "split.count";
pub const SPLIT_TENSORS_COUNT: &str = "split.tensors.count";

pub const CONTEXT_LENGTH: &str = "context_length";
pub const EMBEDDING_LENGTH: &str = "embedding_length";
pub const BLOCK_COUNT: &str = "block_count";
pub const FEED_FORWARD_LENGTH: &str = "feed_forward_length";
pub const HEAD_COUNT: &str = "attention.head_count";
pub const HEAD_COUNT_KV: &str = "attention.head_count_kv";
pub const KEY_LENGTH: &str = "attention.key_length";
pub const VALUE_LENGTH: &str = "attention.value_length";
pub const RMS_EPS: &str = "attention.layer_norm_rms_epsilon";
pub const LAYERNORM_EPS: &str = "attention.layer_norm_epsilon";
pub const ATTENTION_CAUSAL: &str = "attention.causal";
pub const POOLING_TYPE: &str = "pooling_type";
pub const TOKEN_TYPE_COUNT: &str = "token_type_count";
pub const SLIDING_WINDOW: &str = "attention.sliding_window";
pub const SLIDING_WINDOW_PATTERN: &str = "attention.sliding_window_pattern";
pub const ROPE_FREQ_BASE: &str = "rope.freq_base";
pub const ROPE_DIMENSION_COUNT: &str = "rope.dimension_count";
pub const ROPE_SCALING_TYPE: &str = "rope.scaling.type";
pub const ROPE_SCALING_FACTOR: &str = "rope.scaling.factor";
pub const EXPERT_COUNT: &str = "expert_count";
pub const EXPERT_USED_COUNT: &str = "expert_used_count";
pub const EXPERT_FEED_FORWARD_LENGTH: &str = "expert_feed_forward_length";
pub const EXPERT_SHARED_FEED_FORWARD_LENGTH: &str = "expert_shared_feed_forward_length";
pub const FINAL_LOGIT_SOFTCAP: &str = "final_logit_softcapping";
pub const ATTN_LOGIT_SOFTCAP: &str = "attn_logit_softcapping";

pub const TOKENIZER_MODEL: &str = "tokenizer.ggml.model";
pub const TOKENIZER_PRE: &str = "tokenizer.ggml.pre";
pub const TOKENIZER_TOKENS: &str = "tokenizer.ggml.tokens";
pub const TOKENIZER_SCORES: &str = "tokenizer.ggml.scores";
pub const TOKENIZER_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
pub const TOKENIZER_MERGES: &str = "tokenizer.ggml.merges";
pub const TOKENIZER_BOS_ID: &str = "tokenizer.ggml.bos_token_id";
pub const TOKENIZER_EOS_ID: &str = "tokenizer.ggml.eos_token_id";
pub const TOKENIZER_EOT_ID: &str = "tokenizer.ggml.eot_token_id";
pub const TOKENIZER_EOM_ID: &str = "tokenizer.ggml.eom_token_id";
pub const TOKENIZER_UNK_ID: &str = "tokenizer.ggml.unknown_token_id";
pub const TOKENIZER_PAD_ID: &str = "tokenizer.ggml.padding_token_id";
/// (sic: llama.cpp's spelling)
pub const TOKENIZER_SEP_ID: &str = "tokenizer.ggml.seperator_token_id";
pub const TOKENIZER_PRECOMPILED_CHARSMAP: &str = "tokenizer.ggml.precompiled_charsmap";
pub const TOKENIZER_REMOVE_EXTRA_WHITESPACES: &str = "tokenizer.ggml.remove_extra_whitespaces";
pub const TOKENIZER_NORMALIZER_LOWERCASE: &str = "tokenizer.ggml.normalizer.lowercase";
pub const TOKENIZER_NORMALIZER_STRIP_ACCENTS: &str = "tokenizer.ggml.normalizer.strip_accents";
/// Set by a model loaded from a Hugging Face directory: WordPiece normalises exactly as
/// Hugging Face's BertNormalizer (not a llama.cpp key).
pub const TOKENIZER_HF_BERT_NORMALIZER: &str = "superinfer.tokenizer.hf_bert_normalizer";
pub const TOKENIZER_ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
pub const TOKENIZER_ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
pub const TOKENIZER_ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
pub const TOKENIZER_CHAT_TEMPLATE: &str = "tokenizer.chat_template";

/// `"{arch}.{key}"`.
pub fn arch_key(arch: &str, key: &str) -> alloc::string::String {
    alloc::format!("{arch}.{key}")
}
