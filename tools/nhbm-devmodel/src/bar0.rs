//! BAR0: the MISC RAM / FW-IO mailbox with the firmware's reset behaviour
//! (seed 001 §1; reference neuron_dhal_v2.c, neuron_reset.h), a plain
//! register file elsewhere, and the model's control port.
//!
//! Firmware: a write of 1 to RESET_TRIGGER takes a pending RESET_REQUEST
//! (clears it) and starts a reset; FW_STATUS shows bit 3 (reset in progress)
//! until the scripted delay has passed, or forever. Armed bad reads make
//! FW_STATUS answer 0xdeadbeef, as a device that stopped answering does.
//!
//! The control port (last page of BAR0, no register of the arch lives there)
//! lets a test in the guest script the firmware and look at HBM by device
//! address through the model's own remap. It is the model's test interface,
//! like QEMU's pci-testdev, not part of the device.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// BAR0 offset of the MISC RAM block (`MMAP_BAR0_APB_MISC_RAM_OFFSET`).
pub const MISC_RAM: u64 = 0x30fa_0000;
/// Firmware status; bit 3 set while a reset is in progress.
pub const FW_STATUS: u64 = MISC_RAM + 0x808;
/// Reset request: the reset type, cleared when the firmware takes it.
pub const RESET_REQUEST: u64 = MISC_RAM + 0x1ec;
/// NeuronCores to reset for a TPB reset.
pub const RESET_TPB_MAP: u64 = MISC_RAM + 0x1d8;
/// Doorbell that hands the request to the firmware.
pub const RESET_TRIGGER: u64 = MISC_RAM + 0x800;
/// `V2_FW_IO_REG_FW_STATUS_DEVICE_READY_MASK`: set while resetting.
pub const STATUS_RESET_IN_PROGRESS: u32 = 0x8;
/// What a read of a register answers when the firmware does not.
pub const BAD_READ: u32 = 0xdead_beef;

/// Base of the control port (the last 4 KiB of a 1 GiB BAR0).
pub const CTRL: u64 = 0x3fff_f000;
/// Reads [`CTRL_MAGIC_VALUE`].
pub const CTRL_MAGIC: u64 = CTRL;
/// "NHDM".
pub const CTRL_MAGIC_VALUE: u32 = 0x4e48_444d;
/// Milliseconds a reset takes from the trigger; [`NEVER`] = never completes.
pub const CTRL_RESET_DELAY_MS: u64 = CTRL + 0x04;
/// FW_STATUS reads still to answer 0xdeadbeef; [`NEVER`] = all of them.
pub const CTRL_BAD_READS: u64 = CTRL + 0x08;
/// 1 = the firmware takes mailbox requests (default), 0 = it ignores them.
pub const CTRL_TAKES_REQUESTS: u64 = CTRL + 0x0c;
/// Resets taken since the model started (read-only).
pub const CTRL_RESETS_TAKEN: u64 = CTRL + 0x10;
/// FW_STATUS reads since the last reset was taken (read-only).
pub const CTRL_STATUS_READS: u64 = CTRL + 0x14;
/// 1 while a reset is in progress, by the model's clock (read-only).
pub const CTRL_RESETTING: u64 = CTRL + 0x18;
/// Low half of the device-physical HBM address [`CTRL_HBM_DATA`] accesses.
pub const CTRL_HBM_PA_LO: u64 = CTRL + 0x20;
/// High half of that address.
pub const CTRL_HBM_PA_HI: u64 = CTRL + 0x24;
/// The 32-bit word of HBM at that device address (through the model's remap);
/// reads 0xffffffff outside every stack.
pub const CTRL_HBM_DATA: u64 = CTRL + 0x28;
/// "Never" / "forever" for the delay and bad-read counts.
pub const NEVER: u32 = u32::MAX;

/// What HBM access the control port needs from the device.
pub trait Hbm {
    /// Reads the word at device-physical `pa`; `None` outside every stack.
    fn read_pa(&self, pa: u64) -> Option<u32>;
    /// Writes the word at device-physical `pa`; false outside every stack.
    fn write_pa(&self, pa: u64, value: u32) -> bool;
}

