//! superinfer on RV32IMAC: QEMU's virt machine with `-m 512M` (see memory.x).
//!
//! Runs the tiny model compiled in (`EDGE_MODEL`, see build.rs), or with `--model-at
//! 0x90000000 --model-len BYTES` a model QEMU's `-device loader` placed there, greedily,
//! and streams its tokens over semihosting; exits with 0, or non-zero after printing the
//! error.
#![no_std]
#![no_main]

use riscv_rt::entry;
use superinfer_edge::heap::CountingHeap;
use superinfer_edge::{include_model, semihosting, Platform};

#[global_allocator]
static HEAP: CountingHeap = CountingHeap::empty();

static MODEL: &[u8] = include_model!(env!("EDGE_MODEL_PATH"));

/// The upper 256 MiB of `-m 512M`, past everything memory.x gives the firmware.
const LOAD_REGION: (usize, usize) = (0x9000_0000, 256 << 20);

/// `minstret`: under `-icount`, QEMU's instruction count.
fn instructions() -> u64 {
    riscv::register::minstret::read64()
}

extern "C" {
    static __sheap: u8;
    static __eheap: u8;
}

#[entry]
fn main() -> ! {
    // SAFETY: riscv-rt's `.heap` section (memory.x's `_heap_size`) is used by nothing else;
    // this runs once, before the first allocation.
    unsafe {
        let start = core::ptr::addr_of!(__sheap) as usize;
        let end = core::ptr::addr_of!(__eheap) as usize;
        HEAP.init(start, end - start);
    }
    let code = superinfer_edge::run::main(&Platform {
        name: "rv32imac virt",
        heap: &HEAP,
        instructions,
        counter: "minstret under -icount shift=0",
        embedded: MODEL,
        load_region: Some(LOAD_REGION),
    });
    semihosting::process::exit(code)
}
