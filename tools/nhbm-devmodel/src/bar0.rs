//! BAR0: the MISC RAM / FW-IO mailbox with the firmware's behaviour as the
//! reference driver expects it (aws-neuron-driver neuron_reset.c,
//! neuron_fw_io.c, neuron_dhal_v2.c), a plain register file elsewhere, and
//! the model's control port.
//!
//! Firmware, by the wall clock, each behaviour one the reference driver
//! expects and copes with:
//! - it boots for `boot` after the first BAR0 access: every MISC RAM read
//!   answers `0xdeadbeef` meanwhile (the reference's probe re-reads the
//!   device-id register until it does not, v2/neuron_dhal_v2.c:1076-1088);
//! - a doorbell (RESET_TRIGGER = 1, neuron_fw_io.c:166-169) with a request
//!   pending is missed while misses are left (the request stays; only a
//!   re-send gets through: the reference writes it again "because the
//!   initial/previous reset was missed", neuron_reset.c:426-435), else
//!   heeded: the request is taken `take_delay` later (RESET_REQUEST cleared,
//!   which is how the reference sees it taken, neuron_fw_io.c:433-444; it
//!   allows up to 120 s / 480 s for it) and a reset begins;
//! - from the take, FW_STATUS answers `0xdeadbeef` for `bad_window` (the
//!   reference re-reads such a value for up to 15 s, neuron_fw_io.c:375-383),
//!   then shows bit 3 (reset in progress, v2/neuron_dhal_v2.c:202) until
//!   `delay` after the take, or forever;
//! - a TPB reset is taken with the RESET_TPB_MAP it finds; the firmware
//!   counts a map that is not the reference's for the cores it names (each
//!   core's bit with the bits of the engines it owns, `nr_get_tpb_reset_map`
//!   in v2/neuron_dhal_v2.c and v3/neuron_dhal_v3.c) and shows the last map
//!   taken, i.e. which engines it reset;
//! - from a take on, MISC RAM may read all ones for a window while the
//!   function stays present (configuration space answers), as during a
//!   link retrain; the reference polls such a value like any other;
//! - once removed by surprise, every BAR0 read outside the control port
//!   answers all ones and every write is lost, and configuration space
//!   reads all ones too (vendor id 0xffff): what PCIe does for a function
//!   that is gone (a read nobody completes returns all ones).
//!
//! The control port (last page of BAR0, no register of the arch lives there)
//! lets a test in the guest script the firmware and look at HBM by device
//! address through the model's own remap. It is the model's test interface,
//! like QEMU's pci-testdev, not part of the device.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Firmware status, in MISC RAM (`V2_FW_IO_REG_FW_STATUS_OFFSET`,
/// neuron_reset.h:24); bit 3 set while a reset is in progress.
pub const FW_STATUS: u64 = 0x808;
/// Reset request: the reset type, cleared when the firmware takes it
/// (`FW_IO_REG_RESET_OFFSET`, neuron_fw_io.h:91).
pub const RESET_REQUEST: u64 = 0x1ec;
/// NeuronCores to reset for a TPB reset (`FW_IO_REG_RESET_TPB_MAP_OFFSET`,
/// neuron_fw_io.h:90).
pub const RESET_TPB_MAP: u64 = 0x1d8;
/// Doorbell that hands the request to the firmware
/// (`FW_IO_REG_TRIGGER_INT_NOSEC_OFFSET`, neuron_fw_io.h:96).
pub const RESET_TRIGGER: u64 = 0x800;
/// The device index (`FW_IO_REG_DEVICE_ID_OFFSET`, neuron_fw_io.h:44).
pub const DEVICE_ID: u64 = 0x24;
/// Bytes of the MISC RAM window.
pub const MISC_RAM_SIZE: u64 = 0x1000;
/// `V2_FW_IO_REG_FW_STATUS_DEVICE_READY_MASK` (neuron_reset.h:25): set while resetting.
pub const STATUS_RESET_IN_PROGRESS: u32 = 0x8;
/// What a read of a register answers when the firmware does not.
pub const BAD_READ: u32 = 0xdead_beef;

