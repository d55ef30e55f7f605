// SPDX-License-Identifier: GPL-2.0

//! Per-generation constants: PCI ids, HBM channels, BAR sizes, NeuronCores, SBUF.
//!
//! Sources: seed 001 §1 (BAR windows, MISC RAM), §2 (HBM map, BAR4 remap),
//! §3 (SBUF geometry, BAR0 TPB tiles). Values the seeds do not give are marked
//! as assumptions where they are defined.

use kernel::prelude::*;

/// Maximum HBM channels of any arch (`MAX_DRAM_CHANNELS`, seed 001 §2).
pub(crate) const MAX_CHANNELS: usize = 4;
/// Maximum regions per channel (`MAX_DDR_REGIONS`, seed 001 §2).
pub(crate) const MAX_REGIONS: usize = 4;

/// One GiB.
pub(crate) const GIB: u64 = 1 << 30;
/// One MiB.
pub(crate) const MIB: u64 = 1 << 20;

/// Amazon's PCI vendor id.
pub(crate) const PCI_VENDOR_AMAZON: u16 = 0x1d0f;

/// State Buffer bytes per NeuronCore (`V2_SBUF_SIZE`, seed 001 §3).
pub(crate) const SBUF_SIZE: u64 = 32 * MIB;
/// Stride between NeuronCore TPB tiles in BAR0 (`V2_PCIE_BAR0_TPB_0_SIZE`, seed 001 §3).
pub(crate) const TPB_TILE_STRIDE: u64 = 64 * MIB;

/// Firmware carve-out at the start of each channel, never handed out.
pub(crate) const FW_CARVEOUT: u64 = 16 * MIB;

/// Neuron device generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Arch {
    /// Trn1 / Inf2.
    V2 = 2,
    /// Trn2 ("cayman").
    V3 = 3,
    /// Trn3 ("mariana").
    V4 = 4,
}

/// How BAR4 packs the HBM channels into the host window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bar4Layout {
    /// Channels packed back to back (V2: 64..80 GiB appears at 16..32 GiB).
    Packed,
    /// Channel `i` at `i * stride` (V3/V4).
    Strided(u64),
}

/// Everything that differs between generations.
#[derive(Debug)]
pub(crate) struct ArchInfo {
    /// Generation.
    pub(crate) arch: Arch,
    /// Human name.
    pub(crate) name: &'static str,
    /// Populated HBM channels.
    pub(crate) nr_channels: usize,
    /// Device-physical base of each channel.
    pub(crate) channel_base: [u64; MAX_CHANNELS],
    /// Bytes per channel.
    pub(crate) channel_size: u64,
    /// NeuronCores.
    pub(crate) nr_cores: usize,
    /// BAR4 remap of the channels.
    pub(crate) bar4: Bar4Layout,
    /// BAR4 (HBM window) size.
    pub(crate) bar4_size: u64,
    /// BAR0 (APB/CSR window) size. Assumption: large enough for every window
    /// the seeds place in it (V2 MISC RAM at 0x30fa0000; the V4 atlas to 4 GiB).
    pub(crate) bar0_size: u64,
    /// Device address of core 0's SBUF; core `n` is `TPB_TILE_STRIDE * n` above.
    /// Assumption: the seeds give no device address for SBUF, so it follows the
    /// BAR0 TPB tile layout they do give (V2 tile 0 at 0x0, mariana at 0xd0000000).
    pub(crate) sbuf_base: u64,
    /// Firmware carve-out at each channel start (0 = none).
    pub(crate) carveout: u64,
}

/// Trn1 / Inf2: two 16 GiB stacks at device PA 0 and 64 GiB (v2/address_map.h).
pub(crate) static V2: ArchInfo = ArchInfo {
    arch: Arch::V2,
    name: "v2",
    nr_channels: 2,
    channel_base: [0x0, 0x10_0000_0000, 0, 0],
    channel_size: 16 * GIB,
    nr_cores: 2,
    bar4: Bar4Layout::Packed,
    bar4_size: 32 * GIB,
    bar0_size: GIB,
    sbuf_base: 0x0,
    carveout: FW_CARVEOUT,
};

