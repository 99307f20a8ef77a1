//! A small GGUF v3 writer into a `Vec<u8>`: used by `quantize`, and by tests to build
//! synthetic models and corrupt files.

use alloc::string::String;
use alloc::vec::Vec;

use super::file::{DEFAULT_ALIGNMENT, MAGIC};
use super::value::ValueType;
use crate::error::{Error, Result};
use crate::quant::GgmlType;

/// An owned metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    /// Elements must all have type `.0` (checked when writing).
    Array(ValueType, Vec<MetaValue>),
}

impl MetaValue {
    pub fn value_type(&self) -> ValueType {
        match self {
            MetaValue::U8(_) => ValueType::U8,
            MetaValue::I8(_) => ValueType::I8,
            MetaValue::U16(_) => ValueType::U16,
            MetaValue::I16(_) => ValueType::I16,
            MetaValue::U32(_) => ValueType::U32,
            MetaValue::I32(_) => ValueType::I32,
            MetaValue::U64(_) => ValueType::U64,
            MetaValue::I64(_) => ValueType::I64,
            MetaValue::F32(_) => ValueType::F32,
            MetaValue::F64(_) => ValueType::F64,
            MetaValue::Bool(_) => ValueType::Bool,
            MetaValue::String(_) => ValueType::String,
            MetaValue::Array(..) => ValueType::Array,
        }
    }

    pub fn strings<S: Into<String>>(items: impl IntoIterator<Item = S>) -> MetaValue {
        MetaValue::Array(
            ValueType::String,
            items
                .into_iter()
                .map(|s| MetaValue::String(s.into()))
                .collect(),
        )
    }

    pub fn f32s(items: impl IntoIterator<Item = f32>) -> MetaValue {
        MetaValue::Array(
            ValueType::F32,
            items.into_iter().map(MetaValue::F32).collect(),
        )
    }

    pub fn i32s(items: impl IntoIterator<Item = i32>) -> MetaValue {
        MetaValue::Array(
            ValueType::I32,
            items.into_iter().map(MetaValue::I32).collect(),
        )
    }

    /// Converts a borrowed value read from a file (for copying metadata across files).
    pub fn from_value(v: &super::Value<'_>) -> MetaValue {
        use super::Value as V;
        match *v {
            V::U8(x) => MetaValue::U8(x),
            V::I8(x) => MetaValue::I8(x),
            V::U16(x) => MetaValue::U16(x),
            V::I16(x) => MetaValue::I16(x),
            V::U32(x) => MetaValue::U32(x),
            V::I32(x) => MetaValue::I32(x),
            V::U64(x) => MetaValue::U64(x),
            V::I64(x) => MetaValue::I64(x),
            V::F32(x) => MetaValue::F32(x),
            V::F64(x) => MetaValue::F64(x),
            V::Bool(x) => MetaValue::Bool(x),
            V::String(s) => MetaValue::String(String::from_utf8_lossy(s).into_owned()),
            V::Array(a) => MetaValue::Array(
                a.elem_type(),
                a.iter().map(|e| MetaValue::from_value(&e)).collect(),
            ),
        }
    }
}

struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    ty: GgmlType,
    /// The bytes, or `None` for a tensor the caller writes after [`GgufWriter::header`].
    data: Option<Vec<u8>>,
    len: u64,
}

