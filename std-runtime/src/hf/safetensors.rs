//! The safetensors format read in place: an 8-byte little-endian header length, a JSON
//! header (`{"NAME": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": ...}`),
//! then the data section the offsets point into. Everything is validated before any tensor
//! is used: a truncated file, a header that is not JSON, an unknown dtype, a shape whose
//! bytes differ from its range, offsets out of the data or overlapping another tensor's
//! give an error naming the tensor and field, never a panic.

/// One tensor of the header.
#[derive(Debug, Clone, PartialEq)]
pub struct StTensor {
    pub name: String,
    pub dtype: Dtype,
    /// Row-major (the last dimension is contiguous).
    pub shape: Vec<u64>,
    /// Byte range in the data section.
    pub begin: u64,
    pub end: u64,
}

/// safetensors' element types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    Bool,
    U8,
    I8,
    I16,
    U16,
    F16,
    Bf16,
    I32,
    U32,
    F32,
    F64,
    I64,
    U64,
    F8E4M3,
    F8E5M2,
}

impl Dtype {
    fn from_name(s: &str) -> Option<Dtype> {
        use Dtype::*;
        Some(match s {
            "BOOL" => Bool,
            "U8" => U8,
            "I8" => I8,
            "I16" => I16,
            "U16" => U16,
            "F16" => F16,
            "BF16" => Bf16,
            "I32" => I32,
            "U32" => U32,
            "F32" => F32,
            "F64" => F64,
            "I64" => I64,
            "U64" => U64,
            "F8_E4M3" => F8E4M3,
            "F8_E5M2" => F8E5M2,
            _ => return None,
        })
    }

    pub fn size(self) -> u64 {
        use Dtype::*;
        match self {
            Bool | U8 | I8 | F8E4M3 | F8E5M2 => 1,
            I16 | U16 | F16 | Bf16 => 2,
            I32 | U32 | F32 => 4,
            F64 | I64 | U64 => 8,
        }
    }
}

/// A parsed file: its tensors (in data order) and where the data section starts.
#[derive(Debug)]
pub struct SafeTensors {
    pub tensors: Vec<StTensor>,
    pub data_start: usize,
}

/// Headers larger than this are refused (the reference implementation's limit).
const MAX_HEADER: u64 = 100 << 20;

