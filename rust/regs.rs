// SPDX-License-Identifier: GPL-2.0

//! BAR0 registers of the MISC RAM / FW-IO mailbox (seed 001 §1; reference
//! neuron_reset.h and neuron_fw_io.h). Offsets are relative to the MISC RAM,
//! whose BAR0 offset differs per arch ([`ArchInfo::bar0_misc_ram`]).

use crate::arch::ArchInfo;
use kernel::{
    io::{
        register,
        register::{Register, WithBase},
    },
    prelude::*,
};

/// Base family of the MISC RAM registers.
pub(crate) struct MiscRam;

register! {
    /// Firmware status (`V2_FW_IO_REG_FW_STATUS_OFFSET`, neuron_reset.h; also
    /// read on V3 by `nr_wait_for_reset_completion_v3`).
    pub(crate) FW_STATUS(u32) @ MiscRam + 0x808 {
        /// `V2_FW_IO_REG_FW_STATUS_DEVICE_READY_MASK` (0x8): set while a reset is in
        /// progress, clear once the device is ready again.
        3:3 reset_in_progress => bool;
    }

    /// Reset request (`FW_IO_REG_RESET_OFFSET`, neuron_fw_io.h): the reset
    /// type, cleared by the firmware when it takes it.
    pub(crate) RESET_REQUEST(u32) @ MiscRam + 0x1ec {
        /// 1 = whole device, 2 = the TPBs in [`RESET_TPB_MAP`].
        31:0 kind;
    }

    /// NeuronCores to reset for a TPB reset (`FW_IO_REG_RESET_TPB_MAP_OFFSET`).
    pub(crate) RESET_TPB_MAP(u32) @ MiscRam + 0x1d8 {
        /// One bit per NeuronCore.
        31:0 map;
    }

    /// Doorbell that hands the request to the firmware
    /// (`FW_IO_REG_TRIGGER_INT_NOSEC_OFFSET`, `V2_FW_IO_REG_FW_TRIGGER_OFFSET`).
    pub(crate) RESET_TRIGGER(u32) @ MiscRam + 0x800 {
        /// Written as 1.
        31:0 ring;
    }
}

/// BAR0 offset of a MISC RAM register on a given arch, as the `u64` the
/// device interface takes.
pub(crate) trait MiscRamReg {
    /// The register's BAR0 offset on arch `info`.
    fn bar0(info: &ArchInfo) -> u64;
}

impl<R: Register + WithBase<BaseFamily = MiscRam>> MiscRamReg for R {
    fn bar0(info: &ArchInfo) -> u64 {
        info.bar0_misc_ram + R::OFFSET as u64
    }
}

/// What a register read returns while the firmware is not answering.
pub(crate) const FW_IO_BAD_READ: u32 = 0xdead_beef;

#[kunit_tests(neuron_hbm_regs)]
mod tests {
    use super::*;
    use crate::arch::{V2, V3, V4};

    #[test]
    fn mailbox_offsets_follow_misc_ram() {
        assert_eq!(FW_STATUS::bar0(&V2), 0x30fa_0808);
        assert_eq!(RESET_REQUEST::bar0(&V2), 0x30fa_01ec);
        assert_eq!(RESET_TPB_MAP::bar0(&V2), 0x30fa_01d8);
        assert_eq!(RESET_TRIGGER::bar0(&V2), 0x30fa_0800);
        // V3 (and V4, assumed): BAR0 0x6800000 + 0x484000.
        for info in [&V3, &V4] {
            assert_eq!(FW_STATUS::bar0(info), 0x6c8_4808);
            assert_eq!(RESET_REQUEST::bar0(info), 0x6c8_41ec);
            assert_eq!(RESET_TPB_MAP::bar0(info), 0x6c8_41d8);
            assert_eq!(RESET_TRIGGER::bar0(info), 0x6c8_4800);
        }
    }

    #[test]
    fn fw_status_bit_is_0x8() {
        assert!(FW_STATUS::from(0x8u32).reset_in_progress());
        assert!(!FW_STATUS::from(0xf7u32).reset_in_progress());
    }
}