/// Control-port registers, as offsets in its page (the last 4 KiB of BAR0).
pub mod ctrl {
    /// Reads [`MAGIC_VALUE`].
    pub const MAGIC: u64 = 0x00;
    /// "NHDM".
    pub const MAGIC_VALUE: u32 = 0x4e48_444d;
    /// Milliseconds a reset takes from its take; [`super::NEVER`] = never completes.
    pub const RESET_DELAY_MS: u64 = 0x04;
    /// Milliseconds from a take during which FW_STATUS answers 0xdeadbeef;
    /// [`super::NEVER`] = forever.
    pub const BAD_MS: u64 = 0x08;
    /// Doorbells with a request pending still to miss; [`super::NEVER`] = all.
    pub const IGNORE_REQUESTS: u64 = 0x0c;
    /// Resets taken since the model started (read-only).
    pub const RESETS_TAKEN: u64 = 0x10;
    /// FW_STATUS reads since the last take (read-only).
    pub const STATUS_READS: u64 = 0x14;
    /// 1 while a reset is in progress, by the model's clock (read-only).
    pub const RESETTING: u64 = 0x18;
    /// Milliseconds from a heeded doorbell to the take.
    pub const TAKE_DELAY_MS: u64 = 0x1c;
    /// Low half of the device-physical HBM address [`HBM_DATA`] accesses.
    pub const HBM_PA_LO: u64 = 0x20;
    /// High half of that address.
    pub const HBM_PA_HI: u64 = 0x24;
    /// The 32-bit word of HBM at that device address (through the model's
    /// remap); reads 0xffffffff outside every stack.
    pub const HBM_DATA: u64 = 0x28;
    /// Doorbells rung with a request pending, missed or heeded (read-only).
    pub const DOORBELLS: u64 = 0x2c;
    /// 1 = removed by surprise.
    pub const REMOVED: u64 = 0x30;
    /// Milliseconds the firmware boots after the first BAR0 access (read-only).
    pub const BOOT_MS: u64 = 0x34;
    /// MISC RAM reads answered 0xdeadbeef while booting (read-only).
    pub const BOOT_READS: u64 = 0x38;
    /// FW_STATUS reads answered 0xdeadbeef since the last take (read-only).
    pub const BAD_READS_SEEN: u64 = 0x3c;
    /// RESET_REQUEST reads since the last heeded doorbell: the driver's
    /// looks at the mailbox while it waits for the take (read-only).
    pub const REQUEST_READS: u64 = 0x40;
    /// Milliseconds from each take during which every MISC RAM read
    /// answers all ones while the function stays present.
    pub const ALL_ONES_MS: u64 = 0x44;
    /// RESET_TPB_MAP as the last TPB reset taken found it: the core and
    /// engine bits the firmware reset (read-only).
    pub const TPB_MAP_TAKEN: u64 = 0x48;
    /// TPB resets taken whose map was not the reference's for the cores it
    /// names (read-only).
    pub const TPB_MAP_ERRORS: u64 = 0x4c;
    /// MISC RAM reads answered all ones by the window since the last take
    /// (read-only).
    pub const ONES_READS: u64 = 0x50;
    /// 1 = every DMA engine stalls: doorbells are taken, nothing moves.
    pub const DMA_STALL: u64 = 0x54;
    /// Descriptor pairs the engines completed (read-only).
    pub const DMA_PAIRS: u64 = 0x58;
    /// Queues stopped on a fault (read-only).
    pub const DMA_FAULTS: u64 = 0x5c;
    /// Pairs in flight that a reset dropped (read-only).
    pub const DMA_DROPPED: u64 = 0x60;
    /// Writing `n` makes the pair after the next `n` fault as a bad
    /// address does.
    pub const DMA_FAIL_AFTER: u64 = 0x64;
    /// MiB of guest memory the client shared for DMA (read-only).
    pub const DMA_MAPPED_MIB: u64 = 0x68;
    /// The most descriptors one queue held posted and not done, at a
    /// doorbell; writing clears it.
    pub const DMA_MOST_PENDING: u64 = 0x6c;
    /// Doorbells the engines took (read-only).
    pub const DMA_DOORBELLS: u64 = 0x70;
}

