//! The firmware's command line, read over semihosting (QEMU: `-append "..."` after
//! `-kernel`). QEMU joins the words with single spaces, so the prompt comes last: every word
//! after `-p` is part of it.
//!
//! ```text
//! [-n N_PREDICT] [-c N_CTX] [--model-at ADDR --model-len BYTES] [-p PROMPT...]
//! ```

use alloc::string::String;

/// What to generate.
#[derive(Debug, Clone)]
pub struct Args {
    pub prompt: String,
    pub n_predict: usize,
    pub n_ctx: usize,
    /// A model a loader placed in memory (address, length) instead of the embedded one.
    pub model_at: Option<(usize, usize)>,
}

pub const USAGE: &str =
    "arguments: [-n N_PREDICT] [-c N_CTX] [--model-at ADDR --model-len BYTES] [-p PROMPT...]";

fn number(flag: &str, v: Option<&str>) -> Result<usize, String> {
    let v = v.ok_or_else(|| alloc::format!("{flag} needs a value ({USAGE})"))?;
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => usize::from_str_radix(hex, 16),
        None => v.parse(),
    };
    parsed.map_err(|_| alloc::format!("{flag} takes a number, not '{v}'"))
}

/// Parses the words after the program's name.
pub fn parse<'a>(mut words: impl Iterator<Item = &'a str>) -> Result<Args, String> {
    let mut a = Args {
        prompt: String::from("Once upon a time"),
        n_predict: 16,
        n_ctx: 256,
        model_at: None,
    };
    let (mut at, mut len) = (None, None);
    while let Some(w) = words.next() {
        match w {
            "-n" => a.n_predict = number(w, words.next())?,
            "-c" => a.n_ctx = number(w, words.next())?,
            "--model-at" => at = Some(number(w, words.next())?),
            "--model-len" => len = Some(number(w, words.next())?),
            "-p" => {
                a.prompt.clear();
                for (i, p) in words.by_ref().enumerate() {
                    if i > 0 {
                        a.prompt.push(' ');
                    }
                    a.prompt.push_str(p);
                }
            }
            _ => return Err(alloc::format!("unknown argument '{w}' ({USAGE})")),
        }
    }
    a.model_at = match (at, len) {
        (Some(at), Some(len)) => Some((at, len)),
        (None, None) => None,
        _ => return Err("--model-at and --model-len go together".into()),
    };
    Ok(a)
}

/// The command line QEMU passed (its first word, the program's name, skipped).
pub fn from_semihosting() -> Result<Args, String> {
    let args = semihosting::experimental::env::args::<1024>()
        .map_err(|e| alloc::format!("cannot read the command line over semihosting: {e:?}"))?;
    let mut words = alloc::vec::Vec::new();
    for w in &args {
        words.push(w.map_err(|_| String::from("the command line is not UTF-8"))?);
    }
    parse(words.into_iter().skip(1))
}