/// Parses and validates the header of `bytes`, a whole safetensors file. The error is a
/// sentence naming the field or tensor at fault.
pub fn parse(bytes: &[u8]) -> Result<SafeTensors, String> {
    let Some(len) = bytes.get(..8) else {
        return Err(format!(
            "truncated: {} bytes, fewer than the 8 of the header length",
            bytes.len()
        ));
    };
    let n = u64::from_le_bytes(len.try_into().expect("8 bytes"));
    if n > MAX_HEADER {
        return Err(format!("header length {n} is larger than {MAX_HEADER}"));
    }
    let data_start = 8 + n as usize;
    let Some(header) = bytes.get(8..data_start) else {
        return Err(format!(
            "truncated: the header length says {n} bytes, the file has {} after it",
            bytes.len() - 8
        ));
    };
    let json: serde_json::Value =
        serde_json::from_slice(header).map_err(|e| format!("the header is not JSON ({e})"))?;
    let obj = json
        .as_object()
        .ok_or("the header is not a JSON object of tensors")?;
    let data_len = (bytes.len() - data_start) as u64;
    let mut tensors = Vec::with_capacity(obj.len());
    for (name, v) in obj {
        if name == "__metadata__" {
            continue;
        }
        let field = |f: &str| format!("tensor '{name}': field '{f}'");
        let dtype_name = v
            .get("dtype")
            .and_then(|d| d.as_str())
            .ok_or_else(|| format!("{} is missing or not a string", field("dtype")))?;
        let dtype = Dtype::from_name(dtype_name)
            .ok_or_else(|| format!("{} is '{dtype_name}', an unknown dtype", field("dtype")))?;
        let shape = v
            .get("shape")
            .and_then(|s| s.as_array())
            .ok_or_else(|| format!("{} is missing or not a list", field("shape")))?
            .iter()
            .map(|d| d.as_u64())
            .collect::<Option<Vec<u64>>>()
            .ok_or_else(|| format!("{} holds something other than a size", field("shape")))?;
        let offsets = v
            .get("data_offsets")
            .and_then(|s| s.as_array())
            .and_then(|a| match a[..] {
                [ref b, ref e] => Some((b.as_u64()?, e.as_u64()?)),
                _ => None,
            })
            .ok_or_else(|| format!("{} is not [begin, end]", field("data_offsets")))?;
        let (begin, end) = offsets;
        if begin > end || end > data_len {
            return Err(format!(
                "{} [{begin}, {end}] lies outside the data section ({data_len} bytes)",
                field("data_offsets")
            ));
        }
        let bytes_needed = shape
            .iter()
            .try_fold(dtype.size(), |a, &d| a.checked_mul(d))
            .ok_or_else(|| format!("{} {shape:?} is too large", field("shape")))?;
        if bytes_needed != end - begin {
            return Err(format!(
                "{} {shape:?} of {dtype_name} needs {bytes_needed} bytes, its data_offsets \
                 [{begin}, {end}] hold {}",
                field("shape"),
                end - begin
            ));
        }
        tensors.push(StTensor {
            name: name.clone(),
            dtype,
            shape,
            begin,
            end,
        });
    }
    tensors.sort_by_key(|t| (t.begin, t.end));
    for pair in tensors.windows(2) {
        if pair[1].begin < pair[0].end {
            return Err(format!(
                "tensor '{}': field 'data_offsets' [{}, {}] overlaps tensor '{}' [{}, {}]",
                pair[1].name, pair[1].begin, pair[1].end, pair[0].name, pair[0].begin, pair[0].end
            ));
        }
    }
    Ok(SafeTensors {
        tensors,
        data_start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str, data: usize) -> Vec<u8> {
        let mut b = (header.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(header.as_bytes());
        b.resize(b.len() + data, 0);
        b
    }

    #[test]
    fn reads_a_valid_header() {
        let h = r#"{"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2,3],"data_offsets":[8,32]},"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}}"#;
        let st = parse(&file(h, 32)).unwrap();
        assert_eq!(st.data_start, 8 + h.len());
        assert_eq!(st.tensors.len(), 2);
        assert_eq!(st.tensors[0].name, "a");
        assert_eq!(st.tensors[1].shape, vec![2, 3]);
        assert_eq!(st.tensors[1].dtype, Dtype::F32);
    }

    #[test]
    fn bad_headers_name_the_tensor_and_field() {
        let cases = [
            (
                r#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#,
                16,
                "overlaps",
            ),
            (
                r#"{"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#,
                8,
                "outside the data section",
            ),
            (
                r#"{"x":{"dtype":"Q9","shape":[4],"data_offsets":[0,16]}}"#,
                16,
                "unknown dtype",
            ),
            (
                r#"{"x":{"dtype":"F32","shape":[5],"data_offsets":[0,16]}}"#,
                16,
                "needs 20 bytes",
            ),
            (
                r#"{"x":{"dtype":"F32","shape":[4],"data_offsets":[16,0]}}"#,
                16,
                "outside",
            ),
            (r#"{"x":{"dtype":"F32","shape":[4]}}"#, 16, "'data_offsets'"),
            (
                r#"{"x":{"dtype":"F32","shape":[18446744073709551615, 4],"data_offsets":[0,16]}}"#,
                16,
                "too large",
            ),
            (r#"[1,2]"#, 0, "not a JSON object"),
            (r#"{"x":"#, 0, "not JSON"),
        ];
        for (h, data, want) in cases {
            let e = parse(&file(h, data)).unwrap_err();
            assert!(e.contains(want), "{h}: {e}");
            if h.contains("\"x\"") && !want.contains("JSON") {
                assert!(e.contains("tensor '"), "{h}: {e}");
            }
        }
        assert!(parse(&[1, 2, 3]).unwrap_err().contains("truncated"));
        let mut f = file("{}", 0);
        f[0] = 200;
        assert!(parse(&f).unwrap_err().contains("truncated"));
    }

    /// Random bytes and random cuts of a valid file: an error or a valid parse, never a
    /// panic.
    #[test]
    fn fuzzed_headers_never_panic() {
        let h = r#"{"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2,3],"data_offsets":[8,32]}}"#;
        let good = file(h, 32);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..3000 {
            let mut f = good.clone();
            match next() % 3 {
                0 => f.truncate((next() as usize) % good.len()),
                _ => {
                    for _ in 0..1 + next() % 4 {
                        let i = (next() as usize) % f.len();
                        f[i] = next() as u8;
                    }
                }
            }
            if let Ok(st) = parse(&f) {
                for t in &st.tensors {
                    assert!(st.data_start as u64 + t.end <= f.len() as u64);
                }
            }
        }
    }
}
