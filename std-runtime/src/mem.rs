//! This process's resident memory as Linux accounts it (`/proc/self`): the peak resident set
//! size (`VmHWM`, what `/usr/bin/time -v` reports as "Maximum resident set size") and a way
//! to start a new measurement window.

/// Peak resident set size of this process in bytes (`VmHWM` of `/proc/self/status`) since
/// it started or since the last [`reset_peak_rss`]; `None` where there is no procfs.
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:")
}

/// Current resident set size in bytes (`VmRSS`); `None` where there is no procfs.
pub fn rss_bytes() -> Option<u64> {
    status_kib("VmRSS:")
}

/// Resets the peak resident set size to the current one (writes `5` to
/// `/proc/self/clear_refs`, Linux >= 4.0), so that [`peak_rss_bytes`] measures from here;
/// does nothing where unsupported.
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn status_kib(key: &str) -> Option<u64> {
    field_kib(&std::fs::read_to_string("/proc/self/status").ok()?, key)
}

/// The bytes of a `KEY:  N kB` line of a `/proc/<pid>/status` text.
fn field_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// VmHWM and VmRSS of one reading (other tests of this process allocate meanwhile).
    fn hwm_rss() -> (u64, u64) {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        (
            field_kib(&status, "VmHWM:").expect("VmHWM"),
            field_kib(&status, "VmRSS:").expect("VmRSS"),
        )
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn peak_covers_current_and_resets() {
        assert!(rss_bytes().unwrap() > 0 && peak_rss_bytes().unwrap() > 0);
        // touch 64 MiB: resident, and in the peak; freed (munmap), the peak stays until a
        // reset brings it back to the current resident size
        let big = vec![1u8; 64 << 20];
        std::hint::black_box(&big);
        let (peak, rss) = hwm_rss();
        assert!(rss >= 64 << 20 && peak >= rss, "VmHWM {peak}, VmRSS {rss}");
        drop(big);
        // the peak stays; the resident size falls by most of the 64 MiB (other tests of this
        // binary run on other threads and allocate meanwhile, and the kernel's per-CPU RSS
        // counters make both readings approximate, not even monotonic: margins, not counts)
        let (kept, rss) = hwm_rss();
        assert!(
            kept + (4 << 20) >= peak && kept >= rss + (32 << 20),
            "VmHWM {kept} (was {peak}), VmRSS {rss}"
        );
        reset_peak_rss();
        let after = peak_rss_bytes().unwrap();
        assert!(
            after < kept - (32 << 20),
            "after a reset: {after} vs {kept}"
        );
    }
}
