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
    // the writer pads the last tensor to the alignment as ggml does; a file cut inside that
    // padding still holds every tensor (llama.cpp's model loader accepts it too)
    let full = GgufFile::parse(&bytes).unwrap();
    let data_end = full
        .tensors()
        .iter()
        .map(|t| {
            let d = full.tensor_data(t);
            d.as_ptr() as usize + d.len() - bytes.as_ptr() as usize
        })
        .max()
        .unwrap();
    assert!(
        data_end < bytes.len() && bytes.len().is_multiple_of(32),
        "the sample ends in padding"
    );
    for n in 0..data_end {
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

// ---- split models (gguf-split) ----

/// A file of seven tensors of different sizes (alignment `align`, when given).
fn splittable(align: Option<u32>) -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.meta("general.architecture", MetaValue::String("llama".into()))
        .meta("test.strings", MetaValue::strings(["a", "bc", "déjà"]))
        .meta(
            "test.nested",
            MetaValue::Array(ValueType::Array, vec![MetaValue::i32s([1, 2])]),
        );
    if let Some(a) = align {
        w.meta("general.alignment", MetaValue::U32(a));
    }
    for i in 0..7u32 {
        let n = 1 + 5 * i as usize;
        let v: Vec<f32> = (0..n).map(|j| (i * 100 + j as u32) as f32).collect();
        w.tensor_f32(alloc::format!("t{i}"), &[n as u64], &v)
            .unwrap();
    }
    w.finish().unwrap()
}

fn parse_all(shards: &[Vec<u8>]) -> Vec<GgufFile<'_>> {
    shards.iter().map(|s| GgufFile::parse(s).unwrap()).collect()
}

fn split_err(r: crate::error::Result<GgufFile<'_>>) -> alloc::string::String {
    match r {
        Err(Error::Split(m)) => m,
        Err(e) => panic!("expected a split error, got {e}"),
        Ok(_) => panic!("expected a split error, got a file"),
    }
}

#[test]
fn split_shards_join_to_the_original() {
    for align in [None, Some(64)] {
        let bytes = splittable(align);
        let f = GgufFile::parse(&bytes).unwrap();
        for by in [
            SplitBy::Tensors(1),
            SplitBy::Tensors(3),
            SplitBy::Bytes(100),
        ] {
            let shards = write_shards(&f, by).unwrap();
            assert!(shards.len() > 1, "{by:?}");
            let parsed = parse_all(&shards);
            // the first shard has the model's metadata and the split keys, the others only the
            // split keys (and the alignment)
            for (i, p) in parsed.iter().enumerate() {
                let info = p.split().unwrap().unwrap();
                assert_eq!(info.no as usize, i);
                assert_eq!(info.count as usize, shards.len());
                assert_eq!(info.tensors, Some(7));
                assert_eq!(p.get("split.no"), Some(Value::U16(i as u16)));
                assert_eq!(p.get("split.tensors.count"), Some(Value::I32(7)));
                assert_eq!(p.alignment(), f.alignment());
                let n_meta = if i == 0 {
                    f.metadata().len() + 3
                } else {
                    3 + align.is_some() as usize
                };
                assert_eq!(p.metadata().len(), n_meta);
                for t in p.tensors() {
                    let at = (p.data_offset() + t.offset as usize) as u64;
                    assert!(at.is_multiple_of(f.alignment()));
                }
            }
            let joined = GgufFile::from_shards(parsed).unwrap();
            assert_eq!(joined.n_shards(), shards.len());
            joined.check_complete().unwrap();
            assert_eq!(joined.get("test.strings"), f.get("test.strings"));
            assert_eq!(joined.get("test.nested"), f.get("test.nested"));
            assert_eq!(joined.tensors().len(), 7);
            for (a, b) in joined.tensors().iter().zip(f.tensors()) {
                assert_eq!(
                    (a.name, &a.dims, a.ty, a.size),
                    (b.name, &b.dims, b.ty, b.size)
                );
                assert_eq!(joined.tensor_data(a), f.tensor_data(b));
                assert_eq!(joined.tensor(a.name).unwrap().shard, a.shard);
            }
            let per = tensors_per_shard(&joined);
            assert_eq!(per.len(), shards.len());
            assert!(per.iter().all(|&n| n > 0));
            // splitting the joined view again gives the same shards
            assert_eq!(write_shards(&joined, by).unwrap(), shards);
        }
    }
}

