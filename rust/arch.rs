// SPDX-License-Identifier: GPL-2.0-only

//! Per-generation constants: PCI ids, HBM channels, BAR sizes, NeuronCores, SBUF.
//!
//! Sources: seed 001 §1 (BAR windows, MISC RAM), §2 (HBM map, BAR4 remap),
//! §3 (SBUF geometry, BAR0 TPB tiles), and for what the seeds leave out the
//! reference driver's public address maps (aws-neuron-driver v2/address_map.h,
//! v3/address_map.h, v3/neuron_dhal_v3.c, v4/neuron_dhal_v4.c,
//! v4/address_map.h), cited beside each value. The few V4 values no public
//! source gives are taken from V3 and marked as assumed.

pub(crate) mod addr;

use kernel::prelude::*;

/// The reset handshake's timing of one arch (see [`crate::hw::fw`]).
#[derive(Debug)]
pub(crate) struct ResetTiming {
    /// Milliseconds between two looks at the mailbox (`reset_poll_interval`).
    pub(crate) poll_ms: u32,
    /// Milliseconds after which an untaken request is given up
    /// (`initiate_max_wait_time`).
    pub(crate) initiate_max_ms: u64,
}

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

/// Most NeuronCores of any arch (`V3_NC_PER_DEVICE`, v3/address_map.h).
pub(crate) const MAX_CORES: usize = 8;

/// State Buffer bytes per NeuronCore, at the start of the core's TPB tile
/// (`V2_MMAP_NC_SBUF_SIZE`, v2/address_map.h; `V3_PCIE_BAR0_TPB_SBUF_SIZE`,
/// v3/address_map.h; seed 001 §3).
pub(crate) const SBUF_SIZE: u64 = 32 * MIB;
/// Bytes of one TPB tile in the device address map (`V2_MMAP_TPB_SIZE`,
/// v2/address_map.h).
pub(crate) const V2_TPB_TILE_SIZE: u64 = 64 * MIB;
/// Device address of V2's first TPB tile (`V2_MMAP_TPB_OFFSET`, v2/address_map.h).
pub(crate) const V2_TPB_BASE: u64 = 0x0fff_c000_0000;

/// Firmware carve-out at the start of every region, never handed out
/// (`MEMPOOL_CARVEOUT_SIZE`, v2/neuron_dhal_v2.c:463 and
/// v3/neuron_dhal_v3.c:670; `mpset_block_carveout_regions_v2/_v3` take it at
/// the start of each channel x region, v2:476-515, v3:682-721).
pub(crate) const FW_CARVEOUT: u64 = 16 * MIB;

/// The engines a TPB reset stops beside each NeuronCore `i` (bit `i` of
/// the map), as the reference's `nr_get_tpb_reset_map` adds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TpbEngines {
    /// The core's top SPs, `per_core` of them: bits `8 + per_core * i` ..
    /// `8 + per_core * (i + 1) - 1` (v2/neuron_dhal_v2.c, `V2_TS_PER_DEVICE
    /// / V2_NC_PER_DEVICE` = 6 / 2 = 3).
    TopSp {
        /// Top SPs per core.
        per_core: u32,
    },
    /// The core's SDMA group at bit `i + 8` and TOP_SP group at bit `i + 16`
    /// (v3/neuron_dhal_v3.c; V4 registers no map of its own).
    SdmaAndTopSp,
}

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
    /// PCI device id (vendor [`PCI_VENDOR_AMAZON`]) a simulated device of
    /// this arch reports: the first of the arch's ids in the PCI id table.
    pub(crate) sim_pci_device: u16,
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
    /// the maps place in it (V2 APB aperture to 1 GiB; V3 TOP_SP to 0xf3000000).
    pub(crate) bar0_size: u64,
    /// BAR0 offset of the MISC RAM / FW-IO mailbox.
    pub(crate) bar0_misc_ram: u64,
    /// Device address of each NeuronCore's TPB tile, whose first
    /// [`SBUF_SIZE`] bytes are the core's State Buffer (entries past
    /// `nr_cores` unused).
    pub(crate) tpb_base: [u64; MAX_CORES],
    /// Firmware carve-out at each region start (0 = none).
    pub(crate) carveout: u64,
    /// The firmware reset handshake's timing.
    pub(crate) reset: ResetTiming,
    /// What a TPB reset stops beside each core.
    pub(crate) tpb_engines: TpbEngines,
    /// The DMA queue this module moves bytes with.
    pub(crate) dma: DmaEngine,
}

