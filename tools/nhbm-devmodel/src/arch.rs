//! The arch the model presents: PCI ids, BAR sizes and the device-physical
//! HBM map with its BAR4 remap (seed 001 §1-§2, reference
//! `mmap_get_bar4_offset_v2`). Written from the seed independently of the
//! module's `addr.rs`, so that a wrong remap in the driver shows up as data at
//! the wrong device address.

/// Amazon's PCI vendor id.
pub const VENDOR_AMAZON: u16 = 0x1d0f;

const GIB: u64 = 1 << 30;

/// One HBM stack: where the device sees it and where BAR4 shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stack {
    /// Device-physical base.
    pub device_base: u64,
    /// Offset of the stack in BAR4.
    pub bar4_base: u64,
    /// Bytes.
    pub size: u64,
}

/// Everything of an arch the model needs.
#[derive(Debug)]
pub struct Arch {
    /// Name as given on the command line.
    pub name: &'static str,
    /// PCI device id.
    pub device_id: u16,
    /// BAR0 (APB/CSR window) size.
    pub bar0_size: u64,
    /// BAR4 (HBM window) size.
    pub bar4_size: u64,
    /// The HBM stacks.
    pub stacks: &'static [Stack],
}

/// Trn1 / Inf2: two 16 GiB stacks at device PA 0 and 64 GiB, packed into a
/// 32 GiB BAR4 (64 GiB appears at 16 GiB).
pub static V2: Arch = Arch {
    name: "v2",
    device_id: 0x7164,
    bar0_size: GIB,
    bar4_size: 32 * GIB,
    stacks: &[
        Stack {
            device_base: 0,
            bar4_base: 0,
            size: 16 * GIB,
        },
        Stack {
            device_base: 64 * GIB,
            bar4_base: 16 * GIB,
            size: 16 * GIB,
        },
    ],
};

impl Arch {
    /// The arch named `name`.
    pub fn by_name(name: &str) -> Option<&'static Arch> {
        [&V2].into_iter().find(|a| a.name == name)
    }

    /// BAR4 offset of the device-physical range `[pa, pa + len)`, `None` when
    /// it is not inside one stack.
    pub fn bar4_offset(&self, pa: u64, len: u64) -> Option<u64> {
        let end = pa.checked_add(len)?;
        self.stacks.iter().find_map(|s| {
            (pa >= s.device_base && end <= s.device_base + s.size)
                .then(|| s.bar4_base + (pa - s.device_base))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_packs_stack_1_behind_stack_0() {
        assert_eq!(V2.bar4_offset(0, 8), Some(0));
        assert_eq!(V2.bar4_offset(0x1000, 4), Some(0x1000));
        assert_eq!(V2.bar4_offset(64 * GIB, 4), Some(16 * GIB));
        assert_eq!(V2.bar4_offset(64 * GIB + 0x123, 4), Some(16 * GIB + 0x123));
        assert_eq!(V2.bar4_offset(80 * GIB - 4, 4), Some(32 * GIB - 4));
    }

    #[test]
    fn v2_rejects_ranges_outside_a_stack() {
        assert_eq!(V2.bar4_offset(16 * GIB, 4), None);
        assert_eq!(V2.bar4_offset(16 * GIB - 2, 4), None);
        assert_eq!(V2.bar4_offset(32 * GIB, 4), None);
        assert_eq!(V2.bar4_offset(80 * GIB, 4), None);
        assert_eq!(V2.bar4_offset(u64::MAX - 1, 4), None);
    }

    #[test]
    fn stacks_fill_bar4() {
        let total: u64 = V2.stacks.iter().map(|s| s.size).sum();
        assert_eq!(total, V2.bar4_size);
        assert_eq!(Arch::by_name("v2").map(|a| a.device_id), Some(0x7164));
        assert!(Arch::by_name("v9").is_none());
    }
}
