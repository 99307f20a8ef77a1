//! Parsing a whole GGUF file (header, metadata, tensor directory) over borrowed bytes.

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::cursor::Cursor;
use super::keys;
use super::value::{read_value, Value, ValueType};
use crate::error::{Error, Result};
use crate::quant::GgmlType;

pub const MAGIC: u32 = u32::from_le_bytes(*b"GGUF");
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml tensors have at most four dimensions.
pub const MAX_DIMS: usize = 4;

/// One entry of the tensor directory.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo<'a> {
    pub name: &'a str,
    /// ggml order: `dims[0]` is the contiguous (row) dimension.
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// Offset of the data inside the data section.
    pub offset: u64,
    /// Size of the data in bytes.
    pub size: u64,
    /// The file of a split model (`gguf-split`) the data is in: 0 for an unsplit file.
    pub shard: u16,
}

impl TensorInfo<'_> {
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Elements per row (the contiguous dimension).
    pub fn row_len(&self) -> usize {
        self.dims.first().copied().unwrap_or(1) as usize
    }

    /// Number of rows (product of all other dimensions).
    pub fn n_rows(&self) -> usize {
        self.dims.iter().skip(1).product::<u64>() as usize
    }
}

/// A parsed GGUF file, or the shards of a split model joined into one view
/// ([`GgufFile::from_shards`]). Everything borrows from the input bytes.
pub struct GgufFile<'a> {
    pub(super) data: &'a [u8],
    pub(super) version: u32,
    pub(super) alignment: u64,
    pub(super) data_offset: usize,
    pub(super) metadata: Vec<(&'a str, Value<'a>)>,
    pub(super) meta_index: BTreeMap<&'a str, usize>,
    pub(super) tensors: Vec<TensorInfo<'a>>,
    pub(super) tensor_index: BTreeMap<&'a str, usize>,
    /// The other shards of a split model (empty for one file): shard `i` is `more[i - 1]`.
    pub(super) more: Vec<Shard<'a>>,
}

/// The bytes and data section of one shard after the first.
#[derive(Clone, Copy)]
pub(super) struct Shard<'a> {
    pub data: &'a [u8],
    pub data_offset: usize,
}

impl<'a> GgufFile<'a> {
    /// Parses and validates the header, metadata and tensor directory. Every count, size and
    /// offset is checked against the input length; tensor data ranges are checked to lie
    /// inside `data`.
    pub fn parse(data: &'a [u8]) -> Result<Self> {
        Self::parse_inner(data, None)
    }

    /// A GGUF header (metadata and tensor directory, no tensor data) whose tensors' offsets
    /// point into `data`, bytes held elsewhere: a Hugging Face safetensors file's data
    /// section, read in place (`std-runtime`'s `hf`). Offsets and sizes are checked against
    /// `data`; they need no alignment. [`Self::bytes`] is `data`.
    pub fn parse_detached(header: &'a [u8], data: &'a [u8]) -> Result<Self> {
        Self::parse_inner(header, Some(data))
    }

    fn parse_inner(data: &'a [u8], detached: Option<&'a [u8]>) -> Result<Self> {
        let mut c = Cursor::new(data);
        let magic = c.u32("magic")?;
        if magic != MAGIC {
            return Err(Error::BadMagic { found: magic });
        }
        let version = c.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(Error::UnsupportedVersion(version));
        }
        let n_tensors = c.u64("tensor count")?;
        let n_kv = c.u64("metadata count")?;
        // name (8) + n_dims (4) + type (4) + offset (8) is the least a tensor entry takes;
        // key (8) + type (4) + one byte of value is the least a metadata entry takes.
        if n_kv > (c.remaining() / 13) as u64 {
            return Err(Error::Absurd {
                what: "metadata count",
                value: n_kv,
            });
        }
        if n_tensors > (c.remaining() / 24) as u64 {
            return Err(Error::Absurd {
                what: "tensor count",
                value: n_tensors,
            });
        }

