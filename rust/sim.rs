// SPDX-License-Identifier: GPL-2.0-only

//! The simulated device: a [`DeviceIo`] backend with the real arch's BAR4
//! size in sparse kernel memory, and BAR0's MISC RAM as a register file in
//! kernel memory that the kernel crate's [`Io`] reads and writes as
//! [`SysMem`](kernel::io::SysMem), beside a scriptable model of the firmware behind it.
//!
//! The firmware model runs on its own schedule, as real firmware does: it
//! never sees a register access, only the register file, which it inspects
//! and updates each time the driver opens the window (before the driver's
//! accesses), i.e. once per register read of the driver. A rung
//! RESET_TRIGGER with a request pending is heeded or missed; a heeded one is
//! taken (RESET_REQUEST cleared, a reset begins) some steps later; while a
//! reset runs, FW_STATUS shows bad reads, then the reset in progress, then
//! done, as [`FwScript`] says; it may also read all ones for a while after
//! the take while the function stays present (a link retraining), and it
//! keeps the TPB map of the last TPB reset it took. After surprise removal
//! every register reads all ones and writes are lost, and the function's
//! configuration space is gone too, as on a PCI function that is gone.

pub(crate) mod sparse;

use crate::{
    abstractions::io_view::sys_mem_words,
    abstractions::user_source::UserSource,
    abstractions::vma::Backing,
    arch::ArchInfo,
    hw::io::{Bounce, DeviceIo, Gate},
    hw::regs::{
        MiscRam, DEVICE_ID, FW_IO_BAD_READ, FW_STATUS, GONE, MISC_RAM_SIZE, RESET_REQUEST,
        RESET_TPB_MAP, RESET_TRIGGER, RESET_TYPE_TPB,
    },
    sim::sparse::SparseMem,
};
use kernel::{
    io::{Io, IoSysMap},
    new_spinlock,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        SpinLock,
    },
};

/// How the simulated firmware behaves. Its clock is the driver's looks: one
/// step each time the driver opens the MISC RAM window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FwScript {
    /// Doorbells with a request pending that the firmware misses before it
    /// heeds one (the request stays pending; only a re-send gets through);
    /// `u32::MAX` = it never does.
    pub(crate) ignore_requests: u32,
    /// Steps from a heeded doorbell until the request is taken.
    pub(crate) take_after: u32,
    /// Steps after the take during which FW_STATUS reads `0xdeadbeef`.
    pub(crate) bad_reads: u32,
    /// The look at FW_STATUS (1-based, after the bad reads) that first shows
    /// the reset done; 0 = never.
    pub(crate) ready_on_poll: u32,
    /// Steps from now during which DEVICE_ID reads `0xdeadbeef` (a firmware
    /// still booting).
    pub(crate) booting: u32,
    /// Steps after the take during which every register reads all ones
    /// while the function stays present (a link retraining during reset).
    pub(crate) all_ones: u32,
}

impl FwScript {
    /// A firmware that takes every request at once and is ready at the
    /// first look.
    pub(crate) const PROMPT: Self = Self {
        ignore_requests: 0,
        take_after: 0,
        bad_reads: 0,
        ready_on_poll: 1,
        booting: 0,
        all_ones: 0,
    };
}

/// The firmware model's own state (the registers are in the register file).
struct FwState {
    script: FwScript,
    /// Doorbells still to miss.
    ignore_left: u32,
    /// Steps until a heeded request is taken.
    taking: Option<u32>,
    /// A reset is in progress.
    busy: bool,
    /// Looks at FW_STATUS since the reset began.
    polls: u32,
    /// Bad reads still to show.
    bad_left: u32,
    /// Steps DEVICE_ID still reads bad.
    booting_left: u32,
    /// Steps every register still reads all ones.
    ones_left: u32,
    /// Resets the firmware has taken.
    resets: u32,
    /// RESET_TPB_MAP as the last TPB reset taken found it.
    tpb_map_taken: u32,
}

impl FwState {
    fn new(script: FwScript) -> Self {
        Self {
            script,
            ignore_left: script.ignore_requests,
            taking: None,
            busy: false,
            polls: 0,
            bad_left: 0,
            booting_left: script.booting,
            ones_left: 0,
            resets: 0,
            tpb_map_taken: 0,
        }
    }

    fn begin_reset(&mut self, regs: &MiscRam<'_>) {
        self.busy = true;
        self.polls = 0;
        self.bad_left = self.script.bad_reads;
        self.ones_left = self.script.all_ones;
        self.resets += 1;
        if regs.read(RESET_REQUEST).kind().get() == RESET_TYPE_TPB {
            self.tpb_map_taken = regs.read(RESET_TPB_MAP).map().get();
        }
    }

