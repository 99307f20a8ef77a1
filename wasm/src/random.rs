//! The random bytes `getrandom` asks for on wasm32-unknown-unknown, where it has no source of
//! its own without JavaScript bindings: the grammar engine (llguidance, through `ahash`)
//! draws the seeds of its hash tables from it, nothing else. build.sh selects this source
//! (`--cfg getrandom_backend="custom"`). Hash seeds only need to differ between tables, not
//! to be secret (the engine serves one page), so they come from a counter mixed by splitmix64:
//! the module keeps its plain C ABI, with no import from JavaScript.

use core::sync::atomic::{AtomicU64, Ordering};

static STATE: AtomicU64 = AtomicU64::new(0x853C_49E6_748F_EA9B);

/// The next 64 bits of splitmix64 (shared by every thread of the threaded build).
fn next() -> u64 {
    let mut z = STATE
        .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fills `out` with splitmix64's bytes.
pub fn fill(out: &mut [u8]) {
    for chunk in out.chunks_mut(8) {
        let v = next().to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

/// getrandom 0.3's custom backend.
///
/// # Safety
/// `dest` is valid for writes of `len` bytes (getrandom's contract with its backends).
#[cfg(target_arch = "wasm32")]
#[no_mangle]
unsafe extern "Rust" fn __getrandom_v03_custom(
    dest: *mut u8,
    len: usize,
) -> Result<(), getrandom::Error> {
    if len > 0 {
        // SAFETY: getrandom passes a buffer valid for `len` bytes of writes.
        fill(unsafe { core::slice::from_raw_parts_mut(dest, len) });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_differ_from_call_to_call() {
        let (mut a, mut b) = ([0u8; 13], [0u8; 13]);
        super::fill(&mut a);
        super::fill(&mut b);
        assert_ne!(a, b);
        assert!(a.iter().any(|&x| x != 0));
    }
}
