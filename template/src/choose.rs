//! Which chat template a model gets, the same for every frontend (`serve`, `chat`, the npm
//! package): a template given to replace the file's (`--chat-template FILE`), else the one
//! the model file carries (`tokenizer.chat_template`), else the built-in one for the
//! architecture. The choice does no I/O (the wasm engine uses it); [`Override::read`] reads a
//! template file for the frontends that have files.

use std::fmt;
use std::path::Path;

use crate::{builtin_for, ChatTemplate, TemplateError};

/// A template that replaces the model file's: its Jinja source, and how messages name where
/// it came from (e.g. `--chat-template prompts/chatml.jinja`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    pub label: String,
    pub source: String,
}

impl Override {
    /// The template in `path`, labelled `--chat-template PATH` (the flag that names it in
    /// `serve` and `chat`).
    pub fn read(path: &Path) -> Result<Override, TemplateError> {
        let label = format!("--chat-template {}", path.display());
        let source =
            std::fs::read_to_string(path).map_err(|e| TemplateError(format!("{label}: {e}")))?;
        Ok(Override { label, source })
    }
}

/// Where the chosen template came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateOrigin {
    /// Given to replace the file's; the override's label.
    Override(String),
    /// The model file's own `tokenizer.chat_template`.
    File,
    /// The file has none: the built-in template for the architecture ([`builtin_for`]).
    Builtin { arch: String },
}

impl TemplateOrigin {
    /// A short name for APIs: `override`, `model` or `builtin`.
    pub fn name(&self) -> &'static str {
        match self {
            TemplateOrigin::Override(_) => "override",
            TemplateOrigin::File => "model",
            TemplateOrigin::Builtin { .. } => "builtin",
        }
    }

    /// What a command-line frontend tells its user when the built-in template was taken (the
    /// model may have been trained on another format); `None` otherwise.
    pub fn note(&self) -> Option<String> {
        match self {
            TemplateOrigin::Builtin { arch } => Some(format!(
                "the model file has no chat template; using the built-in one for '{arch}' (set \
                 one with --chat-template FILE)"
            )),
            _ => None,
        }
    }
}

impl fmt::Display for TemplateOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TemplateOrigin::Override(label) => f.write_str(label),
            TemplateOrigin::File => f.write_str("the model file"),
            TemplateOrigin::Builtin { arch } => write!(f, "built in for '{arch}'"),
        }
    }
}

/// The chat template of a model: `over` if given, else `file_template` (the model file's),
/// else the built-in one for `arch` (`general.architecture`); compiled with the texts of the
/// model's BOS and EOS tokens. A template that does not compile is an error naming its
/// origin. A frontend tells its user when the built-in template was taken
/// ([`TemplateOrigin::note`]).
pub fn choose(
    over: Option<Override>,
    file_template: Option<&str>,
    arch: &str,
    bos: &str,
    eos: &str,
) -> Result<(ChatTemplate, TemplateOrigin), TemplateError> {
    let (source, origin) = match (over, file_template) {
        (Some(o), _) => (o.source, TemplateOrigin::Override(o.label)),
        (None, Some(t)) => (t.to_string(), TemplateOrigin::File),
        (None, None) => (
            builtin_for(arch).to_string(),
            TemplateOrigin::Builtin {
                arch: arch.to_string(),
            },
        ),
    };
    match ChatTemplate::new(&source, bos, eos) {
        Ok(t) => Ok((t, origin)),
        Err(e) => Err(TemplateError(format!("chat template ({origin}): {}", e.0))),
    }
}

/// [`choose`] for a frontend with files and a terminal (`serve`, `chat`): the template of
/// `path` (`--chat-template PATH`) if given, read here; a note on stderr when the built-in
/// template was taken; an error as one line.
pub fn choose_with_file(
    path: Option<&Path>,
    file_template: Option<&str>,
    arch: &str,
    bos: &str,
    eos: &str,
) -> Result<ChatTemplate, String> {
    let over = path.map(Override::read).transpose().map_err(|e| e.0)?;
    let (template, origin) = choose(over, file_template, arch, bos, eos).map_err(|e| e.0)?;
    if let Some(note) = origin.note() {
        eprintln!("note: {note}");
    }
    Ok(template)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, BUILTIN_CHATML, BUILTIN_GEMMA};

    const FILE: &str = "{% for m in messages %}[{{ m.content }}]{% endfor %}";

    #[test]
    fn override_then_file_then_builtin() {
        let over = Override {
            label: "--chat-template x.jinja".into(),
            source: "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}".into(),
        };
        let msgs = [Message::new("user", "hi")];
        let (t, o) = choose(Some(over), Some(FILE), "qwen2", "<s>", "</s>").unwrap();
        assert_eq!(
            o,
            TemplateOrigin::Override("--chat-template x.jinja".into())
        );
        assert_eq!(t.render(&msgs, false).unwrap(), "<s>hi</s>");
        let (t, o) = choose(None, Some(FILE), "qwen2", "", "").unwrap();
        assert_eq!(
            (o.name(), t.render(&msgs, false).unwrap().as_str()),
            ("model", "[hi]")
        );
        assert_eq!(o.note(), None);
        let (t, o) = choose(None, None, "gemma3", "<bos>", "<eos>").unwrap();
        assert_eq!(o.name(), "builtin");
        assert!(o.note().unwrap().contains("for 'gemma3'"));
        assert_eq!((t.source(), t.bos_token()), (BUILTIN_GEMMA, "<bos>"));
        let (t, _) = choose(None, None, "llama", "", "").unwrap();
        assert_eq!(t.source(), BUILTIN_CHATML);
    }

    #[test]
    fn a_broken_template_is_an_error_naming_its_origin() {
        let e = choose(None, Some("{% for %}"), "qwen2", "", "").unwrap_err();
        assert!(e.0.starts_with("chat template (the model file): "), "{e}");
        let over = Override {
            label: "--chat-template bad.jinja".into(),
            source: "{{".into(),
        };
        let e = choose(Some(over), None, "qwen2", "", "").unwrap_err();
        assert!(e.0.contains("(--chat-template bad.jinja)"), "{e}");
    }

    #[test]
    fn reading_a_missing_file_names_the_flag_and_path() {
        let e = Override::read(Path::new("/no/such/template.jinja")).unwrap_err();
        assert!(
            e.0.starts_with("--chat-template /no/such/template.jinja: "),
            "{e}"
        );
    }
}
