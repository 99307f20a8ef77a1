use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;

use super::*;
use crate::error::Error;
use crate::quant::GgmlType;

fn sample_file() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.meta("general.architecture", MetaValue::String("llama".into()))
        .meta("test.u8", MetaValue::U8(7))
        .meta("test.i8", MetaValue::I8(-7))
        .meta("test.u16", MetaValue::U16(65535))
        .meta("test.i16", MetaValue::I16(-300))
        .meta("test.u32", MetaValue::U32(123456))
        .meta("test.i32", MetaValue::I32(-123456))
        .meta("test.u64", MetaValue::U64(1 << 40))
        .meta("test.i64", MetaValue::I64(-(1 << 40)))
        .meta("test.f32", MetaValue::F32(1.5))
        .meta("test.f64", MetaValue::F64(-2.25))
        .meta("test.bool", MetaValue::Bool(true))
        .meta("test.strings", MetaValue::strings(["a", "bc", "", "déjà"]))
        .meta(
            "test.nested",
            MetaValue::Array(
                ValueType::Array,
                vec![
                    MetaValue::i32s([1, 2, 3]),
                    MetaValue::i32s([]),
                    MetaValue::i32s([-4]),
                ],
            ),
        );
    w.tensor_f32("a", &[4, 2], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
        .unwrap();
    w.tensor("b", &[32], GgmlType::Q8_0, vec![1u8; 34]).unwrap();
    w.finish().unwrap()
}

