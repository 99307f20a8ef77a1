//! LoRA adapters, applied unmerged: a projection `y = W x` of a row whose sequence carries
//! adapters becomes `y = W x + Σ scale · B (A x)` (llama.cpp's `build_lora_mm`), with the
//! base product shared by every row of the step and the low-rank term computed per group of
//! rows that carry the same adapters (`lora/apply.rs`).
//!
//! An adapter is llama.cpp's GGUF LoRA format (`general.type = adapter`, `adapter.type =
//! lora`, `adapter.lora.alpha`, tensors `<base tensor>.lora_a` / `.lora_b`, as the pinned
//! `convert_lora_to_gguf.py` writes them and `llama-adapter.cpp` reads them), checked
//! against the base model when it is loaded ([`LoraAdapter::from_gguf`]) and copied into
//! owned `f32` buffers, so the file need not stay mapped. `A` is `[n_in, r]` in ggml order
//! (`r` rows of `n_in`), `B` is `[r, n_out]` (`n_out` rows of `r`); the scale of a weight is
//! `user_scale · alpha / r` (`user_scale` alone when `alpha` is 0), as llama.cpp's
//! `get_scale`.
//!
//! A step carries adapter sets ([`LoraSet`]: adapters with their user scales, summed in
//! their order) and each entry a slot: none, or the index of its set in the step
//! ([`super::Step::add_lora_set`]). Every row's low-rank term is computed on its own, in a
//! fixed order, so a row's result does not depend on what else is in the step (batch
//! invariance per adapter set and sequence).

mod apply;
mod error;
mod load;

pub use apply::NO_SLOT;
pub(super) use apply::{add_lora, LoraScratch, StepLora};
pub use error::LoraError;
pub use load::{LoraAdapter, LoraWeight, Proj};

use alloc::sync::Arc;
use alloc::vec::Vec;

/// One adapter at a user scale (llama.cpp's `--lora-scaled FILE SCALE`; `--lora` is 1).
#[derive(Clone)]
pub struct Lora {
    pub adapter: Arc<LoraAdapter>,
    pub scale: f32,
}

/// The adapters of one sequence, applied in this order (their terms summed), with a key
/// that tells sets apart for the prefix cache (blocks computed under one set are never
/// taken by a sequence under another).
#[derive(Clone)]
pub struct LoraSet {
    items: Arc<[Lora]>,
    key: u64,
}

impl LoraSet {
    /// The set of `items` (`None` when empty: no adapter).
    pub fn new(items: Vec<Lora>) -> Option<LoraSet> {
        if items.is_empty() {
            return None;
        }
        let mut key = 0x6c6f_7261_5f73_6574u64;
        for l in &items {
            key = mix(key ^ l.adapter.key());
            key = mix(key ^ u64::from(l.scale.to_bits()));
        }
        // 0 is the key of sequences without adapters
        let key = key.max(1);
        Some(LoraSet {
            items: items.into(),
            key,
        })
    }

    /// One adapter at `scale`.
    pub fn single(adapter: Arc<LoraAdapter>, scale: f32) -> LoraSet {
        LoraSet::new(alloc::vec![Lora { adapter, scale }]).expect("one adapter")
    }

    pub fn items(&self) -> &[Lora] {
        &self.items
    }

    /// A nonzero key, the same for sets of the same adapters (by content) at the same scales.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// Whether `self` and `other` are the same set (the same shared list).
    pub fn same(&self, other: &LoraSet) -> bool {
        Arc::ptr_eq(&self.items, &other.items)
    }
}

impl core::fmt::Debug for LoraSet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LoraSet")
            .field("adapters", &self.items.len())
            .field("key", &self.key)
            .finish()
    }
}

/// splitmix64's finaliser.
pub(super) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