/// Where the host-to-device DMA queue of NeuronCore 0 is (queue 0 of its
/// UDMA unit), and how its descriptors name host memory.
#[derive(Debug)]
pub(crate) struct DmaEngine {
    /// BAR0 offset of the UDMA unit.
    pub(crate) unit: u64,
    /// ORed into every host DMA address (the reference's `pci_host_base`).
    pub(crate) host_base: u64,
    /// Address bits below `host_base`: the DMA mask of the function.
    pub(crate) host_bits: u32,
}

/// Trn1 / Inf2 (v2/address_map.h unless noted).
pub(crate) static V2: ArchInfo = ArchInfo {
    arch: Arch::V2,
    name: "v2",
    sim_pci_device: 0x7164,
    // `V2_MAX_DRAM_CHANNELS`.
    nr_channels: 2,
    // `V2_HBM_0_BASE`, `V2_HBM_1_BASE`.
    channel_base: [0x0, 0x10_0000_0000, 0, 0],
    // `V2_HBM_0_SIZE`, `V2_HBM_1_SIZE`.
    channel_size: 16 * GIB,
    // `V2_NC_PER_DEVICE`.
    nr_cores: 2,
    // `mmap_get_bar4_offset_v2` (v2/neuron_dhal_v2.c; seed 001 §2).
    bar4: Bar4Layout::Packed,
    bar4_size: 32 * GIB,
    bar0_size: GIB,
    // `V2_MMAP_BAR0_APB_MISC_RAM_OFFSET` = 0x30000000 + 0xe00000 + 0x1a0000.
    bar0_misc_ram: 0x30fa_0000,
    // `V2_MMAP_TPB_OFFSET + V2_MMAP_TPB_SIZE * n` (the SBUF entries of
    // `dm_mmap_special_v2`, v2/neuron_dhal_v2.c).
    tpb_base: [
        V2_TPB_BASE,
        V2_TPB_BASE + V2_TPB_TILE_SIZE,
        0,
        0,
        0,
        0,
        0,
        0,
    ],
    carveout: FW_CARVEOUT,
    // `V2_NR_RESET_POLL_INTERVAL` and `V2_NR_RESET_INIT_MAX_TOTAL_WAIT_TIME_MS`
    // (v2/neuron_dhal_v2.c:28-29, set at :1710 and :1713).
    reset: ResetTiming {
        poll_ms: 100,
        initiate_max_ms: 120_000,
    },
    tpb_engines: TpbEngines::TopSp { per_core: 3 },
    // Core 0's host-to-device engine is 32 (`V2_D2H_IDX`), queue 0
    // (`ndmar_get_h2t_eng_id_v2`, `ndmar_get_h2t_qid_v2`,
    // v2/neuron_dhal_v2.c:528-541), its UDMA unit at APB 0xffff0600000
    // (v2/address_map.h:170), BAR0 0x30000000 + (APB - 0xffff0000000)
    // (v2/address_map.h:79, 87); host addresses carry `V2_PCIE_A0_BASE`
    // (v2/address_map.h:88, release 2.24.7.0).
    dma: DmaEngine {
        unit: 0x3060_0000,
        host_base: 1 << 44,
        host_bits: 44,
    },
};

/// `V3_NR_RESET_POLL_INTERVAL` and `V3_NR_RESET_INIT_MAX_TOTAL_WAIT_TIME_MS`
/// (v3/neuron_dhal_v3.c:34-35, set at :2104 and :2107).
const V3_RESET: ResetTiming = ResetTiming {
    poll_ms: 100,
    initiate_max_ms: 480_000,
};

/// `V3_MMAP_TPB_0_BASE` .. `V3_MMAP_TPB_7_BASE` (v3/address_map.h).
const V3_TPB_BASES: [u64; MAX_CORES] = [
    0x0020_0000_0000,
    0x0030_0000_0000,
    0x0060_0000_0000,
    0x0070_0000_0000,
    0x8020_0000_0000,
    0x8030_0000_0000,
    0x8060_0000_0000,
    0x8070_0000_0000,
];

