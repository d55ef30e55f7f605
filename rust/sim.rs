// SPDX-License-Identifier: GPL-2.0

//! The simulated device: a [`DeviceIo`] backend with the real arch's BAR4
//! size in sparse kernel memory, and BAR0's MISC RAM as a register file in
//! kernel memory that the kernel crate's [`Io`] reads and writes as
//! [`SysMem`], beside a scriptable model of the firmware behind it.
//!
//! The firmware model runs on its own schedule, as real firmware does: it
//! never sees a register access, only the register file, which it inspects
//! and updates each time the driver opens the window (before the driver's
//! accesses), i.e. once per poll step. A rung RESET_TRIGGER with a request
//! pending is taken (RESET_REQUEST cleared, a reset begins); while a reset
//! runs, FW_STATUS shows bad reads, then the reset in progress, then done,
//! as [`FwScript`] says. After surprise removal every register reads all
//! ones and writes are lost, as on a PCI function that is gone.

use crate::{
    arch::ArchInfo,
    io::DeviceIo,
    regs::{MiscRam, FW_IO_BAD_READ, FW_STATUS, GONE, MISC_RAM_SIZE, RESET_REQUEST, RESET_TRIGGER},
    sparse::SparseMem,
};
use kernel::{
    io::{Io, IoSysMap, Region, SysMem},
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
    /// The look at FW_STATUS (1-based) that first shows the reset done; 0 = never.
    pub(crate) ready_on_poll: u32,
    /// Looks that see `0xdeadbeef` first (not counted as polls).
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

/// The firmware model's own state (the registers are in the register file).
struct FwState {
    script: FwScript,
    /// A reset is in progress.
    busy: bool,
    /// Looks at FW_STATUS since the reset began.
    polls: u32,
    /// Bad reads still to show.
    bad_left: u32,
    /// Resets the firmware has taken.
    resets: u32,
}

impl FwState {
    fn begin_reset(&mut self) {
        self.busy = true;
        self.polls = 0;
        self.bad_left = self.script.bad_reads;
        self.resets += 1;
    }

    /// One step of the firmware, between two looks of the driver at `regs`.
    fn step(&mut self, regs: MiscRam<'_>) {
        if regs.read(RESET_TRIGGER).ring() {
            let request = regs.read(RESET_REQUEST).kind().get();
            if self.script.takes_requests && request != 0 {
                regs.write_reg(RESET_TRIGGER::zeroed());
                regs.write_reg(RESET_REQUEST::zeroed());
                self.begin_reset();
                regs.write_reg(FW_STATUS::zeroed().with_reset_in_progress(true));
                return;
            }
        }
        if !self.busy {
            return;
        }
        let status = if self.bad_left > 0 {
            self.bad_left -= 1;
            FW_STATUS::from(FW_IO_BAD_READ)
        } else {
            self.polls += 1;
            self.busy = self.script.ready_on_poll == 0 || self.polls < self.script.ready_on_poll;
            FW_STATUS::zeroed().with_reset_in_progress(self.busy)
        };
        regs.write_reg(status);
    }
}

/// The MISC RAM register file, as 32-bit words.
type RegFile = [u32; MISC_RAM_SIZE / 4];

/// The MISC RAM and the firmware behind it, only ever reached together.
struct MiscRamModel {
    file: KBox<RegFile>,
    fw: FwState,
}

/// `file` as the kernel crate's system-memory I/O.
fn sys_mem(file: &mut RegFile) -> MiscRam<'_> {
    let ptr =
        Region::<MISC_RAM_SIZE>::ptr_from_raw_parts_mut(file.as_mut_ptr().cast(), MISC_RAM_SIZE);
    // SAFETY: `file` is `MISC_RAM_SIZE` bytes of kernel memory, 4-byte aligned
    // (a `u32` array), borrowed exclusively for as long as the view lives.
    IoSysMap::Sys(unsafe { SysMem::new(ptr) })
}

/// The MISC RAM and BAR4 of one simulated device.
#[pin_data]
pub(crate) struct SimIo {
    #[pin]
    bar4: SparseMem,
    #[pin]
    misc: SpinLock<MiscRamModel>,
    present: Atomic<bool>,
}

impl SimIo {
    /// A simulated device of arch `info`, firmware ready, nothing resident.
    pub(crate) fn new(info: &'static ArchInfo) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            bar4 <- SparseMem::new(info.bar4_size),
            misc <- new_spinlock!(MiscRamModel {
                file: KBox::zeroed(GFP_KERNEL)?,
                fw: FwState {
                    script: FwScript::PROMPT,
                    busy: false,
                    polls: 0,
                    bad_left: 0,
                    resets: 0,
                },
            }),
            present: Atomic::new(true),
        })
    }

    /// Sets how the firmware answers the next resets.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn set_fw_script(&self, script: FwScript) {
        self.misc.lock().fw.script = script;
    }

    /// Starts a reset in the firmware model, as a taken mailbox request does.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn begin_reset(&self) {
        self.misc.lock().fw.begin_reset();
    }

    /// Resets the firmware has taken so far.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn resets_taken(&self) -> u32 {
        self.misc.lock().fw.resets
    }

    /// Simulates surprise removal: registers read all ones and bulk
    /// accesses fail with `ENODEV` from now on.
    pub(crate) fn unplug(&self) {
        self.present.store(false, Relaxed);
    }

    /// BAR4 pages materialized so far.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn bar4_resident_pages(&self) -> usize {
        self.bar4.resident_pages()
    }

    /// `ENODEV` once the device was unplugged.
    fn check_present(&self) -> Result {
        if self.present.load(Relaxed) {
            Ok(())
        } else {
            Err(ENODEV)
        }
    }
}

impl DeviceIo for SimIo {
    fn with_misc_ram(&self, f: &mut dyn FnMut(MiscRam<'_>)) -> Result {
        let mut guard = self.misc.lock();
        let MiscRamModel { file, fw } = &mut *guard;
        let regs = sys_mem(file);
        if self.present.load(Relaxed) {
            fw.step(regs);
        } else {
            for i in 0..MISC_RAM_SIZE / 4 {
                regs.write(i * 4, GONE);
            }
        }
        f(regs);
        Ok(())
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
        bounce: &mut [u8],
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