#[test]
fn split_plans() {
    let bytes = splittable(None);
    let f = GgufFile::parse(&bytes).unwrap();
    assert_eq!(
        plan_split(&f, SplitBy::Tensors(3)).unwrap(),
        [0..3, 3..6, 6..7]
    );
    assert_eq!(plan_split(&f, SplitBy::Tensors(100)).unwrap(), vec![0..7]);
    // sizes 4, 24, 44, 64, 84, 104, 124 bytes, padded to 32: 32, 32, 64, 64, 96, 128, 128;
    // a tensor over the limit gets a shard of its own
    assert_eq!(
        plan_split(&f, SplitBy::Bytes(100)).unwrap(),
        [0..2, 2..3, 3..4, 4..5, 5..6, 6..7]
    );
    assert_eq!(plan_split(&f, SplitBy::Bytes(1)).unwrap().len(), 7);
    assert!(plan_split(&f, SplitBy::Tensors(0)).is_err());
    assert!(plan_split(&f, SplitBy::Bytes(0)).is_err());
    let mut w = GgufWriter::new();
    w.meta("k", MetaValue::U8(1));
    let empty = w.finish().unwrap();
    assert!(plan_split(&GgufFile::parse(&empty).unwrap(), SplitBy::Tensors(1)).is_err());
}

#[test]
fn shard_names_as_llama_cpp() {
    assert_eq!(shard_file_name("dir/m", 0, 3), "dir/m-00001-of-00003.gguf");
    assert_eq!(shard_file_name("m", 11, 12), "m-00012-of-00012.gguf");
    assert_eq!(
        shard_prefix("dir/m-00002-of-00003.gguf", 1, 3),
        Some("dir/m")
    );
    assert_eq!(shard_prefix("dir/m-00002-of-00003.gguf", 0, 3), None);
    assert_eq!(shard_prefix("m.gguf", 0, 1), None);
}

#[test]
fn a_lone_unsplit_file_passes_and_a_lone_shard_names_the_others() {
    let bytes = splittable(None);
    let f = GgufFile::from_shards(vec![GgufFile::parse(&bytes).unwrap()]).unwrap();
    assert_eq!(f.n_shards(), 1);
    assert_eq!(f.tensors().len(), 7);
    f.check_complete().unwrap();
    assert_eq!(f.split().unwrap(), None);

    let shards = write_shards(&f, SplitBy::Tensors(3)).unwrap();
    let first = GgufFile::parse(&shards[0]).unwrap();
    let e = first.check_complete().unwrap_err().to_string();
    assert!(
        e.contains("first of 3 shards")
            && e.contains("-00002-of-00003.gguf")
            && e.contains("-00003-of-00003.gguf"),
        "{e}"
    );
    let m = split_err(GgufFile::from_shards(parse_all(&shards[..1])));
    assert!(m.contains("-00003-of-00003.gguf"), "{m}");
    let m = split_err(GgufFile::from_shards(parse_all(&shards[1..2])));
    assert!(
        m.contains("shard 2 of 3") && m.contains("-00001-of-00003.gguf"),
        "{m}"
    );
    let e = GgufFile::parse(&shards[2])
        .unwrap()
        .check_complete()
        .unwrap_err();
    assert!(matches!(e, Error::Split(_)));
    // a split of one shard is a whole model
    let single = write_shards(&f, SplitBy::Tensors(7)).unwrap();
    assert_eq!(single.len(), 1);
    let s = GgufFile::from_shards(parse_all(&single)).unwrap();
    assert_eq!(s.split().unwrap().unwrap().count, 1);
    s.check_complete().unwrap();
}