/// "Never" / "forever" for the delays and counts of the control port.
pub const NEVER: u32 = u32::MAX;

/// What HBM access the control port needs from the device.
pub trait Hbm {
    /// Reads the word at device-physical `pa`; `None` outside every stack.
    fn read_pa(&self, pa: u64) -> Option<u32>;
    /// Writes the word at device-physical `pa`; false outside every stack.
    fn write_pa(&self, pa: u64, value: u32) -> bool;
}

fn millis(v: u32) -> Option<Duration> {
    (v != NEVER).then(|| Duration::from_millis(v.into()))
}

fn millis_raw(d: Option<Duration>) -> u32 {
    d.map_or(NEVER, |d| u32::try_from(d.as_millis()).unwrap_or(NEVER - 1))
}

/// How the firmware behaves, as the control port sets it.
#[derive(Clone, Copy, Debug)]
pub struct Behaviour {
    /// Time a reset takes from its take; `None` = never completes.
    pub delay: Option<Duration>,
    /// Time from a take during which FW_STATUS reads bad; `None` = forever.
    pub bad_window: Option<Duration>,
    /// Doorbells still to miss; `None` = every one.
    pub ignore: Option<u32>,
    /// Time from a heeded doorbell to the take.
    pub take_delay: Duration,
    /// Time the firmware boots after the first BAR0 access.
    pub boot: Duration,
    /// Time from a take during which MISC RAM reads all ones.
    pub all_ones: Duration,
}

impl Behaviour {
    /// Prompt firmware whose resets take `delay` and that boots for `boot`.
    pub fn new(delay: Option<Duration>, boot: Duration) -> Self {
        Behaviour {
            delay,
            bad_window: Some(Duration::ZERO),
            ignore: Some(0),
            take_delay: Duration::ZERO,
            boot,
            all_ones: Duration::ZERO,
        }
    }
}

/// The firmware's state.
#[derive(Debug)]
pub struct Firmware {
    /// How it behaves.
    pub how: Behaviour,
    /// RESET_TPB_MAP bits of each core and its engines.
    tpb_units: &'static [u32],
    request: u32,
    tpb_map: u32,
    first_access: Option<Instant>,
    take_at: Option<Instant>,
    taken_at: Option<Instant>,
    resets: u32,
    status_reads: u32,
    doorbells: u32,
    boot_reads: u32,
    bad_seen: u32,
    request_reads: u32,
    tpb_map_taken: u32,
    tpb_map_errors: u32,
    ones_reads: u32,
    device_resets: u32,
}

/// RESET_REQUEST of a TPB reset (`FW_IO_RESET_TYPE_TPB`, neuron_fw_io.h).
const REQUEST_TPB: u32 = 2;

impl Firmware {
    /// A firmware that behaves as `how` says, of a device whose cores own
    /// the engines `tpb_units` gives (see [`crate::arch::Arch::tpb_units`]).
    pub fn new(how: Behaviour, tpb_units: &'static [u32]) -> Self {
        Firmware {
            how,
            tpb_units,
            request: 0,
            tpb_map: 0,
            first_access: None,
            take_at: None,
            taken_at: None,
            resets: 0,
            status_reads: 0,
            doorbells: 0,
            boot_reads: 0,
            bad_seen: 0,
            request_reads: 0,
            tpb_map_taken: 0,
            tpb_map_errors: 0,
            ones_reads: 0,
            device_resets: 0,
        }
    }

