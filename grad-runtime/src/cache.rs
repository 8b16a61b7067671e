//! The sizes of the CPU's data caches, as the operating system reports
//! them, for the kernels that size their working sets to fit a cache.
//! Read once; on a system that does not say, the smallest sizes of the
//! cores this library has been measured on.

use std::sync::OnceLock;

/// The L1 data cache assumed when the system does not report one.
const DEFAULT_L1D: usize = 32 * 1024;

/// The L2 cache assumed when the system does not report one.
const DEFAULT_L2: usize = 512 * 1024;

/// Bytes of one core's L1 data cache.
pub(crate) fn l1d_bytes() -> usize {
    static L1D: OnceLock<usize> = OnceLock::new();
    *L1D.get_or_init(|| reported(1, "Data").unwrap_or(DEFAULT_L1D))
}

/// Bytes of one core's L2 cache (unified, or its data part).
pub(crate) fn l2_bytes() -> usize {
    static L2: OnceLock<usize> = OnceLock::new();
    *L2.get_or_init(|| reported(2, "Unified").or_else(|| reported(2, "Data")).unwrap_or(DEFAULT_L2))
}

/// The size of the cache of `level` and `kind` of CPU 0, from Linux's
/// `/sys/devices/system/cpu/cpu0/cache`; `None` elsewhere, or when no
/// entry is readable and plausible (1 KiB to 1 GiB).
fn reported(level: u32, kind: &str) -> Option<usize> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    for entry in dir.flatten() {
        let read = |name: &str| std::fs::read_to_string(entry.path().join(name)).ok();
        let (Some(l), Some(k), Some(size)) = (read("level"), read("type"), read("size")) else { continue };
        if l.trim().parse() != Ok(level) || k.trim() != kind {
            continue;
        }
        return parse_size(size.trim()).filter(|b| (1 << 10..=1 << 30).contains(b));
    }
    None
}

/// `32K`, `1M`, `512` as bytes.
fn parse_size(s: &str) -> Option<usize> {
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, ""),
    };
    let scale = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    digits.parse::<usize>().ok()?.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_as_linux_writes_them() {
        assert_eq!(parse_size("32K"), Some(32 * 1024));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("32KiB"), None);
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size("99999999999999999999K"), None);
    }

    #[test]
    fn the_l1d_is_plausible() {
        let b = l1d_bytes();
        assert!((1 << 10..=1 << 30).contains(&b), "{b}");
    }

    #[test]
    fn the_l2_is_plausible_and_larger_than_the_l1d() {
        let b = l2_bytes();
        assert!((1 << 10..=1 << 30).contains(&b), "{b}");
        assert!(b > l1d_bytes(), "{b}");
    }
}
