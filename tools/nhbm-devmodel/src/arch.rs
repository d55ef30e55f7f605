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
    /// BAR0 offset of the MISC RAM / FW-IO mailbox.
    pub misc_ram: u64,
    /// The HBM stacks.
    pub stacks: &'static [Stack],
    /// What a TPB reset of NeuronCore `i` covers: entry `i` holds the bits
    /// of RESET_TPB_MAP that stand for the core and the engines it owns.
    pub tpb_units: &'static [u32],
    /// BAR0 offsets of the UDMA units the host-to-device queues live in.
    pub udma_units: &'static [u64],
    /// How an engine tells a host address from a device one.
    pub host_window: HostWindow,
}

/// The bits of a DMA address that say "host memory", as the reference ORs
/// `pci_host_base` into every host address it gives an engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostWindow {
    /// The bits compared.
    pub mask: u64,
    /// Their value for host memory.
    pub value: u64,
}

impl HostWindow {
    /// The guest address behind DMA address `addr`, `None` for a device one.
    pub fn host_address(&self, addr: u64) -> Option<u64> {
        (addr & self.mask == self.value).then_some(addr & !self.mask)
    }
}

/// V2's two cores, each with its three top SPs (`V2_TS_PER_DEVICE` 6 over
/// `V2_NC_PER_DEVICE` 2) at bits 8.. of the map (`nr_get_tpb_reset_map`,
/// v2/neuron_dhal_v2.c): core 0 = bit 0 + bits 8-10, core 1 = bit 1 + bits
/// 11-13.
static V2_TPB_UNITS: [u32; 2] = [0b111 << 8 | 1, 0b111 << 11 | 1 << 1];

/// V3's eight cores, each with its SDMA group at bit `8 + i` and its TOP_SP
/// group at bit `16 + i` (`nr_get_tpb_reset_map`, v3/neuron_dhal_v3.c);
/// V4 registers no map of its own (v4/neuron_dhal_v4.c keeps V3's).
static V3_TPB_UNITS: [u32; 8] = {
    let mut u = [0; 8];
    let mut i = 0;
    while i < 8 {
        u[i] = 0x01_0101 << i;
        i += 1;
    }
    u
};

/// Trn1 / Inf2: two 16 GiB stacks at device PA 0 and 64 GiB, packed into a
/// 32 GiB BAR4 (64 GiB appears at 16 GiB).
pub static V2: Arch = Arch {
    name: "v2",
    device_id: 0x7164,
    bar0_size: GIB,
    bar4_size: 32 * GIB,
    // `V2_MMAP_BAR0_APB_MISC_RAM_OFFSET` (v2/address_map.h:30-33).
    misc_ram: 0x30fa_0000,
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
    tpb_units: &V2_TPB_UNITS,
    // NeuronCore 0's host-to-device engine is 32 (`V2_D2H_IDX`), core 1's
    // is 33 (`V2_H2D_IDX`), `ndmar_get_h2t_eng_id_v2` (v2/neuron_dhal_v2.c:
    // 528-531); their UDMA units at APB 0xffff0600000 and 0xffff0d00000
    // (v2/address_map.h:170-171) are BAR0 0x30000000 + (APB -
    // 0xffff0000000) (v2/address_map.h:79, 87; v2/neuron_dhal_v2.c:
    // 1405-1420).
    udma_units: &[0x3060_0000, 0x30d0_0000],
    // `V2_PCIE_A0_BASE` 1 << 44, "Host memory access" (v2/address_map.h:
    // 88), told apart by `V2_PCIE_ALL_RT_MASK` bits 48:44
    // (v2/address_map.h:17; v2/neuron_dhal_v2.c:1349-1357).
    host_window: HostWindow {
        mask: 0x1f << 44,
        value: 1 << 44,
    },
};

/// Device-physical bases of the four HBM stacks of V3 and V4
/// (`V3_HBM_0_BASE`.., v3/address_map.h:88-91; v4/address_map.h:87-90).
const V3_BASES: [u64; 4] = [0, 0x40_0000_0000, 0x8000_0000_0000, 0x8040_0000_0000];
/// Each stack's window in BAR4 is `V3_HBM_SIZE` (64 GiB) after the previous
/// one (`V3_PCIE_BAR4_HBM_n_OFFSET`, v3/address_map.h:132-135).
const V3_BAR4_STRIDE: u64 = 64 * GIB;
/// V3's host-to-device engines 128-131 (one per pair of cores,
/// `ndmar_get_h2t_eng_id_v3`, v3/neuron_dhal_v3.c:734-756) as `ndma_init_v3`
/// maps them into BAR0 (v3/neuron_dhal_v3.c, v3/address_map.h:174-177).
const V3_UDMA_UNITS: [u64; 4] = [0x0680_0000, 0x0690_0000, 0x4680_0000, 0x4690_0000];
/// `V3_PCIE_A0_BASE` 1 << 46 (v3/address_map.h:9): host if the bit is set.
const V3_HOST_WINDOW: HostWindow = HostWindow {
    mask: 1 << 46,
    value: 1 << 46,
};
/// `V3_MMAP_BAR0_APB_IO_0_MISC_RAM_OFFSET` (v3/address_map.h:211), kept by V4.
const V3_MISC_RAM: u64 = 0x680_0000 + 0x48_4000;

