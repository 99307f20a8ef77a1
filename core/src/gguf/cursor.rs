//! A bounds-checked little-endian cursor over the GGUF bytes. Every read either succeeds
//! inside the slice or returns [`Error::Truncated`]; nothing here can panic.

use crate::error::{Error, Result};

#[derive(Clone)]
pub(crate) struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Cursor { data, pos: 0 }
    }

    pub fn at(data: &'a [u8], pos: usize) -> Self {
        Cursor { data, pos }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    /// The bytes consumed between `start` and the current position.
    pub fn since(&self, start: usize) -> &'a [u8] {
        self.data.get(start..self.pos).unwrap_or(&[])
    }

    pub fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }

    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        match end {
            Some(end) => {
                let s = &self.data[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(Error::Truncated {
                what,
                offset: self.pos as u64,
            }),
        }
    }

    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let b = self.bytes(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    pub fn u16(&mut self, what: &'static str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    pub fn u32(&mut self, what: &'static str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    pub fn u64(&mut self, what: &'static str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A length or count field: u32 in GGUF v1, u64 from v2 on (we read v2+ only).
    pub fn len(&mut self, what: &'static str) -> Result<u64> {
        self.u64(what)
    }

    /// A GGUF string: u64 length + bytes (not necessarily UTF-8).
    pub fn string(&mut self, what: &'static str) -> Result<&'a [u8]> {
        let at = self.pos as u64;
        let n = self.len(what)?;
        if n > self.remaining() as u64 {
            return Err(Error::Truncated { what, offset: at });
        }
        self.bytes(n as usize, what)
    }

    pub fn str(&mut self, what: &'static str) -> Result<&'a str> {
        let at = self.pos as u64;
        let b = self.string(what)?;
        core::str::from_utf8(b).map_err(|_| Error::InvalidUtf8 { what, offset: at })
    }
}