        let mut metadata = Vec::with_capacity(n_kv as usize);
        let mut meta_index = BTreeMap::new();
        for _ in 0..n_kv {
            let key = c.str("metadata key")?;
            let at = c.pos() as u64;
            let ty_id = c.u32("metadata value type")?;
            let ty = ValueType::from_id(ty_id).ok_or(Error::InvalidValueType {
                offset: at,
                ty: ty_id,
            })?;
            let value = read_value(&mut c, ty, 0)?;
            if meta_index.insert(key, metadata.len()).is_some() {
                return Err(Error::DuplicateKey(key.to_string()));
            }
            metadata.push((key, value));
        }

        let alignment = match meta_index.get(keys::GENERAL_ALIGNMENT) {
            None => DEFAULT_ALIGNMENT,
            Some(&i) => {
                let a = metadata[i].1.as_u64().ok_or_else(|| Error::WrongType {
                    key: keys::GENERAL_ALIGNMENT.to_string(),
                    expected: "unsigned integer",
                })?;
                if a == 0 || !a.is_power_of_two() || a > 1 << 30 {
                    return Err(Error::InvalidAlignment(a));
                }
                a
            }
        };

        let mut tensors = Vec::with_capacity(n_tensors as usize);
        let mut tensor_index = BTreeMap::new();
        for _ in 0..n_tensors {
            let t = read_tensor_info(&mut c)?;
            if detached.is_none() && !t.offset.is_multiple_of(alignment) {
                return Err(out_of_bounds(&t, data.len()));
            }
            if tensor_index.insert(t.name, tensors.len()).is_some() {
                return Err(Error::DuplicateTensor(t.name.to_string()));
            }
            tensors.push(t);
        }

        // The data section starts at the next multiple of the alignment.
        let header_end = c.pos() as u64;
        let data_offset = header_end.div_ceil(alignment) * alignment;
        if tensors.is_empty() {
            // a metadata-only file may end right after the directory
        } else if detached.is_none() && data_offset > data.len() as u64 {
            return Err(Error::Truncated {
                what: "tensor data",
                offset: header_end,
            });
        }
        let (data, data_offset) = match detached {
            Some(d) => (d, 0),
            None => (data, data_offset as usize),
        };
        let data_len = data.len().saturating_sub(data_offset) as u64;
        for t in &tensors {
            match t.offset.checked_add(t.size) {
                Some(end) if end <= data_len => {}
                _ => return Err(out_of_bounds(t, data.len())),
            }
        }

        Ok(GgufFile {
            data,
            version,
            alignment,
            data_offset,
            metadata,
            meta_index,
            tensors,
            tensor_index,
            more: Vec::new(),
        })
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Byte offset of the tensor data section inside the file (the first shard's, for a
    /// split model).
    pub fn data_offset(&self) -> usize {
        self.data_offset
    }

    /// The whole input (the first shard's bytes, for a split model).
    pub fn bytes(&self) -> &'a [u8] {
        self.data
    }

    /// How many files this view spans: 1, or the shards joined by [`Self::from_shards`].
    pub fn n_shards(&self) -> usize {
        1 + self.more.len()
    }