/// Trn2: four 24 GiB channels, two per die.
pub(crate) static V3: ArchInfo = ArchInfo {
    arch: Arch::V3,
    name: "v3",
    nr_channels: 4,
    channel_base: [0x0, 0x40_0000_0000, 0x8000_0000_0000, 0x8040_0000_0000],
    channel_size: 24 * GIB,
    nr_cores: 8,
    bar4: Bar4Layout::Strided(64 * GIB),
    bar4_size: 256 * GIB,
    bar0_size: 4 * GIB,
    sbuf_base: 0xd000_0000,
    carveout: FW_CARVEOUT,
};

/// Trn3: four 36 GiB channels at the V3 bases.
pub(crate) static V4: ArchInfo = ArchInfo {
    arch: Arch::V4,
    name: "v4",
    nr_channels: 4,
    channel_base: [0x0, 0x40_0000_0000, 0x8000_0000_0000, 0x8040_0000_0000],
    channel_size: 36 * GIB,
    nr_cores: 8,
    bar4: Bar4Layout::Strided(64 * GIB),
    bar4_size: 256 * GIB,
    bar0_size: 4 * GIB,
    sbuf_base: 0xd000_0000,
    carveout: 0,
};

impl ArchInfo {
    /// Arch from its number (2, 3, 4).
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn from_number(n: u32) -> Option<&'static ArchInfo> {
        match n {
            2 => Some(&V2),
            3 => Some(&V3),
            4 => Some(&V4),
            _ => None,
        }
    }

    /// Arch from its name ("v2", "v3", "v4").
    pub(crate) fn from_name(name: &[u8]) -> Option<&'static ArchInfo> {
        [&V2, &V3, &V4]
            .into_iter()
            .find(|a| a.name.as_bytes() == name)
    }

    /// Arch of a PCI device id of vendor Amazon.
    pub(crate) fn from_pci_device(device: u16) -> Option<&'static ArchInfo> {
        match device {
            0x7164 | 0x7264 => Some(&V2),
            0x7364 => Some(&V3),
            0x7564 | 0x7565 => Some(&V4),
            _ => None,
        }
    }

    /// The PCI device id reported for a simulated device of this arch.
    pub(crate) fn sim_pci_device(&self) -> u16 {
        match self.arch {
            Arch::V2 => 0x7164,
            Arch::V3 => 0x7364,
            Arch::V4 => 0x7564,
        }
    }
}

#[kunit_tests(neuron_hbm_arch)]
mod tests {
    use super::*;

    #[test]
    fn pci_ids_select_arch() {
        assert_eq!(
            ArchInfo::from_pci_device(0x7164).map(|a| a.arch),
            Some(Arch::V2)
        );
        assert_eq!(
            ArchInfo::from_pci_device(0x7264).map(|a| a.arch),
            Some(Arch::V2)
        );
        assert_eq!(
            ArchInfo::from_pci_device(0x7364).map(|a| a.arch),
            Some(Arch::V3)
        );
        assert_eq!(
            ArchInfo::from_pci_device(0x7564).map(|a| a.arch),
            Some(Arch::V4)
        );
        assert_eq!(
            ArchInfo::from_pci_device(0x7565).map(|a| a.arch),
            Some(Arch::V4)
        );
        assert!(ArchInfo::from_pci_device(0x7464).is_none());
    }

    #[test]
    fn names_and_numbers_round_trip() {
        for a in [&V2, &V3, &V4] {
            assert_eq!(
                ArchInfo::from_name(a.name.as_bytes()).map(|b| b.arch),
                Some(a.arch)
            );
            assert_eq!(
                ArchInfo::from_number(a.arch as u32).map(|b| b.arch),
                Some(a.arch)
            );
        }
        assert!(ArchInfo::from_name(b"v5").is_none());
    }

    #[test]
    fn channels_fit_their_bar4_window() {
        for a in [&V2, &V3, &V4] {
            assert!(a.nr_channels as u64 * a.channel_size <= a.bar4_size);
            assert!(a.nr_channels <= MAX_CHANNELS);
        }
        assert_eq!(V2.channel_base[1], 64 * GIB);
    }
}
