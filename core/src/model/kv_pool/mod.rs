//! The paged KV cache: one pool of fixed-size blocks of [`BLOCK`] positions per layer,
//! shared by every sequence, allocated once; each sequence holds a table of the blocks its
//! positions live in (vLLM's block tables). Full blocks are content-addressed by the hash
//! chain of their tokens and reference-counted ([`blocks`]), so sequences that start with
//! the same tokens (a system prompt, a document, the earlier turns of a chat) share one copy
//! read-only, and blocks no sequence holds stay cached for later prompts until the pool
//! needs room (least recently used first). A sequence only ever writes a block it holds
//! alone and that has no address: the block of a partial last position is copied first when
//! it is shared ([`KvPool::fork`], rollback).
//!
//! Keys and values are stored as F32, F16 or Q8_0 ([`KvType`]); quantized caches get
//! llama.cpp's Hadamard rotation and our centring (`centre.rs`) as before.

pub mod blocks;
mod centre;
mod rows;

use alloc::vec::Vec;

use self::blocks::Blocks;
use self::centre::Centres;
use self::rows::Rows;
use super::weights::Weights;
use crate::error::{Error, Result};
use crate::kernels::Kernels;
use crate::ops::attention::{rotation, KvLayer, KvType, BLOCK};
use crate::quant::legacy::{BlockQ8_0, QK};

/// A sequence of a [`KvPool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeqId(u32);

impl SeqId {
    pub fn index(self) -> usize {
        self.0 as usize
    }

    #[cfg(test)]
    pub(crate) fn new_for_test(i: u32) -> SeqId {
        SeqId(i)
    }
}

/// How a pool is sized and stores its rows.
#[derive(Debug, Clone, Copy)]
pub struct PoolOptions {
    /// Positions one sequence may hold (its context), at most the model's trained context.
    pub n_ctx: usize,
    /// Positions the whole pool holds (rounded up to whole blocks); at least `n_ctx`.
    pub n_positions: usize,
    pub k_type: KvType,
    pub v_type: KvType,
}

/// Block counts of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    pub blocks: usize,
    /// Held by at least one sequence.
    pub held: usize,
    /// Held by none, kept for prefixes of later prompts (evicted when room is needed).
    pub cached: usize,
    /// Neither held nor cached.
    pub free: usize,
}

#[derive(Default)]
struct Seq {
    /// Physical block of each block of positions (may run past the tokens: reserved).
    table: Vec<u32>,
    /// Tokens whose keys and values are stored, position by position.
    tokens: Vec<u32>,
    /// Content address of each full block, in order.
    addresses: Vec<u64>,
    /// The parent address of its first block: 0, or the key of its LoRA adapter set
    /// ([`KvPool::set_prefix_key`]), so sequences under different adapters never share
    /// blocks.
    root: u64,
}

pub struct KvPool {
    n_ctx: usize,
    types: [KvType; 2],
    /// Hadamard rotation sizes of keys (and queries) and of values, for quantized caches.
    rotations: [Option<usize>; 2],
    /// Fixed vectors taken from rows before a quantized cache stores them.
    centres: Centres,
    /// Values per position of keys and of values.
    row: (usize, usize),
    k: Vec<Rows>,
    v: Vec<Rows>,
    blocks: Blocks,
    seqs: Vec<Option<Seq>>,
}