/// `V3_HBM_0_BASE` .. `V3_HBM_3_BASE` (v3/address_map.h).
const V3_HBM_BASES: [u64; MAX_CHANNELS] =
    [0x0, 0x0040_0000_0000, 0x8000_0000_0000, 0x8040_0000_0000];

/// V3's BAR4 window per channel: channel `i` at `V3_HBM_SIZE * i` (the HBM
/// entries of `dm_mmap_special_v3`, v3/neuron_dhal_v3.c).
const V3_BAR4_STRIDE: u64 = 64 * GIB;

/// V3's MISC RAM: `V3_MMAP_BAR0_APB_IO_0_MISC_RAM_OFFSET` =
/// `V3_PCIE_BAR0_APB_IO_0_OFFSET` (0) + `V3_APB_IO_0_USER_IO_RELBASE`
/// (0x6800000) + `V3_APB_IO_0_USER_IO_MISC_RAM_RELBASE` (0x484000)
/// (v3/address_map.h; read by `nr_wait_for_reset_completion_v3`).
const V3_BAR0_MISC_RAM: u64 = 0x680_0000 + 0x48_4000;

/// Core 0's host-to-device engine on V3 is 128, queue 0
/// (`ndmar_get_h2t_eng_id_v3`, v3/neuron_dhal_v3.c:734-756), at BAR0
/// 0x8006800000 - `V3_APB_IO_0_BASE` (v3/address_map.h:174-177); host
/// addresses carry `V3_PCIE_A0_BASE` (v3/address_map.h:9, release
/// 2.24.7.0). A later release's v4/neuron_dhal_v4.c overrides neither, so
/// V4 keeps them.
const V3_DMA: DmaEngine = DmaEngine {
    unit: 0x680_0000,
    host_base: 1 << 46,
    host_bits: 46,
};

/// Trn2: four channels, two per die (v3/address_map.h unless noted).
pub(crate) static V3: ArchInfo = ArchInfo {
    arch: Arch::V3,
    name: "v3",
    sim_pci_device: 0x7364,
    // `V3_MAX_DRAM_CHANNELS`.
    nr_channels: 4,
    channel_base: V3_HBM_BASES,
    // `V3_HBM_ACTIVE_SIZE` (24 GiB of each 64 GiB `V3_HBM_SIZE` span).
    channel_size: 24 * GIB,
    // `V3_NC_PER_DEVICE`.
    nr_cores: 8,
    bar4: Bar4Layout::Strided(V3_BAR4_STRIDE),
    bar4_size: 4 * V3_BAR4_STRIDE,
    bar0_size: 4 * GIB,
    bar0_misc_ram: V3_BAR0_MISC_RAM,
    tpb_base: V3_TPB_BASES,
    carveout: FW_CARVEOUT,
    reset: V3_RESET,
    tpb_engines: TpbEngines::SdmaAndTopSp,
    dma: V3_DMA,
};

/// Trn3: 36 GiB channels (seed 001 §2; `V4_HBM_ACTIVE_SIZE`,
/// v4/address_map.h:92). `v4/neuron_dhal_v4.c` registers after V3's
/// functions and overrides only what differs (v4:487-510): the carve-out,
/// the reset timing, the MISC RAM offset and the BARs stay V3's. Its
/// address map keeps V3's channel bases and 64 GiB BAR4 stride
/// (v4/address_map.h:87-91, :131-134). Assumed as V3 for want of a source:
/// the TPB tile addresses and the core count.
pub(crate) static V4: ArchInfo = ArchInfo {
    arch: Arch::V4,
    name: "v4",
    sim_pci_device: 0x7564,
    nr_channels: 4,
    channel_base: V3_HBM_BASES,
    channel_size: 36 * GIB,
    nr_cores: 8,
    bar4: Bar4Layout::Strided(V3_BAR4_STRIDE),
    bar4_size: 4 * V3_BAR4_STRIDE,
    bar0_size: 4 * GIB,
    bar0_misc_ram: V3_BAR0_MISC_RAM,
    tpb_base: V3_TPB_BASES,
    carveout: FW_CARVEOUT,
    reset: V3_RESET,
    tpb_engines: TpbEngines::SdmaAndTopSp,
    dma: V3_DMA,
};