    /// The bytes of shard `i` (`i < n_shards()`).
    pub fn shard_bytes(&self, i: usize) -> Option<&'a [u8]> {
        self.shard(i).map(|s| s.data)
    }

    fn shard(&self, i: usize) -> Option<Shard<'a>> {
        match i {
            0 => Some(Shard {
                data: self.data,
                data_offset: self.data_offset,
            }),
            _ => self.more.get(i - 1).copied(),
        }
    }

    /// Metadata in file order.
    pub fn metadata(&self) -> &[(&'a str, Value<'a>)] {
        &self.metadata
    }

    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        self.meta_index.get(key).map(|&i| self.metadata[i].1)
    }

    /// Tensors in file order.
    pub fn tensors(&self) -> &[TensorInfo<'a>] {
        &self.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo<'a>> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// The bytes of a tensor (bounds were checked at parse time), in its shard.
    pub fn tensor_data(&self, t: &TensorInfo<'_>) -> &'a [u8] {
        let (data, data_offset) = match t.shard {
            0 => (self.data, self.data_offset),
            i => match self.more.get(i as usize - 1) {
                Some(s) => (s.data, s.data_offset),
                None => return &[],
            },
        };
        let start = data_offset + t.offset as usize;
        data.get(start..start + t.size as usize).unwrap_or(&[])
    }

    // ---- typed metadata access (errors name the key) ----

    pub fn get_str(&self, key: &str) -> Result<Option<&'a str>> {
        self.get(key)
            .map(|v| v.as_str().ok_or_else(|| wrong(key, "string")))
            .transpose()
    }

    pub fn get_u64(&self, key: &str) -> Result<Option<u64>> {
        self.get(key)
            .map(|v| v.as_u64().ok_or_else(|| wrong(key, "unsigned integer")))
            .transpose()
    }

    pub fn get_i64(&self, key: &str) -> Result<Option<i64>> {
        self.get(key)
            .map(|v| v.as_i64().ok_or_else(|| wrong(key, "integer")))
            .transpose()
    }

    pub fn get_f32(&self, key: &str) -> Result<Option<f32>> {
        self.get(key)
            .map(|v| {
                v.as_f64()
                    .map(|x| x as f32)
                    .ok_or_else(|| wrong(key, "number"))
            })
            .transpose()
    }

    pub fn get_bool(&self, key: &str) -> Result<Option<bool>> {
        self.get(key)
            .map(|v| v.as_bool().ok_or_else(|| wrong(key, "bool")))
            .transpose()
    }

    pub fn get_array(&self, key: &str) -> Result<Option<super::Array<'a>>> {
        self.get(key)
            .map(|v| v.as_array().ok_or_else(|| wrong(key, "array")))
            .transpose()
    }

    pub fn require_str(&self, key: &str) -> Result<&'a str> {
        self.get_str(key)?
            .ok_or_else(|| Error::MissingKey(key.to_string()))
    }

    pub fn require_u64(&self, key: &str) -> Result<u64> {
        self.get_u64(key)?
            .ok_or_else(|| Error::MissingKey(key.to_string()))
    }

    pub fn require_array(&self, key: &str) -> Result<super::Array<'a>> {
        self.get_array(key)?
            .ok_or_else(|| Error::MissingKey(key.to_string()))
    }
}

fn wrong(key: &str, expected: &'static str) -> Error {
    Error::WrongType {
        key: key.to_string(),
        expected,
    }
}

fn out_of_bounds(t: &TensorInfo<'_>, file_size: usize) -> Error {
    Error::TensorOutOfBounds {
        tensor: t.name.to_string(),
        offset: t.offset,
        size: t.size,
        file_size: file_size as u64,
    }
}

fn read_tensor_info<'a>(c: &mut Cursor<'a>) -> Result<TensorInfo<'a>> {
    let name = c.str("tensor name")?;
    let n_dims = c.u32("tensor dimension count")?;
    if n_dims as usize > MAX_DIMS {
        return Err(Error::Absurd {
            what: "tensor dimension count",
            value: n_dims as u64,
        });
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    let mut n_elements: u64 = 1;
    for _ in 0..n_dims {
        let d = c.u64("tensor dimension")?;
        n_elements = n_elements
            .checked_mul(d)
            .filter(|&n| n <= i64::MAX as u64)
            .ok_or(Error::Absurd {
                what: "tensor element count",
                value: d,
            })?;
        dims.push(d);
    }
    let ty_id = c.u32("tensor type")?;
    let ty = GgmlType::from_id(ty_id).ok_or_else(|| Error::UnknownTensorType {
        tensor: name.to_string(),
        ty: ty_id,
    })?;
    let offset = c.u64("tensor offset")?;
    let row = dims.first().copied().unwrap_or(1);
    if !row.is_multiple_of(ty.block_len() as u64) {
        return Err(Error::ShapeMismatch {
            tensor: name.to_string(),
            expected: alloc::format!(
                "a row length that is a multiple of {} ({})",
                ty.block_len(),
                ty
            ),
            found: alloc::format!("{dims:?}"),
        });
    }
    let size = ty.bytes_for(n_elements).ok_or(Error::Absurd {
        what: "tensor byte size",
        value: n_elements,
    })?;
    Ok(TensorInfo {
        name,
        dims,
        ty,
        offset,
        size,
        shard: 0,
    })
}

/// Formats dims like `[896, 151936]`.
pub fn dims_string(dims: &[u64]) -> String {
    alloc::format!("{dims:?}")
}