    /// Whether `map` is what the reference hands the firmware for the
    /// cores it names.
    fn map_is_the_references(&self, map: u32) -> bool {
        let cores = map & ((1 << self.tpb_units.len()) - 1);
        let want = self
            .tpb_units
            .iter()
            .enumerate()
            .filter(|(i, _)| cores >> i & 1 == 1)
            .fold(0, |m, (_, u)| m | u);
        cores != 0 && map == want
    }

    /// Takes a heeded request whose time has come.
    fn advance(&mut self, now: Instant) {
        self.first_access.get_or_insert(now);
        if let Some(t) = self.take_at.filter(|&t| now >= t) {
            self.take_at = None;
            if self.request == REQUEST_TPB {
                self.tpb_map_taken = self.tpb_map;
                if !self.map_is_the_references(self.tpb_map) {
                    self.tpb_map_errors = self.tpb_map_errors.saturating_add(1);
                }
            } else {
                self.device_resets = self.device_resets.wrapping_add(1);
            }
            self.ones_reads = 0;
            self.request = 0;
            self.taken_at = Some(t);
            self.resets += 1;
            self.status_reads = 0;
            self.bad_seen = 0;
        }
    }

    /// Device resets taken so far: each one resets the DMA engines.
    pub fn device_resets(&self) -> u32 {
        self.device_resets
    }

    fn booting(&self, now: Instant) -> bool {
        self.first_access
            .is_some_and(|t| now.duration_since(t) < self.how.boot)
    }

    /// Whether a reset is in progress at `now`.
    pub fn resetting(&self, now: Instant) -> bool {
        match (self.taken_at, self.how.delay) {
            (None, _) => false,
            (Some(t), Some(d)) => now.duration_since(t) < d,
            (Some(_), None) => true,
        }
    }

    /// Whether MISC RAM reads all ones at `now` (counted as one such read).
    fn reads_all_ones(&mut self, now: Instant) -> bool {
        self.advance(now);
        let ones = self
            .taken_at
            .is_some_and(|t| now.duration_since(t) < self.how.all_ones);
        if ones {
            self.ones_reads = self.ones_reads.saturating_add(1);
        }
        ones
    }

    fn in_bad_window(&self, now: Instant) -> bool {
        match (self.taken_at, self.how.bad_window) {
            (None, _) => false,
            (Some(t), Some(w)) => now.duration_since(t) < w,
            (Some(_), None) => true,
        }
    }

    fn status(&mut self, now: Instant) -> u32 {
        self.status_reads = self.status_reads.saturating_add(1);
        if self.in_bad_window(now) {
            self.bad_seen = self.bad_seen.saturating_add(1);
            BAD_READ
        } else if self.resetting(now) {
            STATUS_RESET_IN_PROGRESS
        } else {
            0
        }
    }

    fn doorbell(&mut self, now: Instant) {
        if self.request == 0 || self.take_at.is_some() {
            return;
        }
        self.doorbells = self.doorbells.saturating_add(1);
        match &mut self.how.ignore {
            None => {}
            Some(0) => {
                self.take_at = Some(now + self.how.take_delay);
                self.request_reads = 0;
            }
            Some(n) => *n -= 1,
        }
    }

    /// Reads MISC RAM register `reg`.
    fn read(&mut self, reg: u64, now: Instant, regs: &HashMap<u64, u32>) -> u32 {
        self.advance(now);
        if self.booting(now) {
            self.boot_reads = self.boot_reads.saturating_add(1);
            return BAD_READ;
        }
        match reg {
            FW_STATUS => self.status(now),
            RESET_REQUEST => {
                self.request_reads = self.request_reads.saturating_add(1);
                self.request
            }
            RESET_TPB_MAP => self.tpb_map,
            DEVICE_ID => 0,
            _ => regs.get(&reg).copied().unwrap_or(0),
        }
    }