#[test]
fn round_trip_every_value_type() {
    let bytes = sample_file();
    let f = GgufFile::parse(&bytes).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.get_str("general.architecture").unwrap(), Some("llama"));
    assert_eq!(f.get("test.u8"), Some(Value::U8(7)));
    assert_eq!(f.get("test.i8"), Some(Value::I8(-7)));
    assert_eq!(f.get("test.u16"), Some(Value::U16(65535)));
    assert_eq!(f.get("test.i16"), Some(Value::I16(-300)));
    assert_eq!(f.get_u64("test.u32").unwrap(), Some(123456));
    assert_eq!(f.get_i64("test.i32").unwrap(), Some(-123456));
    assert_eq!(f.get_u64("test.u64").unwrap(), Some(1 << 40));
    assert_eq!(f.get_i64("test.i64").unwrap(), Some(-(1 << 40)));
    assert_eq!(f.get_f32("test.f32").unwrap(), Some(1.5));
    assert_eq!(f.get("test.f64"), Some(Value::F64(-2.25)));
    assert_eq!(f.get_bool("test.bool").unwrap(), Some(true));
    // a negative value is not an unsigned integer
    assert!(matches!(
        f.get_u64("test.i32"),
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(f.get_str("test.u8"), Err(Error::WrongType { .. })));

    let s = f.require_array("test.strings").unwrap();
    let got: Vec<_> = s.iter().map(|v| v.as_str().unwrap().to_string()).collect();
    assert_eq!(got, ["a", "bc", "", "déjà"]);
    assert_eq!(s.get(3).unwrap().as_str(), Some("déjà"));
    assert_eq!(s.get(4), None);

    let nested = f.require_array("test.nested").unwrap();
    assert_eq!(nested.len(), 3);
    let inner: Vec<Vec<i64>> = nested
        .iter()
        .map(|v| {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_i64().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(inner, vec![vec![1, 2, 3], vec![], vec![-4]]);

    let a = f.tensor("a").unwrap();
    assert_eq!(a.dims, [4, 2]);
    assert_eq!((a.row_len(), a.n_rows()), (4, 2));
    let data = f.tensor_data(a);
    assert_eq!(data.len(), 32);
    assert_eq!(f32::from_le_bytes(data[28..32].try_into().unwrap()), 7.0);
    let b = f.tensor("b").unwrap();
    assert_eq!(b.ty, GgmlType::Q8_0);
    assert_eq!(f.tensor_data(b), &[1u8; 34][..]);
    assert_eq!((f.data_offset() + b.offset as usize) % 32, 0);
}

#[test]
fn version_2_is_read_and_1_rejected() {
    let mut bytes = sample_file();
    bytes[4..8].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(GgufFile::parse(&bytes).unwrap().version(), 2);
    bytes[4..8].copy_from_slice(&1u32.to_le_bytes());
    assert!(matches!(
        GgufFile::parse(&bytes),
        Err(Error::UnsupportedVersion(1))
    ));
}

#[test]
fn custom_alignment_is_honoured() {
    let mut w = GgufWriter::new();
    w.meta("general.alignment", MetaValue::U32(64));
    w.tensor_f32("x", &[3], &[1.0, 2.0, 3.0]).unwrap();
    w.tensor_f32("y", &[1], &[9.0]).unwrap();
    let bytes = w.finish().unwrap();
    let f = GgufFile::parse(&bytes).unwrap();
    assert_eq!(f.alignment(), 64);
    assert_eq!(f.data_offset() % 64, 0);
    assert_eq!(f.tensor("y").unwrap().offset, 64);
    assert_eq!(f.tensor_data(f.tensor("y").unwrap()), 9.0f32.to_le_bytes());

    let mut w = GgufWriter::new();
    w.meta("general.alignment", MetaValue::U32(48));
    assert!(matches!(
        GgufFile::parse(&w.finish().unwrap()),
        Err(Error::InvalidAlignment(48))
    ));
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = sample_file();
    for n in 0..bytes.len() {
        match GgufFile::parse(&bytes[..n]) {
            Err(_) => {}
            Ok(_) => panic!("a file cut at {n} of {} bytes parsed", bytes.len()),
        }
    }
}

#[test]
fn bad_magic_and_corrupt_fields() {
    let good = sample_file();
    let mut b = good.clone();
    b[0] = b'X';
    assert!(matches!(GgufFile::parse(&b), Err(Error::BadMagic { .. })));

    // absurd tensor count
    let mut b = good.clone();
    b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        GgufFile::parse(&b),
        Err(Error::Absurd {
            what: "tensor count",
            ..
        })
    ));
    // absurd metadata count
    let mut b = good.clone();
    b[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(matches!(GgufFile::parse(&b), Err(Error::Absurd { .. })));
}

/// Finds the byte offset of tensor `name`'s directory entry fields after its name.
fn tensor_entry(bytes: &[u8], name: &str) -> usize {
    let mut key = (name.len() as u64).to_le_bytes().to_vec();
    key.extend_from_slice(name.as_bytes());
    bytes.windows(key.len()).rposition(|w| w == key).unwrap() + key.len()
}

#[test]
fn corrupt_tensor_offset_and_type() {
    let good = sample_file();
    let at = tensor_entry(&good, "b");
    // n_dims(4) + 1 dim(8) + type(4) then offset(8)
    let off_at = at + 4 + 8 + 4;
    let mut b = good.clone();
    b[off_at..off_at + 8].copy_from_slice(&(1u64 << 32).to_le_bytes());
    assert!(matches!(
        GgufFile::parse(&b),
        Err(Error::TensorOutOfBounds { .. })
    ));
    let mut b = good.clone();
    b[off_at..off_at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(GgufFile::parse(&b).is_err());
    // misaligned offset
    let mut b = good.clone();
    b[off_at..off_at + 8].copy_from_slice(&33u64.to_le_bytes());
    assert!(matches!(
        GgufFile::parse(&b),
        Err(Error::TensorOutOfBounds { .. })
    ));
    // unknown tensor type
    let mut b = good.clone();
    b[at + 12..at + 16].copy_from_slice(&77u32.to_le_bytes());
    assert!(matches!(
        GgufFile::parse(&b),
        Err(Error::UnknownTensorType { ty: 77, .. })
    ));
    // too many dims
    let mut b = good.clone();
    b[at..at + 4].copy_from_slice(&9u32.to_le_bytes());
    assert!(matches!(GgufFile::parse(&b), Err(Error::Absurd { .. })));
    // row length not a multiple of the block length
    let mut b = good.clone();
    b[at + 4..at + 12].copy_from_slice(&31u64.to_le_bytes());
    assert!(matches!(
        GgufFile::parse(&b),
        Err(Error::ShapeMismatch { .. })
    ));
    // element count overflow
    let a_at = tensor_entry(&good, "a");
    let mut b = good.clone();
    b[a_at + 4..a_at + 12].copy_from_slice(&(1u64 << 62).to_le_bytes());
    b[a_at + 12..a_at + 20].copy_from_slice(&(1u64 << 62).to_le_bytes());
    assert!(matches!(GgufFile::parse(&b), Err(Error::Absurd { .. })));
}

#[test]
fn duplicate_keys_and_tensors_are_rejected() {
    let mut w = GgufWriter::new();
    w.tensor_f32("t", &[1], &[1.0]).unwrap();
    w.tensor_f32("t", &[1], &[2.0]).unwrap();
    assert!(matches!(
        GgufFile::parse(&w.finish().unwrap()),
        Err(Error::DuplicateTensor(_))
    ));

    let mut w = GgufWriter::new();
    w.meta("k1", MetaValue::U8(1)).meta("k2", MetaValue::U8(2));
    let mut b = w.finish().unwrap();
    let p = b.windows(2).rposition(|x| x == b"k2").unwrap();
    b[p + 1] = b'1';
    assert!(matches!(GgufFile::parse(&b), Err(Error::DuplicateKey(_))));
}

#[test]
fn deep_nesting_is_rejected_without_recursing_forever() {
    // array of array of array ... 100 levels, each with one element, built by hand
    let mut body = Vec::new();
    for _ in 0..100 {
        body.extend_from_slice(&(ValueType::Array as u32).to_le_bytes());
        body.extend_from_slice(&1u64.to_le_bytes());
    }
    body.extend_from_slice(&(ValueType::U8 as u32).to_le_bytes());
    body.extend_from_slice(&1u64.to_le_bytes());
    body.push(0);
    let mut b = Vec::new();
    b.extend_from_slice(b"GGUF");
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes());
    b.push(b'k');
    b.extend_from_slice(&(ValueType::Array as u32).to_le_bytes());
    b.extend_from_slice(&body);
    assert!(matches!(
        GgufFile::parse(&b),
        Err(Error::Absurd {
            what: "array nesting depth",
            ..
        })
    ));
}

/// Bounded random-mutation fuzzing: mutated files must parse or fail, never panic, and
/// whatever parses must be fully readable (iterating every value and tensor slice).
#[test]
fn random_mutations_never_panic() {
    let good = sample_file();
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let iterations = if cfg!(debug_assertions) {
        4_000
    } else {
        40_000
    };
    let mut parsed = 0;
    for _ in 0..iterations {
        let mut b = good.clone();
        let edits = 1 + next() % 4;
        for _ in 0..edits {
            let i = (next() % b.len() as u64) as usize;
            match next() % 4 {
                0 => b[i] = next() as u8,
                1 => b[i] ^= 1 << (next() % 8),
                2 => {
                    // overwrite a little-endian u64/u32 with an interesting value
                    let v: u64 =
                        [0, 1, u32::MAX as u64, u64::MAX, 1 << 31, 1 << 63][(next() % 6) as usize];
                    let end = (i + 8).min(b.len());
                    let bytes = v.to_le_bytes();
                    b[i..end].copy_from_slice(&bytes[..end - i]);
                }
                _ => b.truncate(i.max(1)),
            }
        }
        if let Ok(f) = GgufFile::parse(&b) {
            parsed += 1;
            exercise(&f);
        }
    }
    assert!(
        parsed > 0,
        "no mutated file parsed: the mutations are too destructive to test accessors"
    );
}

fn exercise(f: &GgufFile<'_>) {
    fn walk(v: &Value<'_>) -> usize {
        match v {
            Value::Array(a) => {
                let mut n = 0;
                for i in 0..a.len().min(64) {
                    n += walk(&a.get(i).unwrap());
                }
                n + a.iter().count()
            }
            Value::String(s) => s.len(),
            _ => 1,
        }
    }
    for (_, v) in f.metadata() {
        walk(v);
    }
    for t in f.tensors() {
        assert_eq!(f.tensor_data(t).len() as u64, t.size);
    }
}
