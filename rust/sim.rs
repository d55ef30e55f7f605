// SPDX-License-Identifier: GPL-2.0

//! The simulated device: a [`DeviceIo`] backend with the real arch's BAR sizes
//! and addresses, BAR0 and BAR4 in sparse kernel memory, and a scriptable
//! model of the firmware's status register and reset mailbox at the arch's
//! own MISC RAM offset.

use crate::{
    arch::ArchInfo,
    io::{reg_offset, DeviceIo},
    regs::{MiscRamReg, FW_IO_BAD_READ, FW_STATUS, RESET_REQUEST, RESET_TRIGGER},
    sparse::SparseMem,
};
use kernel::{
    new_spinlock,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        SpinLock,
    },
    uaccess::UserSliceReader,
};

/// How the simulated firmware behaves after a reset is triggered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FwScript {
    /// The FW_STATUS read (1-based) that first shows the reset done; 0 = never.
    pub(crate) ready_on_poll: u32,
    /// FW_STATUS reads that return `0xdeadbeef` first (not counted as polls).
    pub(crate) bad_reads: u32,
    /// Whether the firmware takes mailbox requests (clears RESET_REQUEST).
    pub(crate) takes_requests: bool,
}

impl FwScript {
    /// A firmware that takes every request and is ready at the first poll.
    pub(crate) const PROMPT: Self = Self {
        ready_on_poll: 1,
        bad_reads: 0,
        takes_requests: true,
    };
}

struct FwState {
    script: FwScript,
    /// A reset is in progress.
    busy: bool,
    /// FW_STATUS polls seen since the reset began.
    polls: u32,
    /// Bad reads still to return.
    bad_left: u32,
    /// Pending RESET_REQUEST value.
    request: u32,
    /// Resets the firmware has taken.
    resets: u32,
}

/// BAR0 + BAR4 of one simulated device.
#[pin_data]
pub(crate) struct SimIo {
    info: &'static ArchInfo,
    #[pin]
    bar0: SparseMem,
    #[pin]
    bar4: SparseMem,
    #[pin]
    fw: SpinLock<FwState>,
    present: Atomic<bool>,
}

impl SimIo {
    /// A simulated device of arch `info`, firmware ready, nothing resident.
    pub(crate) fn new(info: &'static ArchInfo) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            info,
            bar0 <- SparseMem::new(info.bar0_size),
            bar4 <- SparseMem::new(info.bar4_size),
            fw <- new_spinlock!(FwState {
                script: FwScript::PROMPT,
                busy: false,
                polls: 0,
                bad_left: 0,
                request: 0,
                resets: 0,
            }),
            present: Atomic::new(true),
        })
    }

    /// Sets how the firmware answers the next resets.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn set_fw_script(&self, script: FwScript) {
        self.fw.lock().script = script;
    }

    /// Starts a reset in the firmware model, as a taken mailbox request does.
    pub(crate) fn begin_reset(&self) {
        let mut fw = self.fw.lock();
        fw.busy = true;
        fw.polls = 0;
        fw.bad_left = fw.script.bad_reads;
        fw.resets += 1;
    }

    /// Resets the firmware has taken so far.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn resets_taken(&self) -> u32 {
        self.fw.lock().resets
    }

    /// Simulates surprise removal: every access fails with `ENODEV` from now on.
    pub(crate) fn unplug(&self) {
        self.present.store(false, Relaxed);
    }

    /// BAR4 pages materialized so far.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn bar4_resident_pages(&self) -> usize {
        self.bar4.resident_pages()
    }

    fn status_read(&self) -> u32 {
        let mut fw = self.fw.lock();
        if !fw.busy {
            return 0;
        }
        if fw.bad_left > 0 {
            fw.bad_left -= 1;
            return FW_IO_BAD_READ;
        }
        fw.polls += 1;
        if fw.script.ready_on_poll != 0 && fw.polls >= fw.script.ready_on_poll {
            fw.busy = false;
            return 0;
        }
        u32::from(FW_STATUS::zeroed().with_reset_in_progress(true))
    }

    /// `ENODEV` once the device was unplugged.
    fn check_present(&self) -> Result {
        if self.present.load(Relaxed) {
            Ok(())
        } else {
            Err(ENODEV)
        }
    }

    /// Checks a 32-bit register access at BAR0 offset `off`.
    fn check_reg(&self, off: u64) -> Result {
        self.check_present()?;
        reg_offset(off, self.info.bar0_size).map(|_| ())
    }
}

impl DeviceIo for SimIo {
    fn read32(&self, off: u64) -> Result<u32> {
        self.check_reg(off)?;
        if off == FW_STATUS::bar0(self.info) {
            return Ok(self.status_read());
        }
        if off == RESET_REQUEST::bar0(self.info) {
            return Ok(self.fw.lock().request);
        }
        let mut b = [0u8; 4];
        self.bar0.read(off, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn write32(&self, off: u64, value: u32) -> Result {
        self.check_reg(off)?;
        if off == RESET_REQUEST::bar0(self.info) {
            self.fw.lock().request = value;
            return Ok(());
        }
        if off == RESET_TRIGGER::bar0(self.info) {
            let takes = {
                let mut fw = self.fw.lock();
                let takes = fw.script.takes_requests && fw.request != 0;
                if takes {
                    fw.request = 0;
                }
                takes
            };
            if takes {
                self.begin_reset();
            }
            return Ok(());
        }
        self.bar0.write(off, &value.to_le_bytes())
    }

    fn bar4_write(&self, off: u64, src: &[u8]) -> Result {
        self.check_present()?;
        self.bar4.write(off, src)
    }

    fn bar4_write_from_user(
        &self,
        off: u64,
        src: &mut UserSliceReader,
        len: usize,
        bounce: &mut KVVec<u8>,
    ) -> Result {
        self.check_present()?;
        self.bar4.write_from_user(off, src, len, bounce)
    }

    fn bar4_read(&self, off: u64, dst: &mut [u8]) -> Result {
        self.check_present()?;
        self.bar4.read(off, dst)
    }

    fn bar4_zero(&self, off: u64, len: u64) -> Result {
        self.check_present()?;
        self.bar4.zero(off, len)
    }

    fn is_present(&self) -> bool {
        self.present.load(Relaxed)
    }
}
