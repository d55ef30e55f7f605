//! PCI configuration space of the function: a type-0 header with the arch's
//! ids, BAR0 (64-bit memory) and BAR4 (64-bit prefetchable memory), no BAR2,
//! no interrupt pin and no capabilities.
//!
//! QEMU's vfio-user client emulates the BAR address registers itself (sizes
//! come from the region info); the model still implements BAR sizing so that
//! the header is correct for any client.

use crate::arch::{Arch, VENDOR_AMAZON};

/// Bytes of configuration space (conventional PCI).
pub const CONFIG_SIZE: u64 = 256;

const DWORDS: usize = (CONFIG_SIZE / 4) as usize;
const COMMAND: usize = 0x04;
const CLASS_REVISION: usize = 0x08;
const HEADER: usize = 0x0c;
const BAR0: usize = 0x10;
const SUBSYSTEM: usize = 0x2c;
/// Memory space, bus master (the rest of the command register reads 0).
const COMMAND_WRITABLE: u32 = 0x0006;
/// Processing accelerator (class 0x12), revision 1.
const CLASS_REVISION_VALUE: u32 = 0x1200_0001;
/// 64-bit memory BAR.
const BAR_MEM64: u32 = 0x4;
/// Prefetchable.
const BAR_PREFETCH: u32 = 0x8;

/// The configuration space of one function.
pub struct ConfigSpace {
    regs: [u32; DWORDS],
    /// Writable bits of each dword (BAR sizing masks, command register).
    writable: [u32; DWORDS],
}

impl ConfigSpace {
    /// The header of a function of `arch`.
    pub fn new(arch: &Arch) -> Self {
        let mut c = ConfigSpace {
            regs: [0; DWORDS],
            writable: [0; DWORDS],
        };
        let id = u32::from(arch.device_id) << 16 | u32::from(VENDOR_AMAZON);
        c.regs[0] = id;
        c.regs[CLASS_REVISION / 4] = CLASS_REVISION_VALUE;
        c.regs[SUBSYSTEM / 4] = id;
        c.writable[COMMAND / 4] = COMMAND_WRITABLE;
        c.add_bar64(0, arch.bar0_size, BAR_MEM64);
        c.add_bar64(4, arch.bar4_size, BAR_MEM64 | BAR_PREFETCH);
        debug_assert_eq!(c.regs[HEADER / 4], 0);
        c
    }

    fn add_bar64(&mut self, bar: usize, size: u64, flags: u32) {
        assert!(size.is_power_of_two() && bar % 2 == 0);
        let mask = !(size - 1);
        let lo = BAR0 / 4 + bar;
        self.regs[lo] = flags;
        self.writable[lo] = mask as u32 & !0xf;
        self.writable[lo + 1] = (mask >> 32) as u32;
    }

    /// Reads `data.len()` (1, 2 or 4, naturally aligned; or whole dwords)
    /// bytes at `offset`.
    pub fn read(&self, offset: u64, data: &mut [u8]) {
        for (i, b) in data.iter_mut().enumerate() {
            let at = offset as usize + i;
            *b = self
                .regs
                .get(at / 4)
                .map_or(0xff, |r| r.to_le_bytes()[at % 4]);
        }
    }

    /// Writes `data` at `offset`; read-only bits keep their value.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        for (i, &b) in data.iter().enumerate() {
            let at = offset as usize + i;
            let Some(&w) = self.writable.get(at / 4) else {
                continue;
            };
            let shift = 8 * (at % 4);
            let keep = !(w & (0xff << shift));
            let r = &mut self.regs[at / 4];
            *r = (*r & keep) | (u32::from(b) << shift & w);
        }
    }

    /// The dword at `offset`.
    pub fn dword(&self, offset: usize) -> u32 {
        self.regs[offset / 4]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::V2;

    fn read32(c: &ConfigSpace, off: u64) -> u32 {
        let mut b = [0u8; 4];
        c.read(off, &mut b);
        u32::from_le_bytes(b)
    }

    #[test]
    fn ids_class_and_no_interrupt_pin() {
        let c = ConfigSpace::new(&V2);
        assert_eq!(read32(&c, 0), 0x7164_1d0f);
        let mut w = [0u8; 2];
        c.read(2, &mut w);
        assert_eq!(u16::from_le_bytes(w), 0x7164);
        assert_eq!(read32(&c, 0x08) >> 8, 0x12_0000);
        assert_eq!(read32(&c, 0x3c) >> 8 & 0xff, 0, "interrupt pin");
        assert_eq!(read32(&c, 0x04) >> 16 & 0x10, 0, "no capability list");
    }

    #[test]
    fn bar0_and_bar4_are_64_bit_and_bar2_is_absent() {
        let c = ConfigSpace::new(&V2);
        assert_eq!(read32(&c, 0x10), 0x4);
        assert_eq!(read32(&c, 0x18), 0, "BAR2");
        assert_eq!(read32(&c, 0x20), 0xc);
    }

    #[test]
    fn bar_sizing_reports_the_arch_sizes() {
        let mut c = ConfigSpace::new(&V2);
        for off in [0x10u64, 0x14, 0x18, 0x1c, 0x20, 0x24] {
            c.write(off, &u32::MAX.to_le_bytes());
        }
        let size = |lo: u32, hi: u32| !((u64::from(hi) << 32) | u64::from(lo & !0xf)) + 1;
        assert_eq!(size(read32(&c, 0x10), read32(&c, 0x14)), V2.bar0_size);
        assert_eq!(size(read32(&c, 0x20), read32(&c, 0x24)), V2.bar4_size);
        assert_eq!(read32(&c, 0x18), 0);
        assert_eq!(read32(&c, 0x20) & 0xf, 0xc, "type bits stay");
    }

    #[test]
    fn ids_are_read_only_command_is_writable() {
        let mut c = ConfigSpace::new(&V2);
        c.write(0, &[0, 0, 0, 0]);
        assert_eq!(c.dword(0), 0x7164_1d0f);
        c.write(4, &[0x07, 0]);
        assert_eq!(c.dword(4) & 0xffff, 0x6);
    }
}