#[test]
fn inconsistent_shard_sets_are_clear_errors() {
    let bytes = splittable(None);
    let f = GgufFile::parse(&bytes).unwrap();
    let three = write_shards(&f, SplitBy::Tensors(3)).unwrap();
    let two = write_shards(&f, SplitBy::Tensors(4)).unwrap();

    assert!(matches!(
        GgufFile::from_shards(Vec::new()),
        Err(Error::InvalidArgument(_))
    ));
    // out of order
    let m = split_err(GgufFile::from_shards(parse_all(&[
        three[1].clone(),
        three[0].clone(),
        three[2].clone(),
    ])));
    assert!(
        m.contains("file 1 of the 3 given is shard 2 of 3") && m.contains("in order"),
        "{m}"
    );
    // a shard missing: the others say the model has 3
    let m = split_err(GgufFile::from_shards(parse_all(&[
        three[0].clone(),
        three[1].clone(),
    ])));
    assert!(m.contains("split into 3"), "{m}");
    // shards of two different splits: counts disagree
    let m = split_err(GgufFile::from_shards(parse_all(&[
        three[0].clone(),
        two[1].clone(),
        three[2].clone(),
    ])));
    assert!(
        m.contains("3 files given, but file 2 says the model is split into 2"),
        "{m}"
    );
    // a plain file among shards
    let m = split_err(GgufFile::from_shards(parse_all(&[
        three[0].clone(),
        bytes.clone(),
    ])));
    assert!(
        m.contains("2 files given, but file 1 says the model is split into 3"),
        "{m}"
    );
    let m = split_err(GgufFile::from_shards(parse_all(&[
        bytes.clone(),
        bytes.clone(),
    ])));
    assert!(m.contains("not a gguf-split shard"), "{m}");

    // the same tensor in two shards, and tensors that do not add up
    let shard = |no: u16, count: u16, total: i32, names: &[&str]| {
        let mut w = GgufWriter::new();
        if no == 0 {
            w.meta("general.architecture", MetaValue::String("llama".into()));
        }
        w.meta("split.no", MetaValue::U16(no))
            .meta("split.count", MetaValue::U16(count))
            .meta("split.tensors.count", MetaValue::I32(total));
        for n in names {
            w.tensor_f32(*n, &[1], &[1.0]).unwrap();
        }
        w.finish().unwrap()
    };
    let dup = [shard(0, 2, 2, &["a"]), shard(1, 2, 2, &["a"])];
    let m = split_err(GgufFile::from_shards(parse_all(&dup)));
    assert!(
        m.contains("tensor 'a' is in shard 1 and again in shard 2"),
        "{m}"
    );
    let short = [shard(0, 2, 3, &["a"]), shard(1, 2, 3, &["b"])];
    let m = split_err(GgufFile::from_shards(parse_all(&short)));
    assert!(m.contains("hold 2 tensors") && m.contains("says 3"), "{m}");
    let ok = [shard(0, 2, 2, &["a"]), shard(1, 2, 2, &["b"])];
    assert_eq!(
        GgufFile::from_shards(parse_all(&ok))
            .unwrap()
            .tensors()
            .len(),
        2
    );
    // split keys that cannot be right
    let bad = [shard(5, 2, 2, &["a"])];
    assert!(matches!(
        GgufFile::parse(&bad[0]).unwrap().split(),
        Err(Error::Split(_))
    ));
    let mut w = GgufWriter::new();
    w.meta("split.count", MetaValue::String("two".into()));
    let b = w.finish().unwrap();
    assert!(matches!(
        GgufFile::parse(&b).unwrap().split(),
        Err(Error::WrongType { .. })
    ));
}

/// Mutated shards join or fail, never panic, and whatever joins is fully readable.
#[test]
fn mutated_shards_never_panic() {
    let bytes = splittable(Some(64));
    let f = GgufFile::parse(&bytes).unwrap();
    let good = write_shards(&f, SplitBy::Tensors(3)).unwrap();
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut joined = 0;
    for _ in 0..2_000 {
        let mut shards = good.clone();
        let s = (next() % 3) as usize;
        let i = (next() % shards[s].len() as u64) as usize;
        shards[s][i] ^= 1 << (next() % 8);
        let Ok(parsed) = shards
            .iter()
            .map(|b| GgufFile::parse(b))
            .collect::<crate::error::Result<Vec<_>>>()
        else {
            continue;
        };
        if let Ok(j) = GgufFile::from_shards(parsed) {
            joined += 1;
            exercise(&j);
        }
    }
    assert!(joined > 0);
}
