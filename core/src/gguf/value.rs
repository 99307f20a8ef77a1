//! Metadata values, borrowed from the file bytes. Arrays stay as raw byte ranges and are
//! decoded on iteration, so a 262k-entry vocabulary costs nothing until it is used.

use super::cursor::Cursor;
use crate::error::{Error, Result};

/// GGUF metadata value type ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    pub fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// Size of a fixed-size value, `None` for strings and arrays.
    pub fn fixed_size(self) -> Option<usize> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// The fewest bytes one value of this type can take (used to reject absurd counts).
    fn min_size(self) -> usize {
        match self {
            ValueType::String => 8,
            ValueType::Array => 12,
            t => t.fixed_size().unwrap_or(1),
        }
    }

    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }
}

/// One metadata value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
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
    /// Raw string bytes; GGUF says UTF-8 but vocabularies occasionally are not.
    String(&'a [u8]),
    Array(Array<'a>),
}

impl<'a> Value<'a> {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F32(_) => ValueType::F32,
            Value::F64(_) => ValueType::F64,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
        }
    }

    /// Any integer value that fits in u64 (negative values give `None`).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v as u64),
            Value::U16(v) => Some(v as u64),
            Value::U32(v) => Some(v as u64),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            Value::Bool(v) => Some(v as u64),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::I8(v) => Some(v as i64),
            Value::I16(v) => Some(v as i64),
            Value::I32(v) => Some(v as i64),
            Value::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&'a str> {
        match *self {
            Value::String(s) => core::str::from_utf8(s).ok(),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<Array<'a>> {
        match *self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// A typed array whose elements are decoded lazily from the validated bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Array<'a> {
    elem: ValueType,
    len: usize,
    /// Exactly the bytes of the elements (validated at parse time).
    bytes: &'a [u8],
}

impl<'a> Array<'a> {
    pub fn elem_type(&self) -> ValueType {
        self.elem
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> ArrayIter<'a> {
        ArrayIter {
            elem: self.elem,
            left: self.len,
            cur: Cursor::new(self.bytes),
        }
    }

    /// Element `i` (O(1) for fixed-size element types, O(i) for strings and arrays).
    pub fn get(&self, i: usize) -> Option<Value<'a>> {
        if i >= self.len {
            return None;
        }
        match self.elem.fixed_size() {
            Some(sz) => {
                let mut c = Cursor::at(self.bytes, i * sz);
                read_scalar(&mut c, self.elem).ok()
            }
            None => self.iter().nth(i),
        }
    }

    /// The raw element bytes (little-endian), for bulk decoding of a fixed-size array or
    /// copying any array as it is encoded.
    pub fn raw(&self) -> &'a [u8] {
        self.bytes
    }
}

pub struct ArrayIter<'a> {
    elem: ValueType,
    left: usize,
    cur: Cursor<'a>,
}

impl<'a> Iterator for ArrayIter<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Value<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The bytes were validated when the file was parsed, so this cannot fail; if it
        // somehow did, the iterator just ends.
        match read_value(&mut self.cur, self.elem, 0) {
            Ok(v) => Some(v),
            Err(_) => {
                self.left = 0;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

/// Arrays nested deeper than this are rejected (a corrupt file could otherwise recurse
/// until the stack overflows).
const MAX_DEPTH: u32 = 8;

fn read_scalar<'a>(c: &mut Cursor<'a>, ty: ValueType) -> Result<Value<'a>> {
    const W: &str = "metadata value";
    Ok(match ty {
        ValueType::U8 => Value::U8(c.u8(W)?),
        ValueType::I8 => Value::I8(c.u8(W)? as i8),
        ValueType::U16 => Value::U16(c.u16(W)?),
        ValueType::I16 => Value::I16(c.u16(W)? as i16),
        ValueType::U32 => Value::U32(c.u32(W)?),
        ValueType::I32 => Value::I32(c.u32(W)? as i32),
        ValueType::F32 => Value::F32(f32::from_bits(c.u32(W)?)),
        ValueType::U64 => Value::U64(c.u64(W)?),
        ValueType::I64 => Value::I64(c.u64(W)? as i64),
        ValueType::F64 => Value::F64(f64::from_bits(c.u64(W)?)),
        ValueType::Bool => match c.u8(W)? {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            v => {
                return Err(Error::Absurd {
                    what: "bool metadata value",
                    value: v as u64,
                })
            }
        },
        ValueType::String => Value::String(c.string("metadata string")?),
        ValueType::Array => unreachable_array(),
    })
}

#[inline]
fn unreachable_array() -> Value<'static> {
    // read_scalar is only called with non-array types; an array here is a logic error that
    // we answer with an empty array rather than a panic.
    Value::Array(Array {
        elem: ValueType::U8,
        len: 0,
        bytes: &[],
    })
}

/// Reads one value of type `ty`, validating nested arrays fully.
pub(crate) fn read_value<'a>(c: &mut Cursor<'a>, ty: ValueType, depth: u32) -> Result<Value<'a>> {
    if ty != ValueType::Array {
        return read_scalar(c, ty);
    }
    if depth >= MAX_DEPTH {
        return Err(Error::Absurd {
            what: "array nesting depth",
            value: depth as u64,
        });
    }
    let at = c.pos() as u64;
    let elem_id = c.u32("array element type")?;
    let elem = ValueType::from_id(elem_id).ok_or(Error::InvalidValueType {
        offset: at,
        ty: elem_id,
    })?;
    let count = c.len("array length")?;
    if count > (c.remaining() / elem.min_size()) as u64 {
        return Err(Error::Absurd {
            what: "array length",
            value: count,
        });
    }
    let len = count as usize;
    let start = c.pos();
    match elem.fixed_size() {
        Some(sz) => {
            c.bytes(len * sz, "array data")?;
            if elem == ValueType::Bool {
                // validate the bools once so iteration cannot fail
                let mut v = Cursor::new(c.since(start));
                for _ in 0..len {
                    read_scalar(&mut v, ValueType::Bool)?;
                }
            }
        }
        None => {
            for _ in 0..len {
                read_value(c, elem, depth + 1)?;
            }
        }
    }
    let bytes = c.since(start);
    Ok(Value::Array(Array { elem, len, bytes }))
}