/// Every arch, oldest first.
pub(crate) const ARCHS: [&ArchInfo; 3] = [&V2, &V3, &V4];

impl ArchInfo {
    /// Arch from its generation number (2, 3 or 4).
    pub(crate) fn from_number(number: u32) -> Option<&'static ArchInfo> {
        ARCHS.into_iter().find(|a| a.arch as u32 == number)
    }

    /// The map of every core the device has, one bit per core.
    pub(crate) fn all_cores(&self) -> u32 {
        ((1u64 << self.nr_cores) - 1) as u32
    }

    /// The mailbox map of a TPB reset of the cores in `cores` (one bit per
    /// core, none past `nr_cores`): each core's bit and its engines' bits.
    pub(crate) fn tpb_reset_map(&self, cores: u32) -> u32 {
        (0..self.nr_cores as u32)
            .filter(|i| cores & (1 << i) != 0)
            .fold(0, |map, i| {
                map | 1 << i
                    | match self.tpb_engines {
                        TpbEngines::TopSp { per_core } => {
                            ((1 << per_core) - 1) << (8 + per_core * i)
                        }
                        TpbEngines::SdmaAndTopSp => 1 << (i + 8) | 1 << (i + 16),
                    }
            })
    }
}

// Every channel is reachable through BAR4, and the grid has room for every
// channel.
const _: () = {
    let mut i = 0;
    while i < ARCHS.len() {
        let a = ARCHS[i];
        assert!(a.nr_channels as u64 * a.channel_size <= a.bar4_size);
        assert!(a.nr_channels <= MAX_CHANNELS);
        // The engine bits of the last core fit the 32-bit mailbox map.
        let top = match a.tpb_engines {
            TpbEngines::TopSp { per_core } => 8 + per_core * a.nr_cores as u32,
            TpbEngines::SdmaAndTopSp => 16 + a.nr_cores as u32,
        };
        assert!(top <= 32);
        i += 1;
    }
};

#[kunit_tests(neuron_hbm_arch)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip() {
        for a in ARCHS {
            assert_eq!(
                ArchInfo::from_number(a.arch as u32).map(|b| b.arch),
                Some(a.arch)
            );
        }
        assert!(ArchInfo::from_number(1).is_none());
        assert!(ArchInfo::from_number(5).is_none());
    }

    #[test]
    fn tpb_reset_maps_carry_each_cores_engines() {
        // V2: core bit, then three top SPs per core from bit 8.
        assert_eq!(V2.tpb_reset_map(0b01), 0x0701);
        assert_eq!(V2.tpb_reset_map(0b10), 0x3802);
        assert_eq!(V2.tpb_reset_map(0b11), 0x3f03);
        // V3 and V4: core bit, SDMA group at +8, TOP_SP group at +16.
        for a in [&V3, &V4] {
            assert_eq!(a.tpb_reset_map(0b1), 0x01_0101);
            assert_eq!(a.tpb_reset_map(0x80), 0x80_8080);
            assert_eq!(a.tpb_reset_map(0xff), 0xff_ffff);
        }
        // Cores the arch does not have add nothing.
        assert_eq!(V2.tpb_reset_map(0b100), 0);
    }

    #[test]
    fn reference_map_values() {
        assert_eq!(V2.bar0_misc_ram, 0x30fa_0000);
        assert_eq!(V3.bar0_misc_ram, 0x6c8_4000);
        assert_eq!(V2.tpb_base[1], 0x0fff_c400_0000);
        assert_eq!(V3.tpb_base[0], 0x20_0000_0000);
        assert_eq!(V3.tpb_base[7], 0x8070_0000_0000);
        assert_eq!(V3.channel_base[3], 0x8040_0000_0000);
        for a in [&V2, &V3, &V4] {
            assert!(a.nr_cores <= MAX_CORES);
            assert!(a.bar0_misc_ram + 0x1000 <= a.bar0_size);
        }
    }
}
