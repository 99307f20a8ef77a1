//! Failures as the JavaScript side sees them: a stable `code` (what a program branches on)
//! and a message (what a person reads, saying what to do).

use superinfer_core::Error;

/// A typed failure; `code` is one of the strings documented in `js/src/index.d.ts`
/// (`ErrorCode`); `param` names the request field a bad request is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: &'static str,
    pub message: String,
    pub param: Option<String>,
}

impl Failure {
    pub fn new(code: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            param: None,
        }
    }

    /// `{"code": ..., "message": ...}`, with `"param"` when there is one.
    pub fn to_json(&self) -> String {
        let mut j = serde_json::json!({ "code": self.code, "message": self.message });
        if let Some(p) = &self.param {
            j["param"] = p.as_str().into();
        }
        j.to_string()
    }
}

/// A request field that is wrong, with the server's message and code (`invalid_type`,
/// `invalid_value`, `missing_required_parameter`; a schema or grammar that cannot be
/// enforced: `invalid_schema`, `unsupported_schema_keyword` with the keyword as `param`,
/// `invalid_grammar`, `grammar_too_large`; `unknown_tool`; `invalid_json` cannot reach here:
/// the package writes the JSON).
impl From<superinfer_api::Error> for Failure {
    fn from(e: superinfer_api::Error) -> Failure {
        let code = match e.code {
            "invalid_json" => "invalid_argument",
            c => c,
        };
        Failure {
            code,
            message: e.message,
            param: e.param,
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let code = match &e {
            Error::BadMagic { .. } | Error::UnsupportedVersion(_) => "not_gguf",
            // the bytes end early, or a tensor's data lies past the end of the bytes
            Error::Truncated { .. } | Error::TensorOutOfBounds { .. } => "truncated",
            Error::UnknownTensorType { .. } => "unsupported_tensor_type",
            // a known format without kernels (Weights' `check_compute`)
            Error::UnsupportedModel(m) if m.contains(" has type ") => "unsupported_tensor_type",
            Error::UnknownArchitecture(_)
            | Error::UnsupportedModel(_)
            | Error::MissingKey(_)
            | Error::MissingTensor(_)
            | Error::WrongType { .. }
            | Error::ShapeMismatch { .. } => "unsupported_model",
            Error::InvalidValueType { .. }
            | Error::Absurd { .. }
            | Error::InvalidUtf8 { .. }
            | Error::InvalidAlignment(_)
            | Error::DuplicateKey(_)
            | Error::DuplicateTensor(_) => "corrupt_gguf",
            Error::Tokenizer(_) => "tokenizer",
            Error::ContextOverflow { .. } | Error::KvPoolFull { .. } => "context_length_exceeded",
            // the shards of a split model: some missing, out of order, or of another split
            Error::InvalidArgument(_) | Error::Split(_) => "invalid_argument",
            // the npm package loads no adapters; its stable code if one ever comes through
            Error::Lora(l) => l.code(),
        };
        Failure::new(code, e.to_string())
    }
}

impl From<superinfer_template::TemplateError> for Failure {
    fn from(e: superinfer_template::TemplateError) -> Failure {
        Failure::new("template", e.0)
    }
}

pub type Result<T, E = Failure> = core::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_of_core_errors() {
        assert_eq!(Failure::from(Error::BadMagic { found: 0 }).code, "not_gguf");
        assert_eq!(
            Failure::from(Error::UnknownArchitecture("mamba".into())).code,
            "unsupported_model"
        );
        assert_eq!(
            Failure::from(Error::UnsupportedModel(
                "tensor 'blk.0.attn_q.weight' has type IQ2_XS, which this build cannot compute with".into()
            ))
            .code,
            "unsupported_tensor_type"
        );
        let j: serde_json::Value =
            serde_json::from_str(&Failure::new("network", "a \"quoted\" thing").to_json()).unwrap();
        assert_eq!(j["code"], "network");
        assert_eq!(j["message"], "a \"quoted\" thing");
        assert!(j.get("param").is_none());
        let body = serde_json::json!({"prompt": "x", "temperature": "0.2"});
        let e = superinfer_api::GenParams::parse(
            body.as_object().unwrap(),
            superinfer_api::Endpoint::Completions,
        )
        .unwrap_err();
        let j: serde_json::Value = serde_json::from_str(&Failure::from(e).to_json()).unwrap();
        assert_eq!(
            j,
            serde_json::json!({
                "code": "invalid_type",
                "message": "'temperature' must be a number, not a string",
                "param": "temperature",
            })
        );
    }
}