    /// Writes MISC RAM register `reg`; `false` for a plain register.
    fn write(&mut self, reg: u64, value: u32, now: Instant) -> bool {
        self.advance(now);
        match reg {
            FW_STATUS | DEVICE_ID => {}
            RESET_REQUEST => self.request = value,
            RESET_TPB_MAP => self.tpb_map = value,
            RESET_TRIGGER if value == 1 => self.doorbell(now),
            RESET_TRIGGER => {}
            _ => return false,
        }
        true
    }
}

/// BAR0 of one function.
pub struct Bar0 {
    size: u64,
    misc_ram: u64,
    /// The firmware.
    pub fw: Firmware,
    regs: HashMap<u64, u32>,
    hbm_pa: u64,
    removed: bool,
}

impl Bar0 {
    /// A BAR0 of `size` bytes with the MISC RAM at `misc_ram` and firmware `fw`.
    pub fn new(size: u64, misc_ram: u64, fw: Firmware) -> Self {
        Bar0 {
            size,
            misc_ram,
            fw,
            regs: HashMap::new(),
            hbm_pa: 0,
            removed: false,
        }
    }

    /// Whether the function was removed by surprise.
    pub fn removed(&self) -> bool {
        self.removed
    }

    /// BAR0 offset of the control port.
    pub fn ctrl_base(&self) -> u64 {
        self.size - 0x1000
    }

    fn check(&self, off: u64) -> Option<()> {
        (off % 4 == 0 && off.checked_add(4)? <= self.size).then_some(())
    }

    /// The MISC RAM register at BAR0 offset `off`, if it is one.
    fn misc_reg(&self, off: u64) -> Option<u64> {
        off.checked_sub(self.misc_ram)
            .filter(|&r| r < MISC_RAM_SIZE)
    }

    /// Reads the register at `off` (32-bit, aligned; anything else reads as ones).
    pub fn read32(&mut self, off: u64, now: Instant, hbm: &dyn Hbm) -> u32 {
        if self.check(off).is_none() {
            return u32::MAX;
        }
        if off >= self.ctrl_base() {
            return self.ctrl_read(off - self.ctrl_base(), now, hbm);
        }
        if self.removed {
            return u32::MAX;
        }
        match self.misc_reg(off) {
            Some(_) if self.fw.reads_all_ones(now) => u32::MAX,
            Some(reg) => self.fw.read(reg, now, &self.regs),
            None => {
                self.fw.advance(now);
                self.regs.get(&off).copied().unwrap_or(0)
            }
        }
    }

    /// Writes the register at `off` (32-bit, aligned; anything else is dropped).
    pub fn write32(&mut self, off: u64, value: u32, now: Instant, hbm: &dyn Hbm) {
        if self.check(off).is_none() {
            return;
        }
        if off >= self.ctrl_base() {
            return self.ctrl_write(off - self.ctrl_base(), value, hbm);
        }
        if self.removed {
            return;
        }
        let handled = self
            .misc_reg(off)
            .is_some_and(|reg| self.fw.write(reg, value, now));
        if !handled {
            self.regs.insert(off, value);
        }
    }

    fn ctrl_read(&mut self, reg: u64, now: Instant, hbm: &dyn Hbm) -> u32 {
        use ctrl::*;
        self.fw.advance(now);
        let fw = &self.fw;
        match reg {
            MAGIC => MAGIC_VALUE,
            RESET_DELAY_MS => millis_raw(fw.how.delay),
            BAD_MS => millis_raw(fw.how.bad_window),
            IGNORE_REQUESTS => fw.how.ignore.unwrap_or(NEVER),
            RESETS_TAKEN => fw.resets,
            STATUS_READS => fw.status_reads,
            RESETTING => u32::from(fw.resetting(now)),
            TAKE_DELAY_MS => millis_raw(Some(fw.how.take_delay)),
            HBM_PA_LO => self.hbm_pa as u32,
            HBM_PA_HI => (self.hbm_pa >> 32) as u32,
            HBM_DATA => hbm.read_pa(self.hbm_pa).unwrap_or(u32::MAX),
            DOORBELLS => fw.doorbells,
            REMOVED => u32::from(self.removed),
            BOOT_MS => millis_raw(Some(fw.how.boot)),
            BOOT_READS => fw.boot_reads,
            BAD_READS_SEEN => fw.bad_seen,
            REQUEST_READS => fw.request_reads,
            ALL_ONES_MS => millis_raw(Some(fw.how.all_ones)),
            TPB_MAP_TAKEN => fw.tpb_map_taken,
            TPB_MAP_ERRORS => fw.tpb_map_errors,
            ONES_READS => fw.ones_reads,
            _ => 0,
        }
    }