impl KvPool {
    /// A pool for the model `w`. Block types need head dimensions that are whole blocks.
    pub fn new(w: &Weights<'_>, o: &PoolOptions) -> Result<KvPool> {
        let c = &w.config;
        if o.n_ctx == 0 || o.n_ctx > c.n_ctx_train {
            return Err(Error::InvalidArgument(alloc::format!(
                "context size {} must be between 1 and the model's trained context {}",
                o.n_ctx,
                c.n_ctx_train
            )));
        }
        if o.n_positions < o.n_ctx {
            return Err(Error::InvalidArgument(alloc::format!(
                "a KV pool of {} positions cannot hold one context of {}",
                o.n_positions,
                o.n_ctx
            )));
        }
        for (what, ty, dim) in [("K", o.k_type, c.head_dim_k), ("V", o.v_type, c.head_dim_v)] {
            if !dim.is_multiple_of(ty.block()) {
                return Err(Error::InvalidArgument(alloc::format!(
                    "a {ty} {what} cache needs head dimensions that are multiples of {}; this \
                     model's is {dim}",
                    ty.block()
                )));
            }
        }
        let n_blocks = o.n_positions.div_ceil(BLOCK);
        if n_blocks > u32::MAX as usize / BLOCK {
            return Err(Error::InvalidArgument("the KV pool is too large".into()));
        }
        let (k_row, v_row) = c.kv_row();
        let types = [o.k_type, o.v_type];
        let rotations = [
            rotation::key_rotation(o.k_type, c.head_dim_k),
            rotation::value_rotation(o.v_type, c.head_dim_v),
        ];
        let rows = n_blocks * BLOCK;
        Ok(KvPool {
            n_ctx: o.n_ctx,
            types,
            rotations,
            centres: Centres::new(w, o.n_ctx, types, rotations),
            row: (k_row, v_row),
            k: (0..c.n_layer)
                .map(|_| Rows::new(o.k_type, rows * k_row))
                .collect(),
            v: (0..c.n_layer)
                .map(|_| Rows::new(o.v_type, rows * v_row))
                .collect(),
            blocks: Blocks::new(n_blocks),
            seqs: Vec::new(),
        })
    }

    /// Positions one sequence may hold.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// The key and value types.
    pub fn types(&self) -> (KvType, KvType) {
        (self.types[0], self.types[1])
    }

    /// Size of the Hadamard rotation applied to queries and keys before they meet the
    /// cache (quantized key caches, as llama.cpp), if any.
    pub fn key_rotation(&self) -> Option<usize> {
        self.rotations[0]
    }

    /// Size of the Hadamard rotation applied to values before the cache and to the attention
    /// output after it (quantized value caches), if any.
    pub fn value_rotation(&self) -> Option<usize> {
        self.rotations[1]
    }

    /// Bytes of keys and values a pool made with options `o` for the model `w` holds
    /// ([`Self::bytes`], known before it is made): every layer's rows of all its blocks.
    pub fn bytes_for(w: &Weights<'_>, o: &PoolOptions) -> usize {
        let rows = o.n_positions.div_ceil(BLOCK) * BLOCK;
        let (k_row, v_row) = w.config.kv_row();
        let of = |ty: KvType, n: usize| match ty {
            KvType::F32 => 4 * n,
            KvType::F16 => 2 * n,
            KvType::Q8_0 => n / QK * size_of::<BlockQ8_0>(),
        };
        w.config.n_layer * (of(o.k_type, rows * k_row) + of(o.v_type, rows * v_row))
    }

    /// Bytes of keys and values the pool holds (all blocks, allocated once).
    pub fn bytes(&self) -> usize {
        self.k.iter().chain(&self.v).map(Rows::bytes).sum()
    }

    pub fn stats(&self) -> PoolStats {
        let b = &self.blocks;
        PoolStats {
            blocks: b.len(),
            held: b.held(),
            cached: b.cached(),
            free: b.available() - b.cached(),
        }
    }

    /// Blocks that a sequence could be given now (free or cached).
    pub fn available_blocks(&self) -> usize {
        self.blocks.available()
    }

