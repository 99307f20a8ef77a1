use crate::args::TokenizeArgs;

pub fn run(a: &TokenizeArgs) -> Result<(), String> {
    let engine = super::load_engine(&a.model)?;
    let ids = engine
        .tokenizer()
        .encode(&a.prompt, !a.no_bos, !a.no_parse_special)
        .map_err(|e| e.to_string())?;
    let json = serde_json::to_string(&ids).map_err(|e| e.to_string())?;
    super::write_stdout(&format!("{json}\n"))
}
