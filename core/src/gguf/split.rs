//! Models split with llama.cpp's `gguf-split`: every shard is a whole GGUF file; the first
//! carries the model's metadata, and each carries `split.no` (0-based), `split.count` and
//! `split.tensors.count` (all shards' tensors together) and its own tensors. Shards are
//! named `PREFIX-00001-of-00003.gguf` ([`shard_file_name`], llama.cpp's
//! `llama_split_path`).
//!
//! Reading: parse each shard, then [`GgufFile::from_shards`] joins them into one view whose
//! tensors know their shard, so [`GgufFile::tensor_data`] reads the right bytes. Writing:
//! [`plan_split`] decides which tensors go to which shard and [`shard_header`] encodes a
//! shard's header, after which its tensors' bytes follow as they are (the CLI's
//! `gguf-split` streams them from the mapped input; [`write_shards`] builds whole shards in
//! memory, for tests).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::ops::Range;

use super::file::{GgufFile, Shard, MAGIC};
use super::keys;
use super::value::Value;
use super::writer::{put_borrowed, put_str, put_tensor_info, put_value};
use super::MetaValue;
use crate::error::{Error, Result};

/// The split keys of one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitInfo {
    /// This shard's number, 0-based.
    pub no: u16,
    /// How many shards the model has.
    pub count: u16,
    /// Tensors in all shards together (`split.tensors.count`), when given.
    pub tensors: Option<u64>,
}

impl SplitInfo {
    /// More than one file (`split.count` 0 or 1 is an unsplit model, as in llama.cpp).
    pub fn is_split(&self) -> bool {
        self.count > 1
    }
}

/// `PREFIX-00002-of-00003.gguf` for shard `no` (0-based) of `count`: llama.cpp's
/// `llama_split_path` ("%s-%05d-of-%05d.gguf").
pub fn shard_file_name(prefix: &str, no: u16, count: u16) -> String {
    format!("{prefix}-{:05}-of-{count:05}.gguf", no as u32 + 1)
}

/// The prefix of a shard's file name or path (`"dir/model"` of
/// `"dir/model-00001-of-00003.gguf"`), when it ends as shard `no` of `count` should:
/// llama.cpp's `llama_split_prefix`.
pub fn shard_prefix(name: &str, no: u16, count: u16) -> Option<&str> {
    let tail = shard_file_name("", no, count);
    name.strip_suffix(&tail)
}

impl<'a> GgufFile<'a> {
    /// The file's split keys, if it has `split.count`.
    pub fn split(&self) -> Result<Option<SplitInfo>> {
        let Some(count) = self.get_u64(keys::SPLIT_COUNT)? else {
            return Ok(None);
        };
        let count = u16::try_from(count).map_err(|_| {
            Error::Split(format!(
                "split.count = {count} is more than a u16 can count"
            ))
        })?;
        let no = self.get_u64(keys::SPLIT_NO)?.unwrap_or(0);
        if count > 1 && no >= count as u64 {
            return Err(Error::Split(format!(
                "split.no = {no} is not below split.count = {count}"
            )));
        }
        let tensors = match self.get_i64(keys::SPLIT_TENSORS_COUNT)? {
            None => None,
            Some(t) => Some(
                u64::try_from(t)
                    .map_err(|_| Error::Split(format!("split.tensors.count = {t} is negative")))?,
            ),
        };
        Ok(Some(SplitInfo {
            no: no as u16,
            count,
            tensors,
        }))
    }

    /// Fails when this is one shard of a split model given without the others (the error
    /// names the files that are needed); a whole file, or joined shards, pass.
    pub fn check_complete(&self) -> Result<()> {
        match self.split()? {
            Some(s) if s.is_split() && self.n_shards() < s.count as usize => Err(missing_shards(s)),
            _ => Ok(()),
        }
    }

