// SPDX-License-Identifier: GPL-2.0-only

//! BAR0 registers of the MISC RAM / FW-IO mailbox (seed 001 §1; reference
//! neuron_reset.h and neuron_fw_io.h). Offsets are relative to the MISC RAM,
//! whose BAR0 offset differs per arch ([`ArchInfo::bar0_misc_ram`]); the
//! registers are read and written through the kernel crate's [`Io`] over a
//! [`MiscRam`] view of that window, as the in-tree drivers do:
//! `mb.read(FW_STATUS).reset_in_progress()`,
//! `mb.write_reg(RESET_REQUEST::zeroed().with_kind(k))`.
//!
//! [`ArchInfo::bar0_misc_ram`]: crate::arch::ArchInfo::bar0_misc_ram
//! [`Io`]: kernel::io::Io

use kernel::{
    io::{register, IoSysMap, Region},
    prelude::*,
};

/// Bytes of the MISC RAM window the registers below live in.
pub(crate) const MISC_RAM_SIZE: usize = 0x1000;

/// The MISC RAM window of one device: BAR0 MMIO on a PCI function, kernel
/// memory on a simulated device. Accesses are bounds-checked at build time.
pub(crate) type MiscRam<'a> = IoSysMap<'a, Region<MISC_RAM_SIZE>>;

register! {
    /// Firmware status (`V2_FW_IO_REG_FW_STATUS_OFFSET`, neuron_reset.h; also
    /// read on V3 by `nr_wait_for_reset_completion_v3`).
    pub(crate) FW_STATUS(u32) @ 0x808 {
        /// `V2_FW_IO_REG_FW_STATUS_DEVICE_READY_MASK` (0x8): set while a reset is in
        /// progress, clear once the device is ready again.
        3:3 reset_in_progress => bool;
    }

    /// Reset request (`FW_IO_REG_RESET_OFFSET`, neuron_fw_io.h): the reset
    /// type, cleared by the firmware when it takes it.
    pub(crate) RESET_REQUEST(u32) @ 0x1ec {
        /// 1 = whole device, 2 = the TPBs in [`RESET_TPB_MAP`].
        31:0 kind;
    }

    /// NeuronCores to reset for a TPB reset (`FW_IO_REG_RESET_TPB_MAP_OFFSET`).
    pub(crate) RESET_TPB_MAP(u32) @ 0x1d8 {
        /// One bit per NeuronCore.
        31:0 map;
    }

    /// The device's index as the firmware reports it
    /// (`FW_IO_REG_DEVICE_ID_OFFSET`, neuron_fw_io.h:44): what the
    /// reference's probe reads until the firmware answers.
    pub(crate) DEVICE_ID(u32) @ 0x24 {
        /// Device index.
        31:0 id;
    }

    /// Doorbell that hands the request to the firmware
    /// (`FW_IO_REG_TRIGGER_INT_NOSEC_OFFSET`, `V2_FW_IO_REG_FW_TRIGGER_OFFSET`).
    pub(crate) RESET_TRIGGER(u32) @ 0x800 {
        /// Set to ring.
        0:0 ring => bool;
    }
}

// The mailbox is where the reference driver has it: V2 at BAR0 0x30fa0000
// (`V2_MMAP_BAR0_APB_MISC_RAM_OFFSET`, v2/address_map.h:30-33), V3 at
// 0x6800000 + 0x484000 (`V3_MMAP_BAR0_APB_IO_0_MISC_RAM_OFFSET`,
// v3/address_map.h:211), which V4 inherits (neuron_dhal_v4.c overrides no
// `bar0_misc_ram_offset`).
const _: () = {
    use crate::arch::{V2, V3, V4};
    use kernel::io::register::Register;
    assert!(V2.bar0_misc_ram + FW_STATUS::OFFSET as u64 == 0x30fa_0808);
    assert!(V2.bar0_misc_ram + RESET_REQUEST::OFFSET as u64 == 0x30fa_01ec);
    assert!(V2.bar0_misc_ram + RESET_TPB_MAP::OFFSET as u64 == 0x30fa_01d8);
    assert!(V2.bar0_misc_ram + RESET_TRIGGER::OFFSET as u64 == 0x30fa_0800);
    assert!(FW_STATUS::OFFSET + 4 <= MISC_RAM_SIZE);
    assert!(V3.bar0_misc_ram == 0x680_0000 + 0x48_4000);
    assert!(V4.bar0_misc_ram == V3.bar0_misc_ram);
};

/// RESET_REQUEST of a device reset (`FW_IO_RESET_TYPE_DEVICE`,
/// neuron_fw_io.h:38).
pub(crate) const RESET_TYPE_DEVICE: u32 = 1;
/// RESET_REQUEST of a TPB reset (`FW_IO_RESET_TYPE_TPB`, neuron_fw_io.h:39).
pub(crate) const RESET_TYPE_TPB: u32 = 2;

/// What a register read returns while the firmware is not answering.
pub(crate) const FW_IO_BAD_READ: u32 = 0xdead_beef;

/// What every register read returns once the device is gone (a PCI read
/// that no device answers completes with all ones).
pub(crate) const GONE: u32 = u32::MAX;

#[kunit_tests(neuron_hbm_regs)]
mod tests {
    use super::*;

    #[test]
    fn fw_status_bit_is_0x8() {
        assert!(FW_STATUS::from(0x8u32).reset_in_progress());
        assert!(!FW_STATUS::from(0xf7u32).reset_in_progress());
    }
}
