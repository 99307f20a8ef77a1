//! What the superinfer edge firmware shares between targets: the counting heap
//! ([`heap::CountingHeap`]), the command line read over semihosting ([`args`]), the
//! generation run that streams tokens and prints its figures ([`run`]) and
//! [`include_model!`], which embeds a GGUF file at the alignment its tensors need.
//!
//! A target's `main` sets up its heap and instruction counter, then hands a [`Platform`] to
//! [`run::main`] and exits with the code it returns.
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

pub mod args;
pub mod heap;
pub mod run;

pub use run::Platform;
pub use semihosting;

/// A 32-byte aligned wrapper: GGUF tensor offsets are relative to the file's start and
/// aligned to `general.alignment` (32), so the file itself must start at such an address.
#[repr(C, align(32))]
pub struct Aligned<T: ?Sized>(pub T);

/// Embeds a GGUF file as a `&'static [u8]` that starts at a 32-byte aligned address (in
/// flash, on a microcontroller: the weights are used in place, never copied).
///
/// ```ignore
/// static MODEL: &[u8] = superinfer_edge::include_model!("model.gguf");
/// ```
#[macro_export]
macro_rules! include_model {
    ($path:expr) => {{
        static ALIGNED: &$crate::Aligned<[u8]> = &$crate::Aligned(*include_bytes!($path));
        &ALIGNED.0
    }};
}