    /// Joins the shards of a split model, given in order (`split.no` 0, 1, ...), into one
    /// view: the first shard's metadata, every shard's tensors. Checks that each shard's
    /// `split.no` is its position and its `split.count` the number of shards, that no tensor
    /// name appears twice and that the tensors add up to `split.tensors.count`. One unsplit
    /// file passes through unchanged; one shard of several is an error naming the others.
    pub fn from_shards(shards: Vec<GgufFile<'a>>) -> Result<GgufFile<'a>> {
        let n = shards.len();
        if n == 0 {
            return Err(Error::InvalidArgument("no GGUF files given".into()));
        }
        if n > u16::MAX as usize {
            return Err(Error::Split(format!(
                "{n} files are more than a split model has"
            )));
        }
        let mut expected_tensors = None;
        for (i, s) in shards.iter().enumerate() {
            if s.n_shards() > 1 {
                return Err(Error::InvalidArgument(format!(
                    "file {} of the {n} given is already a joined view of shards",
                    i + 1
                )));
            }
            let info = s.split()?;
            if n == 1 {
                return match info {
                    Some(s) if s.is_split() => Err(missing_shards(s)),
                    _ => Ok(shards.into_iter().next().expect("one file")),
                };
            }
            let Some(info) = info else {
                return Err(Error::Split(format!(
                    "file {} of the {n} given is not a gguf-split shard (it has no split.count)",
                    i + 1
                )));
            };
            if info.count as usize != n {
                return Err(Error::Split(format!(
                    "{n} files given, but file {} says the model is split into {} \
                     (split.count)",
                    i + 1,
                    info.count
                )));
            }
            if info.no as usize != i {
                return Err(Error::Split(format!(
                    "file {} of the {n} given is shard {} of {n} ({}): give the shards in \
                     order, the first one first",
                    i + 1,
                    info.no as u32 + 1,
                    shard_file_name("…", info.no, info.count)
                )));
            }
            if i == 0 {
                expected_tensors = info.tensors;
            }
        }
        let mut it = shards.into_iter();
        let mut joined = it.next().expect("n > 1");
        for (i, s) in it.enumerate() {
            let shard = (i + 1) as u16;
            joined.more.push(Shard {
                data: s.data,
                data_offset: s.data_offset,
            });
            for mut t in s.tensors {
                t.shard = shard;
                if let Some(&first) = joined.tensor_index.get(t.name) {
                    return Err(Error::Split(format!(
                        "tensor '{}' is in shard {} and again in shard {}",
                        t.name,
                        joined.tensors[first].shard as u32 + 1,
                        shard as u32 + 1
                    )));
                }
                joined.tensor_index.insert(t.name, joined.tensors.len());
                joined.tensors.push(t);
            }
        }
        if let Some(want) = expected_tensors {
            if joined.tensors.len() as u64 != want {
                return Err(Error::Split(format!(
                    "the {n} shards hold {} tensors, but split.tensors.count says {want} (a \
                     shard of another split of the model?)",
                    joined.tensors.len()
                )));
            }
        }
        Ok(joined)
    }
}

fn missing_shards(s: SplitInfo) -> Error {
    let others: Vec<String> = (0..s.count)
        .filter(|&i| i != s.no)
        .map(|i| shard_file_name("…", i, s.count))
        .collect();
    let list = match others.len() {
        0..=3 => others.join(", "),
        k => format!("{} … {} ({k} files)", others[0], others[k - 1]),
    };
    if s.no == 0 {
        Error::Split(format!(
            "this is the first of {} shards and the others are needed too: {list}",
            s.count
        ))
    } else {
        Error::Split(format!(
            "this is shard {} of {}: load the first shard ({}) with the others beside it",
            s.no as u32 + 1,
            s.count,
            shard_file_name("…", 0, s.count)
        ))
    }
}

/// How `gguf-split` cuts a model (llama.cpp's `--split-max-size` / `--split-max-tensors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitBy {
    /// Shards whose tensor data (each tensor padded to the alignment) stays within this many
    /// bytes; a tensor larger than that gets a shard of its own.
    Bytes(u64),
    /// At most this many tensors a shard.
    Tensors(usize),
}

/// The tensors (ranges of indices into `f.tensors()`, in order) of each shard.
pub fn plan_split(f: &GgufFile<'_>, by: SplitBy) -> Result<Vec<Range<usize>>> {
    f.check_complete()?;
    let n = f.tensors().len();
    if n == 0 {
        return Err(Error::InvalidArgument(
            "the model has no tensors to split".into(),
        ));
    }
    let mut plan = Vec::new();
    match by {
        SplitBy::Tensors(0) | SplitBy::Bytes(0) => {
            return Err(Error::InvalidArgument(
                "a shard must be allowed at least one tensor and one byte".into(),
            ))
        }
        SplitBy::Tensors(k) => {
            let mut start = 0;
            while start < n {
                let end = start.saturating_add(k).min(n);
                plan.push(start..end);
                start = end;
            }
        }
        SplitBy::Bytes(max) => {
            let (mut start, mut used) = (0, 0u64);
            for (i, t) in f.tensors().iter().enumerate() {
                let size = t.size.div_ceil(f.alignment()).saturating_mul(f.alignment());
                if i > start && used.saturating_add(size) > max {
                    plan.push(start..i);
                    (start, used) = (i, 0);
                }
                used = used.saturating_add(size);
            }
            plan.push(start..n);
        }
    }
    if plan.len() > u16::MAX as usize {
        return Err(Error::InvalidArgument(format!(
            "{} shards are more than split.count (a u16) can count",
            plan.len()
        )));
    }
    Ok(plan)
}

/// A shard's header, and where its tensors' bytes go.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardHeader {
    /// The header, padded to where the tensor data starts.
    pub bytes: Vec<u8>,
    /// Per tensor of the shard: its index in the source's `tensors()` and the byte offset
    /// its data starts at in the shard file (each tensor is padded to the alignment).
    pub tensors: Vec<(usize, u64)>,
    /// The shard file's size.
    pub size: u64,
}

