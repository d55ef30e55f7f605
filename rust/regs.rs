// SPDX-License-Identifier: GPL-2.0

//! BAR0 registers of the MISC RAM / FW-IO mailbox (seed 001 §1; reference
//! neuron_reset.h and neuron_fw_io.h). Offsets are relative to the MISC RAM,
//! whose BAR0 offset differs per arch ([`ArchInfo::bar0_misc_ram`]). They
//! are read and written as typed values through a [`Mailbox`]:
//! `FW_STATUS::read(mb)?.reset_in_progress()`,
//! `RESET_REQUEST::zeroed().with_kind(k).write(mb)?`.

use crate::{arch::ArchInfo, io::DeviceIo};
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
        /// Set to ring.
        0:0 ring => bool;
    }
}

/// The MISC RAM of one device, reached through its device interface.
#[derive(Clone, Copy)]
pub(crate) struct Mailbox<'a> {
    io: &'a dyn DeviceIo,
    info: &'a ArchInfo,
}

impl<'a> Mailbox<'a> {
    /// The MISC RAM of a device of arch `info` behind `io`.
    pub(crate) fn new(io: &'a dyn DeviceIo, info: &'a ArchInfo) -> Self {
        Self { io, info }
    }

    /// Whether the device is still there.
    pub(crate) fn is_present(&self) -> bool {
        self.io.is_present()
    }
}

/// A 32-bit MISC RAM register: its BAR0 offset on each arch, and typed
/// access through a [`Mailbox`].
pub(crate) trait MiscRamReg:
    Register + WithBase<BaseFamily = MiscRam> + From<u32> + Into<u32> + Copy
{
    /// The register's BAR0 offset on arch `info`.
    fn bar0(info: &ArchInfo) -> u64 {
        info.bar0_misc_ram + Self::OFFSET as u64
    }

    /// Reads the register.
    fn read(mb: Mailbox<'_>) -> Result<Self> {
        Ok(mb.io.read32(Self::bar0(mb.info))?.into())
    }

    /// Writes the register.
    fn write(self, mb: Mailbox<'_>) -> Result {
        mb.io.write32(Self::bar0(mb.info), self.into())
    }
}

impl<R> MiscRamReg for R where
    R: Register + WithBase<BaseFamily = MiscRam> + From<u32> + Into<u32> + Copy
{
}

// The mailbox is where the reference driver has it: V2 at BAR0 0x30fa0000
// (`V2_APB_MISC_RAM_OFFSET`), V3 (and V4, assumed) at 0x6800000 + 0x484000.
const _: () = {
    use crate::arch::{V2, V3, V4};
    assert!(V2.bar0_misc_ram + FW_STATUS::OFFSET as u64 == 0x30fa_0808);
    assert!(V2.bar0_misc_ram + RESET_REQUEST::OFFSET as u64 == 0x30fa_01ec);
    assert!(V2.bar0_misc_ram + RESET_TPB_MAP::OFFSET as u64 == 0x30fa_01d8);
    assert!(V2.bar0_misc_ram + RESET_TRIGGER::OFFSET as u64 == 0x30fa_0800);
    assert!(V3.bar0_misc_ram == 0x680_0000 + 0x48_4000);
    assert!(V4.bar0_misc_ram == V3.bar0_misc_ram);
};

/// What a register read returns while the firmware is not answering.
pub(crate) const FW_IO_BAD_READ: u32 = 0xdead_beef;

#[kunit_tests(neuron_hbm_regs)]
mod tests {
    use super::*;

    #[test]
    fn fw_status_bit_is_0x8() {
        assert!(FW_STATUS::from(0x8u32).reset_in_progress());
        assert!(!FW_STATUS::from(0xf7u32).reset_in_progress());
    }
}