const fn v3_stacks(size: u64) -> [Stack; 4] {
    let mut s = [Stack {
        device_base: 0,
        bar4_base: 0,
        size,
    }; 4];
    let mut i = 0;
    while i < 4 {
        s[i].device_base = V3_BASES[i];
        s[i].bar4_base = i as u64 * V3_BAR4_STRIDE;
        i += 1;
    }
    s
}

static V3_STACKS: [Stack; 4] = v3_stacks(24 * GIB);
static V4_STACKS: [Stack; 4] = v3_stacks(36 * GIB);

/// Trn2: four 24 GiB stacks (`V3_HBM_ACTIVE_SIZE`, v3/address_map.h:93),
/// each at its 64 GiB step of a 256 GiB BAR4.
pub static V3: Arch = Arch {
    name: "v3",
    device_id: 0x7364,
    bar0_size: 4 * GIB,
    bar4_size: 4 * V3_BAR4_STRIDE,
    misc_ram: V3_MISC_RAM,
    stacks: &V3_STACKS,
    tpb_units: &V3_TPB_UNITS,
    udma_units: &V3_UDMA_UNITS,
    host_window: V3_HOST_WINDOW,
};

/// Trn3: V3's map with 36 GiB stacks (`V4_HBM_ACTIVE_SIZE`,
/// v4/address_map.h:92); `mmap_get_bar4_offset_v4` (v4/neuron_dhal_v4.c:
/// 284-299) remaps as V3's does.
pub static V4: Arch = Arch {
    name: "v4",
    device_id: 0x7564,
    bar0_size: 4 * GIB,
    bar4_size: 4 * V3_BAR4_STRIDE,
    misc_ram: V3_MISC_RAM,
    stacks: &V4_STACKS,
    tpb_units: &V3_TPB_UNITS,
    // 2.24.7.0 has no V4 DMA setup of its own; the later
    // v4/neuron_dhal_v4.c "only overrides the functions and constants that
    // are different from v3" and overrides neither the engines nor
    // `pci_host_base`, so V4 keeps V3's.
    udma_units: &V3_UDMA_UNITS,
    host_window: V3_HOST_WINDOW,
};

impl Arch {
    /// The arch named `name`.
    pub fn by_name(name: &str) -> Option<&'static Arch> {
        [&V2, &V3, &V4].into_iter().find(|a| a.name == name)
    }

    /// The RESET_TPB_MAP a TPB reset of the cores in `cores` must carry:
    /// `None` when it names no core or one the arch does not have.
    pub fn tpb_reset_map(&self, cores: u32) -> Option<u32> {
        if cores == 0 || u64::from(cores) >> self.tpb_units.len() != 0 {
            return None;
        }
        Some(
            self.tpb_units
                .iter()
                .enumerate()
                .filter(|(i, _)| cores >> i & 1 == 1)
                .fold(0, |map, (_, u)| map | u),
        )
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
    fn v3_and_v4_step_64_gib_per_stack() {
        assert_eq!(V3.bar4_offset(0x40_0000_0000 + 8, 4), Some(64 * GIB + 8));
        assert_eq!(V3.bar4_offset(0x8040_0000_0000, 4), Some(192 * GIB));
        assert_eq!(V3.bar4_offset(24 * GIB, 4), None, "past V3's 24 GiB");
        assert_eq!(V4.bar4_offset(24 * GIB, 4), Some(24 * GIB));
        assert_eq!(V4.bar4_offset(36 * GIB - 4, 4), Some(36 * GIB - 4));
        assert_eq!(V4.bar4_offset(36 * GIB, 4), None);
        for a in [&V3, &V4] {
            let last = a.stacks[3];
            assert!(last.bar4_base + last.size <= a.bar4_size);
            assert_eq!(
                Arch::by_name(a.name).map(|x| x.device_id),
                Some(a.device_id)
            );
        }
    }

    #[test]
    fn tpb_maps_carry_the_cores_engines() {
        assert_eq!(V2.tpb_reset_map(0b11), Some(0x3f03));
        assert_eq!(V2.tpb_reset_map(0b100), None);
        assert_eq!(V3.tpb_reset_map(0b101), Some(0x05_0505));
        assert_eq!(V4.tpb_reset_map(0xff), Some(0xff_ffff));
        assert_eq!(V3.tpb_reset_map(0), None);
    }

    #[test]
    fn stacks_fill_bar4() {
        let total: u64 = V2.stacks.iter().map(|s| s.size).sum();
        assert_eq!(total, V2.bar4_size);
        assert_eq!(Arch::by_name("v2").map(|a| a.device_id), Some(0x7164));
        assert!(Arch::by_name("v9").is_none());
    }
}