    /// A new, empty sequence.
    pub fn add_seq(&mut self) -> SeqId {
        let i = match self.seqs.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.seqs.push(None);
                self.seqs.len() - 1
            }
        };
        // room for a whole context: no allocation as the sequence grows
        let blocks = self.n_ctx.div_ceil(BLOCK);
        self.seqs[i] = Some(Seq {
            table: Vec::with_capacity(blocks),
            tokens: Vec::with_capacity(self.n_ctx),
            addresses: Vec::with_capacity(blocks),
            root: 0,
        });
        SeqId(i as u32)
    }

    fn seq(&self, id: SeqId) -> Result<&Seq> {
        self.seqs
            .get(id.index())
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::InvalidArgument(alloc::format!("no sequence {}", id.0)))
    }

    fn seq_mut(&mut self, id: SeqId) -> Result<&mut Seq> {
        self.seqs
            .get_mut(id.index())
            .and_then(Option::as_mut)
            .ok_or_else(|| Error::InvalidArgument(alloc::format!("no sequence {}", id.0)))
    }

    /// Ends sequence `id`: its blocks go back to the pool, the full ones cached (last block
    /// first, so a prefix outlives its continuations).
    pub fn remove_seq(&mut self, id: SeqId) -> Result<()> {
        self.seq(id)?;
        let s = self.seqs[id.index()].take().expect("checked above");
        for &b in s.table.iter().rev() {
            self.blocks.release(b);
        }
        Ok(())
    }

    /// Keys the prefix cache of the empty sequence `id` by `key` (the key of its LoRA
    /// adapter set; 0, the default, for none): its blocks' content addresses start from it,
    /// so it only takes, and only gives, blocks computed under the same key.
    pub fn set_prefix_key(&mut self, id: SeqId, key: u64) -> Result<()> {
        let s = self.seq_mut(id)?;
        if !s.tokens.is_empty() {
            return Err(Error::InvalidArgument(
                "the prefix key of a sequence can only be set while it is empty".into(),
            ));
        }
        s.root = key;
        Ok(())
    }

    /// The prefix key of sequence `id` ([`Self::set_prefix_key`]).
    pub fn prefix_key(&self, id: SeqId) -> Result<u64> {
        Ok(self.seq(id)?.root)
    }

    /// Positions sequence `id` holds.
    pub fn seq_len(&self, id: SeqId) -> Result<usize> {
        Ok(self.seq(id)?.tokens.len())
    }

    /// The tokens whose keys and values sequence `id` holds.
    pub fn seq_tokens(&self, id: SeqId) -> Result<&[u32]> {
        Ok(&self.seq(id)?.tokens)
    }

    /// Physical blocks of sequence `id`, one per [`BLOCK`] positions.
    pub fn seq_blocks(&self, id: SeqId) -> Result<&[u32]> {
        Ok(&self.seq(id)?.table)
    }

    /// Starts the empty sequence `id` with the longest run of whole cached blocks that begins
    /// `prompt` (at most `prompt.len() - 1` tokens: the last token must still run to give
    /// logits). Returns the number of tokens taken from the cache.
    pub fn reuse_prefix(&mut self, id: SeqId, prompt: &[u32]) -> Result<usize> {
        if !self.seq(id)?.tokens.is_empty() {
            return Err(Error::InvalidArgument(
                "a prefix can only be reused by an empty sequence".into(),
            ));
        }
        let mut found = Vec::new();
        let mut parent = self.seq(id)?.root;
        for chunk in prompt[..prompt.len().saturating_sub(1)].chunks_exact(BLOCK) {
            match self.blocks.lookup(parent, chunk) {
                Some((address, b)) => {
                    found.push((address, b));
                    parent = address;
                }
                None => break,
            }
        }
        for &(_, b) in &found {
            self.blocks.retain(b);
        }
        self.seq(id)?;
        let s = self.seqs[id.index()].as_mut().expect("checked above");
        // the shared blocks go in after the reserved blocks of the empty sequence, which
        // then go back (the sequence's buffers keep their room: no allocation)
        let spare = s.table.len();
        s.table.extend(found.iter().map(|&(_, b)| b));
        s.addresses.clear();
        s.addresses.extend(found.iter().map(|&(a, _)| a));
        s.tokens.clear();
        s.tokens.extend_from_slice(&prompt[..found.len() * BLOCK]);
        let n = s.tokens.len();
        for &b in s.table[..spare].iter().rev() {
            self.blocks.release(b);
        }
        s.table.drain(..spare);
        Ok(n)
    }

    /// A new sequence holding what `id` holds: its full blocks shared, its partial last block
    /// copied (so both can go on writing).
    pub fn fork(&mut self, id: SeqId) -> Result<SeqId> {
        let s = self.seq(id)?;
        let len = s.tokens.len();
        let full = len / BLOCK;
        let partial = (!len.is_multiple_of(BLOCK)).then(|| s.table[full]);
        let mut table = s.table[..full].to_vec();
        let (tokens, addresses, root) = (s.tokens.clone(), s.addresses.clone(), s.root);
        if let Some(src) = partial {
            let dst = self.blocks.alloc().ok_or(Error::KvPoolFull {
                needed: 1,
                available: 0,
            })?;
            self.copy_block(src, dst);
            table.push(dst);
        }
        for &b in &table[..full] {
            self.blocks.retain(b);
        }
        let new = self.add_seq();
        self.seqs[new.index()] = Some(Seq {
            table,
            tokens,
            addresses,
            root,
        });
        Ok(new)
    }

    /// Forgets every position of `id` from `n` on (a rollback: the sequence continues from
    /// there without recomputing the first `n`).
    pub fn truncate(&mut self, id: SeqId, n: usize) -> Result<()> {
        self.seq(id)?;
        let s = self.seqs[id.index()].as_mut().expect("checked above");
        if n >= s.tokens.len() {
            return Ok(());
        }
        s.tokens.truncate(n);
        s.addresses.truncate(n / BLOCK);
        let keep = n.div_ceil(BLOCK);
        for &b in s.table[keep..].iter().rev() {
            self.blocks.release(b);
        }
        s.table.truncate(keep);
        Ok(())
    }

    /// Blocks sequence `id` needs before `n` more positions can be written: new blocks past
    /// its table, and a copy of its partial last block when that one is shared.
    pub fn blocks_needed(&self, id: SeqId, n: usize) -> Result<usize> {
        let s = self.seq(id)?;
        let len = s.tokens.len();
        let grow = (len + n).div_ceil(BLOCK).saturating_sub(s.table.len());
        Ok(grow + usize::from(n > 0 && self.shared_partial(s).is_some()))
    }

    /// The block of `s`'s partial last position (after a rollback or a fork).
    fn partial(s: &Seq) -> Option<u32> {
        let len = s.tokens.len();
        s.table
            .get(len / BLOCK)
            .filter(|_| !len.is_multiple_of(BLOCK))
            .copied()
    }

    /// The block of `s`'s partial last position when another sequence holds it too (so it
    /// must be copied before the sequence writes into it). One the sequence holds alone is
    /// written in place, its address (if it was full and cached before a rollback) dropped:
    /// a rollback such as speculative decoding's needs no spare block.
    fn shared_partial(&self, s: &Seq) -> Option<u32> {
        Self::partial(s).filter(|&b| self.blocks.refs(b) != 1)
    }

    /// Positions `id` can still write: what its blocks hold past its tokens and what the
    /// available blocks hold.
    pub fn room(&self, id: SeqId) -> Result<usize> {
        let s = self.seq(id)?;
        let held = (s.table.len() * BLOCK).saturating_sub(s.tokens.len());
        let copy = if self.shared_partial(s).is_some() {
            BLOCK - s.tokens.len() % BLOCK
        } else {
            0
        };
        Ok((held + self.blocks.available() * BLOCK).saturating_sub(copy))
    }

    /// Makes room for `n` more positions of `id` (within its context): on error nothing
    /// changed.
    pub fn reserve(&mut self, id: SeqId, n: usize) -> Result<()> {
        let len = self.seq(id)?.tokens.len();
        if len + n > self.n_ctx {
            return Err(Error::ContextOverflow {
                needed: len + n,
                capacity: self.n_ctx,
            });
        }
        let needed = self.blocks_needed(id, n)?;
        if needed > self.blocks.available() {
            return Err(Error::KvPoolFull {
                needed,
                available: self.blocks.available(),
            });
        }
        if let Some(b) = Self::partial(self.seq(id)?).filter(|_| n > 0) {
            if self.blocks.refs(b) == 1 {
                // about to change: no longer the content its address names
                self.blocks.unregister(b);
            }
        }
        if needed == 0 {
            return Ok(());
        }
        if let Some(src) = self.shared_partial(self.seq(id)?).filter(|_| n > 0) {
            let dst = self.blocks.alloc().expect("counted above");
            self.copy_block(src, dst);
            self.blocks.release(src);
            self.seq_mut(id)?.table[len / BLOCK] = dst;
        }
        while self.seq(id)?.table.len() < (len + n).div_ceil(BLOCK) {
            let b = self.blocks.alloc().expect("counted above");
            self.seq_mut(id)?.table.push(b);
        }
        Ok(())
    }

    /// Records that `tokens` were written after the positions `id` held (by
    /// [`Self::store`], into blocks [`Self::reserve`] made room for), and gives every block
    /// they fill its content address. A block whose content another block already holds
    /// is dropped for that one (a prompt computed twice in one step is kept once).
    pub fn commit(&mut self, id: SeqId, tokens: &[u32]) -> Result<()> {
        let s = self.seq_mut(id)?;
        if s.tokens.len() + tokens.len() > s.table.len() * BLOCK {
            return Err(Error::InvalidArgument(
                "commit past the reserved blocks".into(),
            ));
        }
        s.tokens.extend_from_slice(tokens);
        let full = s.tokens.len() / BLOCK;
        for i in s.addresses.len()..full {
            let s = self.seqs[id.index()].as_mut().expect("checked above");
            let parent = s.addresses.last().copied().unwrap_or(s.root);
            let b = s.table[i];
            let (address, same) =
                self.blocks
                    .register(b, parent, &s.tokens[i * BLOCK..(i + 1) * BLOCK]);
            if let Some(other) = same {
                self.blocks.retain(other);
                self.blocks.release(b);
                s.table[i] = other;
            }
            s.addresses.push(address);
        }
        Ok(())
    }

    /// The physical row of position `pos` of `id` (the block must be reserved).
    pub fn row_of(&self, id: SeqId, pos: usize) -> Result<usize> {
        let s = self.seq(id)?;
        let b = s.table.get(pos / BLOCK).ok_or_else(|| {
            Error::InvalidArgument(alloc::format!("position {pos} has no block reserved"))
        })?;
        Ok(*b as usize * BLOCK + pos % BLOCK)
    }

    /// Writes layer `il`'s key and value rows at physical row `row` ([`Self::row_of`]).
    pub fn store(&mut self, kern: &Kernels, il: usize, row: usize, k: &[f32], v: &[f32]) {
        let (kr, vr) = (&mut self.k[il], &mut self.v[il]);
        self.centres.store(il, k, v, |k, v| {
            kr.store(kern, row, k);
            vr.store(kern, row, v);
        });
    }

    /// Brings layer `il`'s attention output (one token's, all query heads) from the cache's
    /// frame back to the model's: undoes the value rotation and adds back the value centre
    /// of a quantized value cache.
    pub fn finish_output(&self, il: usize, out: &mut [f32]) {
        if let Some(n) = self.value_rotation() {
            rotation::hadamard(out, n);
        }
        self.centres.restore_output(il, out);
    }

    /// Layer `il` as attention reads it (positions through a sequence's [`Self::seq_blocks`]).
    pub fn layer(&self, il: usize) -> KvLayer<'_> {
        KvLayer {
            k: self.k[il].view(),
            v: self.v[il].view(),
        }
    }

    fn copy_block(&mut self, src: u32, dst: u32) {
        let (k_row, v_row) = self.row;
        let (s, d) = (src as usize * BLOCK, dst as usize * BLOCK);
        for r in &mut self.k {
            r.copy_rows(k_row, s, d, BLOCK);
        }
        for r in &mut self.v {
            r.copy_rows(v_row, s, d, BLOCK);
        }
    }
}