/// The firmware's reset state.
#[derive(Debug)]
pub struct Firmware {
    /// Time a reset takes; `None` = never completes.
    pub delay: Option<Duration>,
    /// FW_STATUS reads still to answer [`BAD_READ`]; `None` = forever.
    pub bad_reads: Option<u32>,
    /// Whether mailbox requests are taken.
    pub takes_requests: bool,
    request: u32,
    tpb_map: u32,
    started: Option<Instant>,
    resets: u32,
    status_reads: u32,
}

impl Firmware {
    /// A firmware whose resets take `delay` (`None`: never complete).
    pub fn new(delay: Option<Duration>) -> Self {
        Firmware {
            delay,
            bad_reads: Some(0),
            takes_requests: true,
            request: 0,
            tpb_map: 0,
            started: None,
            resets: 0,
            status_reads: 0,
        }
    }

    /// Whether a reset is in progress at `now` (ends it once its time is up).
    pub fn resetting(&mut self, now: Instant) -> bool {
        let Some(t0) = self.started else {
            return false;
        };
        match self.delay {
            Some(d) if now.duration_since(t0) >= d => {
                self.started = None;
                false
            }
            _ => true,
        }
    }

    fn status(&mut self, now: Instant) -> u32 {
        self.status_reads = self.status_reads.saturating_add(1);
        match &mut self.bad_reads {
            None => return BAD_READ,
            Some(n) if *n > 0 => {
                *n -= 1;
                return BAD_READ;
            }
            Some(_) => {}
        }
        if self.resetting(now) {
            STATUS_RESET_IN_PROGRESS
        } else {
            0
        }
    }

    fn trigger(&mut self, now: Instant) {
        if !self.takes_requests || self.request == 0 {
            return;
        }
        self.request = 0;
        self.started = Some(now);
        self.resets += 1;
        self.status_reads = 0;
    }
}

fn count(v: u32) -> Option<u32> {
    (v != NEVER).then_some(v)
}

fn count_raw(v: Option<u32>) -> u32 {
    v.unwrap_or(NEVER)
}

/// BAR0 of one function.
pub struct Bar0 {
    size: u64,
    /// The firmware.
    pub fw: Firmware,
    regs: HashMap<u64, u32>,
    hbm_pa: u64,
}

impl Bar0 {
    /// A BAR0 of `size` bytes with firmware `fw`.
    pub fn new(size: u64, fw: Firmware) -> Self {
        Bar0 {
            size,
            fw,
            regs: HashMap::new(),
            hbm_pa: 0,
        }
    }

    fn check(&self, off: u64) -> Option<()> {
        (off % 4 == 0 && off.checked_add(4)? <= self.size).then_some(())
    }

    /// Reads the register at `off` (32-bit, aligned; anything else reads as ones).
    pub fn read32(&mut self, off: u64, now: Instant, hbm: &dyn Hbm) -> u32 {
        if self.check(off).is_none() {
            return u32::MAX;
        }
        match off {
            FW_STATUS => self.fw.status(now),
            RESET_REQUEST => self.fw.request,
            RESET_TPB_MAP => self.fw.tpb_map,
            CTRL_MAGIC => CTRL_MAGIC_VALUE,
            CTRL_RESET_DELAY_MS => self
                .fw
                .delay
                .map_or(NEVER, |d| u32::try_from(d.as_millis()).unwrap_or(NEVER - 1)),
            CTRL_BAD_READS => count_raw(self.fw.bad_reads),
            CTRL_TAKES_REQUESTS => u32::from(self.fw.takes_requests),
            CTRL_RESETS_TAKEN => self.fw.resets,
            CTRL_STATUS_READS => self.fw.status_reads,
            CTRL_RESETTING => u32::from(self.fw.resetting(now)),
            CTRL_HBM_PA_LO => self.hbm_pa as u32,
            CTRL_HBM_PA_HI => (self.hbm_pa >> 32) as u32,
            CTRL_HBM_DATA => hbm.read_pa(self.hbm_pa).unwrap_or(u32::MAX),
            _ => self.regs.get(&off).copied().unwrap_or(0),
        }
    }

