//! superinfer on RV32IMAC: QEMU's virt machine with `-m 512M` (see memory.x).
//!
//! Runs the tiny model compiled in (`EDGE_MODEL`, see ../support/firmware-build.rs), or with `--model-at
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

/// Iterations of the loop that checks the counter at start-up.
const CHECK_LOOPS: u32 = 1_000_000;

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
    // the counter against a loop of a known length (2 instructions per iteration)
    let t0 = instructions();
    // SAFETY: a countdown in one register, nothing else touched
    unsafe {
        core::arch::asm!("2:", "addi {0}, {0}, -1", "bnez {0}, 2b", inout(reg) CHECK_LOOPS => _)
    };
    let counted = instructions() - t0;
    semihosting::println!(
        "edge: counter check: a {}-instruction loop counted as {counted}",
        2 * CHECK_LOOPS
    );

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
