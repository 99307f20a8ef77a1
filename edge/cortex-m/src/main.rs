//! superinfer on a Cortex-M4F: QEMU's mps2-an386 (see memory.x for the memory map).
//!
//! Runs the tiny model compiled in (`EDGE_MODEL`, see ../support/firmware-build.rs) greedily and streams its
//! tokens over semihosting; exits with 0, or non-zero after printing the error.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::SYST;
use cortex_m_rt::{entry, exception};
use superinfer_edge::heap::CountingHeap;
use superinfer_edge::{include_model, semihosting, Platform};

#[global_allocator]
static HEAP: CountingHeap = CountingHeap::empty();

static MODEL: &[u8] = include_model!(env!("EDGE_MODEL_PATH"));

/// SysTick periods elapsed (the counter is 24 bits wide).
static WRAPS: AtomicU32 = AtomicU32::new(0);

/// SysTick counts the 25 MHz clock QEMU gives the AN386; under `-icount shift=0` one
/// instruction is 1 ns of virtual time, so one tick is 40 instructions. (QEMU does not
/// implement the DWT cycle counter: it reads 0.)
const INSTRUCTIONS_PER_TICK: u64 = 40;
const PERIOD: u32 = 1 << 24;
/// Iterations of the loop that checks the counter at start-up.
const CHECK_LOOPS: u32 = 1_000_000;

#[exception]
fn SysTick() {
    WRAPS.fetch_add(1, Relaxed);
}

fn instructions() -> u64 {
    loop {
        let w = WRAPS.load(Relaxed);
        let current = SYST::get_current();
        if WRAPS.load(Relaxed) == w {
            let ticks = u64::from(w) * u64::from(PERIOD) + u64::from(PERIOD - 1 - current);
            return ticks * INSTRUCTIONS_PER_TICK;
        }
    }
}

extern "C" {
    static _heap_start: u8;
    static _heap_end: u8;
}

#[entry]
fn main() -> ! {
    // SAFETY: the PSRAM between the linker script's `_heap_start` and `_heap_end` is used by
    // nothing else; this runs once, before the first allocation.
    unsafe {
        let start = core::ptr::addr_of!(_heap_start) as usize;
        let end = core::ptr::addr_of!(_heap_end) as usize;
        HEAP.init(start, end - start);
    }
    let Some(mut cp) = cortex_m::Peripherals::take() else {
        semihosting::eprintln!("edge: error: the core peripherals were already taken");
        semihosting::process::exit(1)
    };
    cp.SYST.set_clock_source(SystClkSource::Core);
    cp.SYST.set_reload(PERIOD - 1);
    cp.SYST.clear_current();
    cp.SYST.enable_interrupt();
    cp.SYST.enable_counter();
    // the counter reads 0 until its first reload (one tick later): wait for it, so the count
    // starts at 0 instead of a whole period
    while SYST::get_current() == 0 {}

    // the counter against a loop of a known length (2 instructions per iteration)
    let t0 = instructions();
    // SAFETY: a countdown in one register, nothing else touched
    unsafe { core::arch::asm!("2:", "subs {0}, #1", "bne 2b", inout(reg) CHECK_LOOPS => _) };
    let counted = instructions() - t0;
    semihosting::println!(
        "edge: counter check: a {}-instruction loop counted as {counted}",
        2 * CHECK_LOOPS
    );

    let code = superinfer_edge::run::main(&Platform {
        name: "cortex-m4f mps2-an386",
        heap: &HEAP,
        instructions,
        counter: "SysTick x 40 under -icount shift=0",
        embedded: MODEL,
        load_region: None,
    });
    semihosting::process::exit(code)
}