    /// Writes the register at `off` (32-bit, aligned; anything else is dropped).
    pub fn write32(&mut self, off: u64, value: u32, now: Instant, hbm: &dyn Hbm) {
        if self.check(off).is_none() {
            return;
        }
        match off {
            FW_STATUS | CTRL_MAGIC | CTRL_RESETS_TAKEN | CTRL_STATUS_READS | CTRL_RESETTING => {}
            RESET_REQUEST => self.fw.request = value,
            RESET_TPB_MAP => self.fw.tpb_map = value,
            RESET_TRIGGER => {
                if value == 1 {
                    self.fw.trigger(now);
                }
            }
            CTRL_RESET_DELAY_MS => {
                self.fw.delay = count(value).map(|ms| Duration::from_millis(ms.into()))
            }
            CTRL_BAD_READS => self.fw.bad_reads = count(value),
            CTRL_TAKES_REQUESTS => self.fw.takes_requests = value != 0,
            CTRL_HBM_PA_LO => self.hbm_pa = (self.hbm_pa & !0xffff_ffff) | u64::from(value),
            CTRL_HBM_PA_HI => self.hbm_pa = (self.hbm_pa & 0xffff_ffff) | u64::from(value) << 32,
            CTRL_HBM_DATA => {
                hbm.write_pa(self.hbm_pa, value);
            }
            _ => {
                self.regs.insert(off, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// HBM as a map from device address to word, stacks at 0 and 64 GiB.
    #[derive(Default)]
    struct MapHbm(RefCell<HashMap<u64, u32>>);

    impl Hbm for MapHbm {
        fn read_pa(&self, pa: u64) -> Option<u32> {
            crate::arch::V2.bar4_offset(pa, 4)?;
            Some(self.0.borrow().get(&pa).copied().unwrap_or(0))
        }
        fn write_pa(&self, pa: u64, value: u32) -> bool {
            crate::arch::V2.bar4_offset(pa, 4).is_some() && {
                self.0.borrow_mut().insert(pa, value);
                true
            }
        }
    }

    struct Rig {
        bar: Bar0,
        hbm: MapHbm,
        t0: Instant,
    }

    impl Rig {
        fn new(delay_ms: Option<u64>) -> Self {
            Rig {
                bar: Bar0::new(1 << 30, Firmware::new(delay_ms.map(Duration::from_millis))),
                hbm: MapHbm::default(),
                t0: Instant::now(),
            }
        }
        fn at(&self, ms: u64) -> Instant {
            self.t0 + Duration::from_millis(ms)
        }
        fn read(&mut self, off: u64, ms: u64) -> u32 {
            let now = self.at(ms);
            self.bar.read32(off, now, &self.hbm)
        }
        fn write(&mut self, off: u64, v: u32, ms: u64) {
            let now = self.at(ms);
            self.bar.write32(off, v, now, &self.hbm)
        }
        /// Requests a device reset through the mailbox at `ms`.
        fn reset(&mut self, ms: u64) {
            self.write(RESET_REQUEST, 1, ms);
            self.write(RESET_TRIGGER, 1, ms);
        }
    }

    #[test]
    fn offsets_follow_misc_ram() {
        assert_eq!(FW_STATUS, 0x30fa_0808);
        assert_eq!(RESET_REQUEST, 0x30fa_01ec);
        assert_eq!(RESET_TPB_MAP, 0x30fa_01d8);
        assert_eq!(RESET_TRIGGER, 0x30fa_0800);
    }

    #[test]
    fn reset_completes_after_its_delay() {
        let mut r = Rig::new(Some(250));
        assert_eq!(r.read(FW_STATUS, 0), 0, "idle firmware is ready");
        r.reset(0);
        assert_eq!(r.read(RESET_REQUEST, 0), 0, "request taken");
        assert_eq!(r.read(FW_STATUS, 0), STATUS_RESET_IN_PROGRESS);
        assert_eq!(r.read(FW_STATUS, 249), STATUS_RESET_IN_PROGRESS);
        assert_eq!(r.read(CTRL_RESETTING, 249), 1);
        assert_eq!(r.read(FW_STATUS, 250), 0);
        assert_eq!(r.read(CTRL_RESETTING, 251), 0);
        assert_eq!(r.read(CTRL_RESETS_TAKEN, 251), 1);
        assert_eq!(r.read(CTRL_STATUS_READS, 251), 3);
    }

    #[test]
    fn reset_that_never_completes() {
        let mut r = Rig::new(Some(0));
        r.write(CTRL_RESET_DELAY_MS, NEVER, 0);
        assert_eq!(r.read(CTRL_RESET_DELAY_MS, 0), NEVER);
        r.reset(0);
        assert_eq!(r.read(FW_STATUS, 3_600_000), STATUS_RESET_IN_PROGRESS);
    }

    #[test]
    fn untaken_request_stays_pending() {
        let mut r = Rig::new(Some(0));
        r.write(CTRL_TAKES_REQUESTS, 0, 0);
        r.reset(0);
        assert_eq!(r.read(RESET_REQUEST, 5), 1);
        assert_eq!(r.read(CTRL_RESETS_TAKEN, 5), 0);
        // A trigger without a request does nothing either.
        let mut r = Rig::new(Some(0));
        r.write(RESET_TRIGGER, 1, 0);
        assert_eq!(r.read(CTRL_RESETS_TAKEN, 0), 0);
    }

    #[test]
    fn bad_reads_answer_deadbeef_then_the_status() {
        let mut r = Rig::new(Some(1000));
        r.write(CTRL_BAD_READS, 2, 0);
        r.reset(0);
        assert_eq!(r.read(FW_STATUS, 1), BAD_READ);
        assert_eq!(r.read(FW_STATUS, 2), BAD_READ);
        assert_eq!(r.read(FW_STATUS, 3), STATUS_RESET_IN_PROGRESS);
        r.write(CTRL_BAD_READS, NEVER, 0);
        assert_eq!(r.read(FW_STATUS, 5000), BAD_READ, "even once ready");
        assert_eq!(r.read(CTRL_BAD_READS, 5000), NEVER);
    }

    #[test]
    fn tpb_map_and_plain_registers_hold_values() {
        let mut r = Rig::new(Some(0));
        r.write(RESET_TPB_MAP, 0b11, 0);
        assert_eq!(r.read(RESET_TPB_MAP, 0), 0b11);
        r.write(0x1000, 0x1234_5678, 0);
        assert_eq!(r.read(0x1000, 0), 0x1234_5678);
        assert_eq!(r.read(0x1004, 0), 0);
        r.write(FW_STATUS, STATUS_RESET_IN_PROGRESS, 0);
        assert_eq!(r.read(FW_STATUS, 0), 0, "status is read-only");
    }

    #[test]
    fn unaligned_or_outside_accesses_read_ones() {
        let mut r = Rig::new(Some(0));
        assert_eq!(r.read(0x1002, 0), u32::MAX);
        assert_eq!(r.read(1 << 30, 0), u32::MAX);
        assert_eq!(r.read(u64::MAX - 3, 0), u32::MAX);
    }

    #[test]
    fn control_port_reaches_hbm_by_device_address() {
        let mut r = Rig::new(Some(0));
        assert_eq!(r.read(CTRL_MAGIC, 0), CTRL_MAGIC_VALUE);
        r.write(CTRL_HBM_PA_HI, 0x10, 0);
        r.write(CTRL_HBM_PA_LO, 0x40, 0);
        r.write(CTRL_HBM_DATA, 0xabcd, 0);
        assert_eq!(r.hbm.0.borrow().get(&0x10_0000_0040), Some(&0xabcd));
        assert_eq!(r.read(CTRL_HBM_DATA, 0), 0xabcd);
        r.write(CTRL_HBM_PA_HI, 0x8, 0);
        assert_eq!(r.read(CTRL_HBM_DATA, 0), u32::MAX, "between the stacks");
    }
}
