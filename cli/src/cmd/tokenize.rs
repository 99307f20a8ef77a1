use crate::args::TokenizeArgs;

/// `superinfer tokenize`: only the file's tokenizer is loaded (as `llama-tokenize`), so a
/// vocab-only GGUF file works as well as a model.
pub fn run(a: &TokenizeArgs) -> Result<(), String> {
    let tokenizer = superinfer_runtime::load_tokenizer(&a.model.model)
        .map_err(|e| superinfer_runtime::chain(&e))?;
    let ids = tokenizer
        .encode(&a.prompt, !a.no_bos, !a.no_parse_special)
        .map_err(|e| e.to_string())?;
    let json = serde_json::to_string(&ids).map_err(|e| e.to_string())?;
    super::write_stdout(&format!("{json}\n"))
}
