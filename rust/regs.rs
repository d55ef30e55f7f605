// SPDX-License-Identifier: GPL-2.0

//! BAR0 registers of the MISC RAM / FW-IO mailbox (seed 001 §1; reference
//! neuron_dhal_v2.c and neuron_reset.h). Offsets are BAR0 offsets.

use kernel::{
    io::{register, register::Register},
    prelude::*,
};

register! {
    /// Firmware status (`BAR0_MISC_RAM + V2_FW_IO_REG_FW_STATUS_OFFSET`).
    pub(crate) FW_STATUS(u32) @ 0x30fa_0808 {
        /// `V2_FW_IO_REG_FW_STATUS_DEVICE_READY_MASK` (0x8): set while a reset is in
        /// progress, clear once the device is ready again.
        3:3 reset_in_progress => bool;
    }

    /// Reset request: the reset type, cleared by the firmware when it takes it.
    pub(crate) RESET_REQUEST(u32) @ 0x30fa_01ec {
        /// 1 = whole device, 2 = the TPBs in [`RESET_TPB_MAP`].
        31:0 kind;
    }

    /// NeuronCores to reset for a TPB reset.
    pub(crate) RESET_TPB_MAP(u32) @ 0x30fa_01d8 {
        /// One bit per NeuronCore.
        31:0 map;
    }

    /// Doorbell that hands the request to the firmware.
    pub(crate) RESET_TRIGGER(u32) @ 0x30fa_0800 {
        /// Written as 1.
        31:0 ring;
    }
}

/// BAR0 offset of a fixed register as the `u64` the device interface takes.
pub(crate) trait RegOffset {
    /// The register's offset.
    const OFFSET_U64: u64;
}

impl<R: Register> RegOffset for R {
    const OFFSET_U64: u64 = R::OFFSET as u64;
}

/// What a register read returns while the firmware is not answering.
pub(crate) const FW_IO_BAD_READ: u32 = 0xdead_beef;

#[kunit_tests(neuron_hbm_regs)]
mod tests {
    use super::*;
    use crate::addr::BAR0_MISC_RAM;

    #[test]
    fn mailbox_offsets_follow_misc_ram() {
        assert_eq!(FW_STATUS::OFFSET as u64, BAR0_MISC_RAM + 0x808);
        assert_eq!(RESET_REQUEST::OFFSET as u64, BAR0_MISC_RAM + 0x1ec);
        assert_eq!(RESET_TPB_MAP::OFFSET as u64, BAR0_MISC_RAM + 0x1d8);
        assert_eq!(RESET_TRIGGER::OFFSET as u64, BAR0_MISC_RAM + 0x800);
    }

    #[test]
    fn fw_status_bit_is_0x8() {
        assert!(FW_STATUS::from(0x8u32).reset_in_progress());
        assert!(!FW_STATUS::from(0xf7u32).reset_in_progress());
    }
}