    /// Whether this step's reads all answer all ones.
    fn reads_all_ones(&mut self) -> bool {
        let ones = self.ones_left > 0;
        self.ones_left = self.ones_left.saturating_sub(1);
        ones
    }

    /// The doorbell: heeded (the take starts counting down) or missed.
    fn doorbell(&mut self, regs: &MiscRam<'_>) {
        regs.write_reg(RESET_TRIGGER::zeroed());
        if regs.read(RESET_REQUEST).kind().get() == 0 || self.taking.is_some() {
            return;
        }
        if self.ignore_left == u32::MAX {
            // Never heeded.
        } else if self.ignore_left > 0 {
            self.ignore_left -= 1;
        } else {
            self.taking = Some(self.script.take_after);
        }
    }

    /// One step of the firmware, before the driver's look at `regs`.
    fn step(&mut self, regs: MiscRam<'_>) {
        let booting = self.booting_left > 0;
        self.booting_left = self.booting_left.saturating_sub(1);
        let id = if booting { FW_IO_BAD_READ } else { 0 };
        regs.write_reg(DEVICE_ID::zeroed().with_id(id));
        if regs.read(RESET_TRIGGER).ring() {
            self.doorbell(&regs);
        }
        match self.taking {
            Some(0) => {
                self.taking = None;
                self.begin_reset(&regs);
                regs.write_reg(RESET_REQUEST::zeroed());
                regs.write_reg(FW_STATUS::zeroed().with_reset_in_progress(true));
                return;
            }
            Some(n) => self.taking = Some(n - 1),
            None => {}
        }
        if !self.busy || self.ones_left > 0 {
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
    /// What the driver reads of a function that answers all ones.
    ones: KBox<RegFile>,
    fw: FwState,
}

/// `file` as the kernel crate's system-memory I/O (it is exactly
/// `MISC_RAM_SIZE` bytes, so this does not fail).
fn sys_mem(file: &mut RegFile) -> Result<MiscRam<'_>> {
    Ok(IoSysMap::Sys(sys_mem_words::<MISC_RAM_SIZE>(file)?))
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
                ones: KBox::zeroed(GFP_KERNEL)?,
                fw: FwState::new(FwScript::PROMPT),
            }),
            present: Atomic::new(true),
        })
    }

    /// Sets how the firmware answers the next resets.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn set_fw_script(&self, script: FwScript) {
        let fw = &mut self.misc.lock().fw;
        let resets = fw.resets;
        *fw = FwState::new(script);
        fw.resets = resets;
    }

    /// Resets the firmware has taken so far.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn resets_taken(&self) -> u32 {
        self.misc.lock().fw.resets
    }

    /// RESET_TPB_MAP as the last TPB reset the firmware took found it.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn tpb_map_taken(&self) -> u32 {
        self.misc.lock().fw.tpb_map_taken
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
        let MiscRamModel { file, ones, fw } = &mut *guard;
        let present = self.present.load(Relaxed);
        // Counted before the step: the read that sees a take sees it.
        let all_ones = !present || fw.reads_all_ones();
        if present {
            fw.step(sys_mem(file)?);
        }
        if all_ones {
            // What the driver sees: all ones, its writes lost; the
            // firmware's own registers stay as they are.
            ones.fill(GONE);
            f(sys_mem(ones)?);
        } else {
            f(sys_mem(file)?);
        }
        Ok(())
    }

    fn bar4_write(&self, off: u64, src: &[u8]) -> Result {
        self.check_present()?;
        self.bar4.write(off, src)
    }

    fn bar4_write_from_user(
        &self,
        off: u64,
        src: &mut UserSource,
        len: usize,
        _bounce: &mut Bounce,
        gate: Gate<'_>,
    ) -> Result {
        self.check_present()?;
        self.bar4.write_from_user(off, src, len, gate)
    }

    fn bar4_read(&self, off: u64, dst: &mut [u8]) -> Result {
        self.check_present()?;
        self.bar4.read(off, dst)
    }

    fn bar4_zero(&self, off: u64, len: u64) -> Result {
        self.check_present()?;
        self.bar4.zero(off, len)
    }

    fn bar4_backing(&self) -> Backing {
        Backing::Pages
    }

    fn bar4_map_page(&self, off: u64, insert: &mut dyn FnMut(usize) -> Result) -> Result {
        self.check_present()?;
        self.bar4.map_page(off, insert)
    }

    fn bar4_untouched(&self, off: u64, len: u64) -> u64 {
        self.bar4.untouched(off, len)
    }

    fn bar4_release(&self, off: u64, len: u64) {
        // Present or not: the pages are the store's own, and they go.
        let _ = self.bar4.zero(off, len);
    }

    fn is_present(&self) -> bool {
        self.present.load(Relaxed)
    }

    fn config_present(&self) -> bool {
        self.present.load(Relaxed)
    }
}