/// The header of shard `i` of `plan` ([`plan_split`]) over `f`: as llama.cpp's gguf-split
/// writes it, the first shard with all of `f`'s metadata (any old `split.*` keys left out)
/// and then `split.no`, `split.count` and `split.tensors.count`, the others with only the
/// split keys (and `general.alignment` when `f` sets one, so every shard keeps the tensor
/// alignment of the original).
pub fn shard_header(f: &GgufFile<'_>, plan: &[Range<usize>], i: usize) -> Result<ShardHeader> {
    let (Some(range), Ok(count)) = (plan.get(i), u16::try_from(plan.len())) else {
        return Err(Error::InvalidArgument(format!(
            "no shard {i} in a plan of {}",
            plan.len()
        )));
    };
    let tensors = f.tensors().get(range.clone()).ok_or_else(|| {
        Error::InvalidArgument(format!("shard {i}'s tensors {range:?} are not in the file"))
    })?;
    let total = i32::try_from(f.tensors().len())
        .map_err(|_| Error::InvalidArgument("too many tensors for split.tensors.count".into()))?;
    let mut meta: Vec<(&str, Value<'_>)> = Vec::new();
    if i == 0 {
        meta.extend(
            f.metadata()
                .iter()
                .filter(|(k, _)| !k.starts_with("split."))
                .copied(),
        );
    }
    // in llama-gguf-split's order (it sets split.count last), so the bytes are its bytes
    let split = [
        (keys::SPLIT_NO, MetaValue::U16(i as u16)),
        (keys::SPLIT_TENSORS_COUNT, MetaValue::I32(total)),
        (keys::SPLIT_COUNT, MetaValue::U16(count)),
    ];
    if i > 0 {
        if let Some(a) = f.get(keys::GENERAL_ALIGNMENT) {
            meta.push((keys::GENERAL_ALIGNMENT, a));
        }
    }

    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&((meta.len() + split.len()) as u64).to_le_bytes());
    let put = |out: &mut Vec<u8>, k: &str, ty: u32| {
        put_str(out, k);
        out.extend_from_slice(&ty.to_le_bytes());
    };
    // shard 0: the model's metadata, then the split keys; the others: split keys first
    let (before, after): (&[_], &[_]) = if i == 0 { (&meta, &[]) } else { (&[], &meta) };
    for (k, v) in before {
        put(&mut out, k, v.value_type() as u32);
        put_borrowed(&mut out, v);
    }
    for (k, v) in &split {
        put(&mut out, k, v.value_type() as u32);
        put_value(&mut out, v)?;
    }
    for (k, v) in after {
        put(&mut out, k, v.value_type() as u32);
        put_borrowed(&mut out, v);
    }
    let align = f.alignment();
    let pad = |x: u64| x.div_ceil(align) * align;
    let mut offset = 0u64;
    let mut rel = Vec::with_capacity(tensors.len());
    for t in tensors {
        put_tensor_info(&mut out, t.name, &t.dims, t.ty, offset);
        rel.push(offset);
        offset += pad(t.size);
    }
    let data_start = pad(out.len() as u64);
    out.resize(data_start as usize, 0);
    Ok(ShardHeader {
        bytes: out,
        tensors: range
            .clone()
            .zip(rel)
            .map(|(t, r)| (t, data_start + r))
            .collect(),
        size: data_start + offset,
    })
}

/// Every shard of `f` split `by`, whole, in memory (tests and small models; the CLI
/// streams instead).
pub fn write_shards(f: &GgufFile<'_>, by: SplitBy) -> Result<Vec<Vec<u8>>> {
    write_planned(f, &plan_split(f, by)?)
}

/// The shards of any `plan` (ranges of tensor indices; tests use it to write broken shard
/// sets), whole, in memory.
pub fn write_planned(f: &GgufFile<'_>, plan: &[Range<usize>]) -> Result<Vec<Vec<u8>>> {
    (0..plan.len())
        .map(|i| {
            let h = shard_header(f, plan, i)?;
            let mut out = h.bytes;
            out.resize(h.size as usize, 0);
            for (t, at) in h.tensors {
                let data = f.tensor_data(&f.tensors()[t]);
                out[at as usize..at as usize + data.len()].copy_from_slice(data);
            }
            Ok(out)
        })
        .collect()
}

/// How many tensors each shard of `f` holds.
pub fn tensors_per_shard(f: &GgufFile<'_>) -> Vec<usize> {
    let mut m = alloc::vec![0; f.n_shards()];
    for t in f.tensors() {
        if let Some(c) = m.get_mut(t.shard as usize) {
            *c += 1;
        }
    }
    m
}