    fn ctrl_write(&mut self, reg: u64, value: u32, hbm: &dyn Hbm) {
        use ctrl::*;
        let how = &mut self.fw.how;
        match reg {
            RESET_DELAY_MS => how.delay = millis(value),
            BAD_MS => how.bad_window = millis(value),
            IGNORE_REQUESTS => how.ignore = (value != NEVER).then_some(value),
            TAKE_DELAY_MS => how.take_delay = millis(value).unwrap_or(Duration::MAX / 2),
            ALL_ONES_MS => how.all_ones = millis(value).unwrap_or(Duration::MAX / 2),
            HBM_PA_LO => self.hbm_pa = (self.hbm_pa & !0xffff_ffff) | u64::from(value),
            HBM_PA_HI => self.hbm_pa = (self.hbm_pa & 0xffff_ffff) | u64::from(value) << 32,
            HBM_DATA => {
                hbm.write_pa(self.hbm_pa, value);
            }
            REMOVED => self.removed = value != 0,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    const MISC: u64 = 0x30fa_0000;
    const CTRL: u64 = (1 << 30) - 0x1000;

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
            Self::booting(delay_ms, 0)
        }
        fn booting(delay_ms: Option<u64>, boot_ms: u64) -> Self {
            let how = Behaviour::new(
                delay_ms.map(Duration::from_millis),
                Duration::from_millis(boot_ms),
            );
            Rig {
                bar: Bar0::new(1 << 30, MISC, Firmware::new(how, crate::arch::V2.tpb_units)),
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
        fn mb(&mut self, reg: u64, ms: u64) -> u32 {
            self.read(MISC + reg, ms)
        }
        fn ctrl(&mut self, reg: u64) -> u32 {
            self.read(CTRL + reg, 0)
        }
        /// Requests a device reset through the mailbox at `ms`.
        fn reset(&mut self, ms: u64) {
            self.write(MISC + RESET_REQUEST, 1, ms);
            self.write(MISC + RESET_TRIGGER, 1, ms);
        }
    }

    #[test]
    fn v2_registers_sit_in_its_misc_ram() {
        assert_eq!(MISC + FW_STATUS, 0x30fa_0808);
        assert_eq!(MISC + RESET_REQUEST, 0x30fa_01ec);
        assert_eq!(MISC + RESET_TPB_MAP, 0x30fa_01d8);
        assert_eq!(MISC + RESET_TRIGGER, 0x30fa_0800);
    }

    #[test]
    fn reset_completes_after_its_delay() {
        let mut r = Rig::new(Some(250));
        assert_eq!(r.mb(FW_STATUS, 0), 0, "idle firmware is ready");
        r.reset(0);
        assert_eq!(r.mb(RESET_REQUEST, 0), 0, "request taken");
        assert_eq!(r.mb(FW_STATUS, 0), STATUS_RESET_IN_PROGRESS);
        assert_eq!(r.mb(FW_STATUS, 249), STATUS_RESET_IN_PROGRESS);
        assert_eq!(r.mb(FW_STATUS, 250), 0);
        assert_eq!(r.ctrl(ctrl::RESETS_TAKEN), 1);
        assert_eq!(r.ctrl(ctrl::STATUS_READS), 3);
        assert_eq!(r.ctrl(ctrl::DOORBELLS), 1);
    }

    #[test]
    fn reset_that_never_completes() {
        let mut r = Rig::new(Some(0));
        r.write(CTRL + ctrl::RESET_DELAY_MS, NEVER, 0);
        assert_eq!(r.ctrl(ctrl::RESET_DELAY_MS), NEVER);
        r.reset(0);
        assert_eq!(r.mb(FW_STATUS, 3_600_000), STATUS_RESET_IN_PROGRESS);
    }

    #[test]
    fn slow_firmware_takes_the_request_later() {
        let mut r = Rig::new(Some(0));
        r.write(CTRL + ctrl::TAKE_DELAY_MS, 2000, 0);
        r.reset(0);
        assert_eq!(r.mb(RESET_REQUEST, 1999), 1);
        assert_eq!(r.mb(RESET_REQUEST, 2000), 0);
        assert_eq!(r.ctrl(ctrl::RESETS_TAKEN), 1);
        assert_eq!(r.ctrl(ctrl::REQUEST_READS), 2);
    }

    #[test]
    fn a_missed_request_needs_a_resend() {
        let mut r = Rig::new(Some(0));
        r.write(CTRL + ctrl::IGNORE_REQUESTS, 1, 0);
        r.reset(0);
        assert_eq!(r.mb(RESET_REQUEST, 5000), 1, "missed, still pending");
        // Ringing again without a new request is a re-send too.
        r.reset(30_000);
        assert_eq!(r.mb(RESET_REQUEST, 30_000), 0);
        assert_eq!(r.ctrl(ctrl::DOORBELLS), 2);
        assert_eq!(r.ctrl(ctrl::RESETS_TAKEN), 1);
        // A firmware that misses every request; a doorbell without a
        // request does nothing.
        let mut r = Rig::new(Some(0));
        r.write(CTRL + ctrl::IGNORE_REQUESTS, NEVER, 0);
        r.reset(0);
        r.reset(1);
        assert_eq!(r.mb(RESET_REQUEST, 5), 1);
        assert_eq!(r.ctrl(ctrl::RESETS_TAKEN), 0);
        let mut r = Rig::new(Some(0));
        r.write(MISC + RESET_TRIGGER, 1, 0);
        assert_eq!(r.ctrl(ctrl::DOORBELLS), 0);
    }

    #[test]
    fn status_reads_deadbeef_for_its_window() {
        let mut r = Rig::new(Some(1000));
        r.write(CTRL + ctrl::BAD_MS, 200, 0);
        r.reset(0);
        assert_eq!(r.mb(FW_STATUS, 0), BAD_READ);
        assert_eq!(r.mb(FW_STATUS, 199), BAD_READ);
        assert_eq!(r.mb(FW_STATUS, 200), STATUS_RESET_IN_PROGRESS);
        assert_eq!(r.ctrl(ctrl::BAD_READS_SEEN), 2);
        r.write(CTRL + ctrl::BAD_MS, NEVER, 0);
        assert_eq!(r.mb(FW_STATUS, 5000), BAD_READ, "even once ready");
    }

    #[test]
    fn booting_firmware_answers_deadbeef() {
        let mut r = Rig::booting(Some(0), 1500);
        assert_eq!(r.mb(DEVICE_ID, 0), BAD_READ);
        assert_eq!(r.mb(DEVICE_ID, 1499), BAD_READ);
        assert_eq!(r.mb(DEVICE_ID, 1500), 0);
        assert_eq!(r.ctrl(ctrl::BOOT_READS), 2);
        assert_eq!(r.ctrl(ctrl::BOOT_MS), 1500);
    }

    #[test]
    fn removed_function_reads_ones_and_drops_writes() {
        let mut r = Rig::new(Some(0));
        r.write(0x1000, 7, 0);
        r.write(CTRL + ctrl::REMOVED, 1, 0);
        assert_eq!(r.mb(FW_STATUS, 0), u32::MAX);
        assert_eq!(r.mb(DEVICE_ID, 0), u32::MAX);
        assert_eq!(r.read(0x1000, 0), u32::MAX);
        r.write(0x1000, 9, 0);
        r.reset(0);
        assert_eq!(r.ctrl(ctrl::MAGIC), ctrl::MAGIC_VALUE, "control port stays");
        r.write(CTRL + ctrl::REMOVED, 0, 0);
        assert_eq!(r.read(0x1000, 0), 7, "the write was lost");
        assert_eq!(r.ctrl(ctrl::DOORBELLS), 0);
    }

    #[test]
    fn tpb_map_and_plain_registers_hold_values() {
        let mut r = Rig::new(Some(0));
        r.write(MISC + RESET_TPB_MAP, 0b11, 0);
        assert_eq!(r.mb(RESET_TPB_MAP, 0), 0b11);
        r.write(0x1000, 0x1234_5678, 0);
        assert_eq!(r.read(0x1000, 0), 0x1234_5678);
        assert_eq!(r.read(0x1004, 0), 0);
        r.write(MISC + FW_STATUS, STATUS_RESET_IN_PROGRESS, 0);
        assert_eq!(r.mb(FW_STATUS, 0), 0, "status is read-only");
    }

    #[test]
    fn tpb_maps_are_checked_against_the_reference() {
        let mut r = Rig::new(Some(0));
        let tpb = |r: &mut Rig, map: u32, ms: u64| {
            r.write(MISC + RESET_TPB_MAP, map, ms);
            r.write(MISC + RESET_REQUEST, REQUEST_TPB, ms);
            r.write(MISC + RESET_TRIGGER, 1, ms);
            r.mb(RESET_REQUEST, ms)
        };
        // Core 1 with its three top SPs: taken and shown, no error.
        assert_eq!(tpb(&mut r, 0x3802, 0), 0);
        assert_eq!(r.ctrl(ctrl::TPB_MAP_TAKEN), 0x3802);
        assert_eq!(r.ctrl(ctrl::TPB_MAP_ERRORS), 0);
        // The core bit alone leaves its engines out: counted.
        assert_eq!(tpb(&mut r, 0b10, 1), 0);
        assert_eq!(r.ctrl(ctrl::TPB_MAP_TAKEN), 0b10);
        assert_eq!(r.ctrl(ctrl::TPB_MAP_ERRORS), 1);
        // Engines of a core not named, or no core at all: counted.
        tpb(&mut r, 0x3f01, 2);
        tpb(&mut r, 0x0700, 3);
        assert_eq!(r.ctrl(ctrl::TPB_MAP_ERRORS), 3);
    }

    #[test]
    fn all_ones_window_follows_a_take() {
        let mut r = Rig::new(Some(1000));
        r.write(CTRL + ctrl::ALL_ONES_MS, 300, 0);
        assert_eq!(r.mb(FW_STATUS, 0), 0, "no take yet: no window");
        r.reset(10);
        assert_eq!(r.mb(FW_STATUS, 10), u32::MAX);
        assert_eq!(r.mb(DEVICE_ID, 309), u32::MAX);
        assert_eq!(r.mb(FW_STATUS, 310), STATUS_RESET_IN_PROGRESS);
        assert_eq!(r.ctrl(ctrl::ONES_READS), 2);
        assert_eq!(r.ctrl(ctrl::REMOVED), 0, "still present");
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
        r.write(CTRL + ctrl::HBM_PA_HI, 0x10, 0);
        r.write(CTRL + ctrl::HBM_PA_LO, 0x40, 0);
        r.write(CTRL + ctrl::HBM_DATA, 0xabcd, 0);
        assert_eq!(r.hbm.0.borrow().get(&0x10_0000_0040), Some(&0xabcd));
        assert_eq!(r.ctrl(ctrl::HBM_DATA), 0xabcd);
        r.write(CTRL + ctrl::HBM_PA_HI, 0x8, 0);
        assert_eq!(r.ctrl(ctrl::HBM_DATA), u32::MAX, "between the stacks");
    }
}
