//! llama.cpp's file types (`llama_ftype`, the `general.file_type` value) and the names
//! `llama-quantize` takes for them (tools/quantize/quantize.cpp's `QUANT_OPTIONS`).

use crate::quant::GgmlType;

/// A `llama_ftype`: the whole-file quantization a user asks for (a default tensor type,
/// plus a mix of types per tensor for the `_S` / `_M` / `_L` variants).
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum FileType {
    ALL_F32 = 0,
    MOSTLY_F16 = 1,
    MOSTLY_Q4_0 = 2,
    MOSTLY_Q4_1 = 3,
    MOSTLY_Q8_0 = 7,
    MOSTLY_Q5_0 = 8,
    MOSTLY_Q5_1 = 9,
    MOSTLY_Q2_K = 10,
    MOSTLY_Q3_K_S = 11,
    MOSTLY_Q3_K_M = 12,
    MOSTLY_Q3_K_L = 13,
    MOSTLY_Q4_K_S = 14,
    MOSTLY_Q4_K_M = 15,
    MOSTLY_Q5_K_S = 16,
    MOSTLY_Q5_K_M = 17,
    MOSTLY_Q6_K = 18,
    MOSTLY_IQ2_XXS = 19,
    MOSTLY_IQ2_XS = 20,
    MOSTLY_Q2_K_S = 21,
    MOSTLY_IQ3_XS = 22,
    MOSTLY_IQ3_XXS = 23,
    MOSTLY_IQ1_S = 24,
    MOSTLY_IQ4_NL = 25,
    MOSTLY_IQ3_S = 26,
    MOSTLY_IQ3_M = 27,
    MOSTLY_IQ2_S = 28,
    MOSTLY_IQ2_M = 29,
    MOSTLY_IQ4_XS = 30,
    MOSTLY_IQ1_M = 31,
    MOSTLY_BF16 = 32,
    MOSTLY_TQ1_0 = 36,
    MOSTLY_TQ2_0 = 37,
    MOSTLY_MXFP4_MOE = 38,
    MOSTLY_NVFP4 = 39,
    MOSTLY_Q1_0 = 40,
    MOSTLY_Q2_0 = 41,
}

/// `llama-quantize`'s type names, in its order (aliases included; `COPY` is F32 with
/// nothing quantized).
pub const NAMES: &[(&str, FileType)] = {
    use FileType::*;
    &[
        ("Q1_0", MOSTLY_Q1_0),
        ("Q2_0", MOSTLY_Q2_0),
        ("Q4_0", MOSTLY_Q4_0),
        ("Q4_1", MOSTLY_Q4_1),
        ("MXFP4_MOE", MOSTLY_MXFP4_MOE),
        ("Q5_0", MOSTLY_Q5_0),
        ("Q5_1", MOSTLY_Q5_1),
        ("IQ2_XXS", MOSTLY_IQ2_XXS),
        ("IQ2_XS", MOSTLY_IQ2_XS),
        ("IQ2_S", MOSTLY_IQ2_S),
        ("IQ2_M", MOSTLY_IQ2_M),
        ("IQ1_S", MOSTLY_IQ1_S),
        ("IQ1_M", MOSTLY_IQ1_M),
        ("TQ1_0", MOSTLY_TQ1_0),
        ("TQ2_0", MOSTLY_TQ2_0),
        ("Q2_K", MOSTLY_Q2_K),
        ("Q2_K_S", MOSTLY_Q2_K_S),
        ("IQ3_XXS", MOSTLY_IQ3_XXS),
        ("IQ3_S", MOSTLY_IQ3_S),
        ("IQ3_M", MOSTLY_IQ3_M),
        ("Q3_K", MOSTLY_Q3_K_M),
        ("IQ3_XS", MOSTLY_IQ3_XS),
        ("Q3_K_S", MOSTLY_Q3_K_S),
        ("Q3_K_M", MOSTLY_Q3_K_M),
        ("Q3_K_L", MOSTLY_Q3_K_L),
        ("IQ4_NL", MOSTLY_IQ4_NL),
        ("IQ4_XS", MOSTLY_IQ4_XS),
        ("Q4_K", MOSTLY_Q4_K_M),
        ("Q4_K_S", MOSTLY_Q4_K_S),
        ("Q4_K_M", MOSTLY_Q4_K_M),
        ("Q5_K", MOSTLY_Q5_K_M),
        ("Q5_K_S", MOSTLY_Q5_K_S),
        ("Q5_K_M", MOSTLY_Q5_K_M),
        ("Q6_K", MOSTLY_Q6_K),
        ("Q8_0", MOSTLY_Q8_0),
        ("F16", MOSTLY_F16),
        ("BF16", MOSTLY_BF16),
        ("F32", ALL_F32),
        ("COPY", ALL_F32),
    ]
};

impl FileType {
    pub fn id(self) -> u32 {
        self as u32
    }

    /// The type named `name` (case-insensitive, as `llama-quantize`'s `try_parse_ftype`)
    /// and its canonical name; a number is taken as the ftype id.
    pub fn parse(name: &str) -> Option<(FileType, &'static str)> {
        if let Some(&(n, ft)) = NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            return Some((ft, n));
        }
        let id: u32 = name.parse().ok()?;
        NAMES
            .iter()
            .find(|(n, ft)| ft.id() == id && *n != "COPY")
            .map(|&(n, ft)| (ft, n))
    }

    /// The tensor type most tensors get (`llama_ftype_get_default_type`); `None` for the
    /// types whose tensor type this build has no id for (Q1_0, Q2_0, NVFP4).
    pub fn default_type(self) -> Option<GgmlType> {
        use FileType::*;
        use GgmlType as T;
        Some(match self {
            MOSTLY_Q4_0 => T::Q4_0,
            MOSTLY_Q4_1 => T::Q4_1,
            MOSTLY_Q5_0 => T::Q5_0,
            MOSTLY_Q5_1 => T::Q5_1,
            MOSTLY_Q8_0 => T::Q8_0,
            MOSTLY_F16 => T::F16,
            MOSTLY_BF16 => T::BF16,
            ALL_F32 => T::F32,
            MOSTLY_MXFP4_MOE => T::MXFP4,
            MOSTLY_Q2_K_S | MOSTLY_Q2_K => T::Q2_K,
            MOSTLY_IQ3_XS => T::IQ3_S,
            MOSTLY_Q3_K_S | MOSTLY_Q3_K_M | MOSTLY_Q3_K_L => T::Q3_K,
            MOSTLY_Q4_K_S | MOSTLY_Q4_K_M => T::Q4_K,
            MOSTLY_Q5_K_S | MOSTLY_Q5_K_M => T::Q5_K,
            MOSTLY_Q6_K => T::Q6_K,
            MOSTLY_TQ1_0 => T::TQ1_0,
            MOSTLY_TQ2_0 => T::TQ2_0,
            MOSTLY_IQ2_XXS => T::IQ2_XXS,
            MOSTLY_IQ2_XS | MOSTLY_IQ2_S => T::IQ2_XS,
            MOSTLY_IQ2_M => T::IQ2_S,
            MOSTLY_IQ3_XXS => T::IQ3_XXS,
            MOSTLY_IQ1_S => T::IQ1_S,
            MOSTLY_IQ1_M => T::IQ1_M,
            MOSTLY_IQ4_NL => T::IQ4_NL,
            MOSTLY_IQ4_XS => T::IQ4_XS,
            MOSTLY_IQ3_S | MOSTLY_IQ3_M => T::IQ3_S,
            MOSTLY_NVFP4 | MOSTLY_Q1_0 | MOSTLY_Q2_0 => return None,
        })
    }
}