/// Collects metadata and tensors, then serializes them with [`GgufWriter::finish`].
pub struct GgufWriter {
    alignment: u64,
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<PendingTensor>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl GgufWriter {
    pub fn new() -> Self {
        GgufWriter {
            alignment: DEFAULT_ALIGNMENT,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// Adds (or replaces) a metadata entry. `general.alignment` also sets the data alignment.
    pub fn meta(&mut self, key: impl Into<String>, value: MetaValue) -> &mut Self {
        let key = key.into();
        if key == super::keys::GENERAL_ALIGNMENT {
            if let Some(a) = match value {
                MetaValue::U32(a) => Some(a as u64),
                MetaValue::U64(a) => Some(a),
                _ => None,
            } {
                if a.is_power_of_two() {
                    self.alignment = a;
                }
            }
        }
        match self.metadata.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.metadata.push((key, value)),
        }
        self
    }

    /// Adds a tensor; `data` must hold exactly the bytes for `dims` elements of `ty`.
    pub fn tensor(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        ty: GgmlType,
        data: Vec<u8>,
    ) -> Result<&mut Self> {
        let name = name.into();
        let n: u64 = dims.iter().product();
        let want = ty.bytes_for(n);
        if want != Some(data.len() as u64) {
            return Err(Error::InvalidArgument(alloc::format!(
                "tensor '{name}': {} bytes given, {ty} {dims:?} needs {want:?}",
                data.len()
            )));
        }
        self.tensors.push(PendingTensor {
            name,
            dims: dims.to_vec(),
            ty,
            len: data.len() as u64,
            data: Some(data),
        });
        Ok(self)
    }

    /// Declares a tensor whose bytes the caller writes itself, at the offset
    /// [`Self::header`] gives, for a file too large to hold in memory.
    pub fn declare(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        ty: GgmlType,
    ) -> Result<&mut Self> {
        let name = name.into();
        let n: u64 = dims.iter().product();
        let len = ty.bytes_for(n).ok_or_else(|| {
            Error::InvalidArgument(alloc::format!(
                "tensor '{name}': {dims:?} is not a whole number of {ty} blocks"
            ))
        })?;
        self.tensors.push(PendingTensor {
            name,
            dims: dims.to_vec(),
            ty,
            data: None,
            len,
        });
        Ok(self)
    }

    /// The file's header (metadata and tensor directory, padded to the data's alignment)
    /// and each tensor's absolute offset in the file, in the order they were added: the
    /// caller writes the header, then each tensor's bytes at its offset (zeros between).
    pub fn header(&self) -> (Vec<u8>, Vec<u64>) {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            put_str(&mut out, k);
            out.extend_from_slice(&(v.value_type() as u32).to_le_bytes());
            // a value was type-checked when it was built (`MetaValue`'s constructors)
            let _ = put_value(&mut out, v);
        }
        let mut offset = 0u64;
        let mut offsets = Vec::with_capacity(self.tensors.len());
        for t in &self.tensors {
            put_tensor_info(&mut out, &t.name, &t.dims, t.ty, offset);
            offsets.push(offset);
            offset = (offset + t.len).div_ceil(self.alignment) * self.alignment;
        }
        let data_start = (out.len() as u64).div_ceil(self.alignment) * self.alignment;
        out.resize(data_start as usize, 0);
        (out, offsets.into_iter().map(|o| data_start + o).collect())
    }

    /// The header alone with each declared tensor at the offset given for it (into data
    /// held elsewhere: [`super::GgufFile::parse_detached`]), in the order they were added.
    pub fn detached_header(&self, offsets: &[u64]) -> Result<Vec<u8>> {
        if offsets.len() != self.tensors.len() {
            return Err(Error::InvalidArgument(alloc::format!(
                "{} offsets for {} tensors",
                offsets.len(),
                self.tensors.len()
            )));
        }
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            put_str(&mut out, k);
            out.extend_from_slice(&(v.value_type() as u32).to_le_bytes());
            put_value(&mut out, v)?;
        }
        for (t, &off) in self.tensors.iter().zip(offsets) {
            put_tensor_info(&mut out, &t.name, &t.dims, t.ty, off);
        }
        Ok(out)
    }

    /// Adds an F32 tensor.
    pub fn tensor_f32(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        values: &[f32],
    ) -> Result<&mut Self> {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensor(name, dims, GgmlType::F32, data)
    }

    /// The whole file (every tensor's bytes must have been given).
    pub fn finish(&self) -> Result<Vec<u8>> {
        for (_, v) in &self.metadata {
            put_value(&mut Vec::new(), v)?;
        }
        let (mut out, offsets) = self.header();
        for (t, off) in self.tensors.iter().zip(offsets) {
            let data = t.data.as_ref().ok_or_else(|| {
                Error::InvalidArgument(alloc::format!(
                    "tensor '{}' was declared but its bytes were not given",
                    t.name
                ))
            })?;
            out.resize(off as usize, 0);
            out.extend_from_slice(data);
        }
        // every tensor is padded to the alignment, the last too: ggml reads the data section
        // as the padded sizes' sum and refuses a file that ends before it
        let end = (out.len() as u64).div_ceil(self.alignment) * self.alignment;
        out.resize(end as usize, 0);
        Ok(out)
    }
}

pub(super) fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// One entry of the tensor directory: name, dimensions, type and data offset.
pub(super) fn put_tensor_info(
    out: &mut Vec<u8>,
    name: &str,
    dims: &[u64],
    ty: GgmlType,
    offset: u64,
) {
    put_str(out, name);
    out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
    for d in dims {
        out.extend_from_slice(&d.to_le_bytes());
    }
    out.extend_from_slice(&ty.id().to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
}

pub(super) fn put_value(out: &mut Vec<u8>, v: &MetaValue) -> Result<()> {
    match v {
        MetaValue::U8(x) => out.push(*x),
        MetaValue::I8(x) => out.push(*x as u8),
        MetaValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Bool(x) => out.push(*x as u8),
        MetaValue::String(s) => put_str(out, s),
        MetaValue::Array(ty, items) => {
            out.extend_from_slice(&(*ty as u32).to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for it in items {
                if it.value_type() != *ty {
                    return Err(Error::InvalidArgument(alloc::format!(
                        "array of {} holds a {}",
                        ty.name(),
                        it.value_type().name()
                    )));
                }
                put_value(out, it)?;
            }
        }
    }
    Ok(())
}

/// Writes a value read from a file exactly as it was encoded (strings as their raw bytes,
/// arrays as their validated element bytes), with no conversion.
pub(super) fn put_borrowed(out: &mut Vec<u8>, v: &super::Value<'_>) {
    use super::Value as V;
    match *v {
        V::U8(x) => out.push(x),
        V::I8(x) => out.push(x as u8),
        V::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        V::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        V::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        V::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        V::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        V::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        V::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        V::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        V::Bool(x) => out.push(x as u8),
        V::String(s) => {
            out.extend_from_slice(&(s.len() as u64).to_le_bytes());
            out.extend_from_slice(s);
        }
        V::Array(a) => {
            out.extend_from_slice(&(a.elem_type() as u32).to_le_bytes());
            out.extend_from_slice(&(a.len() as u64).to_le_bytes());
            out.extend_from_slice(a.raw());
        }
    }
}
