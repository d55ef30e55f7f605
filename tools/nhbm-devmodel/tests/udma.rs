//! The UDMA engines driven through the function's registers as the
//! reference driver drives them (queue init as `udma_m2m_init_queue`,
//! copies as `udma_m2m_copy_prepare_one` and `udma_m2m_copy_start`,
//! completion by the 0xabcdef01 marker), over guest memory shared the way
//! QEMU's vfio-user client shares it.

use nhbm_devmodel::arch::{Arch, V2, V3, V4};
use nhbm_devmodel::bar0::{ctrl, Behaviour, FW_STATUS, RESET_REQUEST, RESET_TRIGGER};
use nhbm_devmodel::device::NeuronFunction;
use nhbm_devmodel::udma::desc::{Desc, MAX_LEN};
use nhbm_devmodel::udma::regs::{self, q};
use std::fs::File;
use std::os::fd::FromRawFd;
use std::os::unix::fs::FileExt;
use std::time::Duration;
use vfio_user::{DmaMapFlags, DmaUnmapFlags, ServerBackend};

const GIB: u64 = 1 << 30;
const RAM: u64 = 64 << 20;
/// Where each queue's ring sits in guest memory.
const M2S_RING: u64 = 0x1_0000;
const S2M_RING: u64 = 0x2_0000;
const RING_LEN: u32 = 32;
/// The marker's source and destination words (host memory, as the
/// reference's `h2t_completion`).
const MARKER_SRC: u64 = 0x3_0000;
const MARKER_DST: u64 = 0x3_0004;
const MARKER: u32 = 0xabcd_ef01;

/// A guest with `RAM` bytes shared with one function, and the driver side
/// of queue 0 of the function's first engine.
struct Rig {
    f: NeuronFunction,
    arch: &'static Arch,
    ram: File,
    unit: u64,
    /// Next free slot of both rings, and its phase.
    next: u32,
    phase: u32,
}

fn memfd(len: u64) -> File {
    // SAFETY: a NUL-terminated name and valid flags.
    let fd = unsafe { libc::memfd_create(c"ram".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: just created, owned by nothing else.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(len).unwrap();
    f
}

impl Rig {
    fn new(arch: &'static Arch) -> Self {
        let how = Behaviour::new(Some(Duration::ZERO), Duration::ZERO);
        let mut f = NeuronFunction::new(arch, how).unwrap();
        let ram = memfd(RAM);
        f.dma_map(
            DmaMapFlags::READ_WRITE,
            0,
            0,
            RAM,
            Some(ram.try_clone().unwrap()),
        )
        .unwrap();
        let mut r = Rig {
            f,
            arch,
            ram,
            unit: arch.udma_units[0],
            next: 0,
            phase: 1,
        };
        r.init_queue();
        r
    }

    fn host(&self, guest: u64) -> u64 {
        guest | self.arch.host_window.value
    }

    fn w(&mut self, off: u64, v: u32) {
        self.f.region_write(0, off, &v.to_le_bytes()).unwrap();
    }

    fn r(&mut self, off: u64) -> u32 {
        let mut b = [0u8; 4];
        self.f.region_read(0, off, &mut b).unwrap();
        u32::from_le_bytes(b)
    }

    fn m2s(&self, reg: u64) -> u64 {
        self.unit + regs::QUEUES + reg
    }

    fn s2m(&self, reg: u64) -> u64 {
        self.unit + regs::S2M + regs::QUEUES + reg
    }

    fn ctrl(&mut self, reg: u64) -> u32 {
        self.r(self.arch.bar0_size - 0x1000 + reg)
    }

    fn set_ctrl(&mut self, reg: u64, v: u32) {
        self.w(self.arch.bar0_size - 0x1000 + reg, v)
    }

    /// `udma_m2m_init_queue` for queue 0: pause, `RST_Q`, ring, no
    /// completion ring, enable; M2S first (udma_main.c:406-470).
    fn init_queue(&mut self) {
        for (ring, sw_ctrl, comp_cfg, s2m) in [
            (M2S_RING, q::M2S_SW_CTRL, q::M2S_COMP_CFG, false),
            (S2M_RING, q::S2M_SW_CTRL, q::S2M_COMP_CFG, true),
        ] {
            let at = |r: &Rig, reg| if s2m { r.s2m(reg) } else { r.m2s(reg) };
            let base = self.host(ring);
            self.w(at(self, q::CFG), q::CFG_RESET);
            self.w(at(self, sw_ctrl), q::SW_CTRL_RST_Q);
            self.w(at(self, q::DRBP_LOW), base as u32);
            self.w(at(self, q::DRBP_HIGH), (base >> 32) as u32);
            self.w(at(self, q::DRL), RING_LEN);
            self.w(at(self, comp_cfg), 0);
            self.w(at(self, q::CFG), q::CFG_RESET | q::CFG_ENABLE);
        }
        self.next = 0;
        self.phase = 1;
        self.ram
            .write_all_at(&MARKER.to_le_bytes(), MARKER_SRC)
            .unwrap();
    }

    /// Writes one pair at the next slot (not posted).
    fn pair(&mut self, src: u64, dst: u64, len: u32) {
        let slot = u64::from(self.next) * 16;
        self.ram
            .write_all_at(&Desc::encode(len, self.phase, src), M2S_RING + slot)
            .unwrap();
        self.ram
            .write_all_at(&Desc::encode(len, self.phase, dst), S2M_RING + slot)
            .unwrap();
        self.next += 1;
        if self.next == RING_LEN {
            self.next = 0;
            self.phase = (self.phase + 1) % 4;
        }
    }

    /// Copies as `ndma_memcpy_chunks` does: the data pairs, a marker pair,
    /// the S2M doorbell then the M2S one; whether the marker landed once
    /// the engines have nothing left to move.
    fn copy(&mut self, pairs: &[(u64, u64, u32)]) -> bool {
        self.ram.write_all_at(&[0; 4], MARKER_DST).unwrap();
        for &(s, d, len) in pairs {
            self.pair(s, d, len);
        }
        self.pair(self.host(MARKER_SRC), self.host(MARKER_DST), 4);
        let n = pairs.len() as u32 + 1;
        self.w(self.s2m(q::DRTP_INC), n);
        self.w(self.m2s(q::DRTP_INC), n);
        self.marker()
    }

    fn marker(&self) -> bool {
        self.f.udma().wait_idle();
        let mut b = [0u8; 4];
        self.ram.read_exact_at(&mut b, MARKER_DST).unwrap();
        u32::from_le_bytes(b) == MARKER
    }

    fn hbm(&self, pa: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        let off = self.arch.bar4_offset(pa, len as u64).unwrap();
        self.f.bar4().read(off, &mut b).unwrap();
        b
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i * 7 + usize::from(seed)) as u8)
        .collect()
}

#[test]
fn uploads_and_downloads_land_at_device_addresses_on_every_arch() {
    for (arch, pa) in [
        (&V2, 64 * GIB + 0x1234),
        (&V3, 0x8040_0000_0000 + 8),
        (&V4, 30 * GIB + 3),
    ] {
        let mut r = Rig::new(arch);
        let data = pattern(100_000, 5);
        r.ram.write_all_at(&data, 0x10_0000).unwrap();
        // 64 KiB (length 0 on the wire) and the rest, head unaligned.
        let first = MAX_LEN as u64;
        let rest = (data.len() as u64 - first) as u32;
        let up = [
            (r.host(0x10_0000), pa, MAX_LEN),
            (r.host(0x10_0000 + first), pa + first, rest),
        ];
        assert!(r.copy(&up), "{}", arch.name);
        assert_eq!(r.hbm(pa, data.len()), data, "{}", arch.name);
        let down = [
            (pa, r.host(0x20_0001), MAX_LEN),
            (pa + first, r.host(0x20_0001 + first), rest),
        ];
        assert!(r.copy(&down));
        let mut back = vec![0u8; data.len()];
        r.ram.read_exact_at(&mut back, 0x20_0001).unwrap();
        assert_eq!(back, data);
        // Device to device, as the reference's memset replicates.
        assert!(r.copy(&[(pa, pa + 0x10_0000, 4096)]));
        assert_eq!(r.hbm(pa + 0x10_0000, 4096), data[..4096]);
        assert_eq!(r.ctrl(ctrl::DMA_PAIRS), 3 + 3 + 2);
        assert_eq!(r.ctrl(ctrl::DMA_MAPPED_MIB), 64);
    }
}

#[test]
fn rings_wrap_with_their_phase_and_a_stale_slot_stops_the_queue() {
    let mut r = Rig::new(&V2);
    // 5 x 13 pairs over a ring of 32: two wraps and a half, every phase.
    for round in 0..5u64 {
        let pairs: Vec<_> = (0..12u64)
            .map(|i| (r.host(0x10_0000 + i * 8), (round * 12 + i) * 8, 8))
            .collect();
        r.ram
            .write_all_at(&pattern(96, round as u8), 0x10_0000)
            .unwrap();
        assert!(r.copy(&pairs), "round {round}");
        assert_eq!(r.hbm(round * 96, 96), pattern(96, round as u8));
    }
    assert_eq!(
        r.r(r.m2s(q::DRHP)),
        1 | 3 << 30,
        "65 pairs: head 1, phase 3"
    );
    assert_eq!(r.r(r.unit + regs::STATE), 0, "idle");
    // A slot written in the previous pass's phase: the engine stops there.
    r.phase = (r.phase + 3) % 4;
    assert!(!r.copy(&[(r.host(0x10_0000), 0x9000, 8)]));
    assert_eq!(r.r(r.m2s(q::STATUS)), q::STATUS_ERROR);
    assert_eq!(
        r.r(r.unit + regs::STATE),
        regs::state_fields(regs::STATE_ABORT)
    );
    assert_eq!(r.ctrl(ctrl::DMA_FAULTS), 1);
    assert_eq!(r.hbm(0x9000, 8), [0; 8], "nothing moved");
    // The driver's way back: the queue re-initialized.
    r.init_queue();
    assert!(r.copy(&[(r.host(0x10_0000), 0x9000, 8)]));
    assert_eq!(r.hbm(0x9000, 8), pattern(96, 4)[..8]);
}

#[test]
fn batches_posted_behind_one_another_run_in_order() {
    let mut r = Rig::new(&V2);
    r.set_ctrl(ctrl::DMA_STALL, 1);
    // Two batches of three pairs and a marker, the second behind the
    // first, both to the same device bytes.
    for (seed, src) in [(1u8, 0x10_0000u64), (2, 0x20_0000)] {
        r.ram.write_all_at(&pattern(24, seed), src).unwrap();
        let pairs: Vec<_> = (0..3u64)
            .map(|i| (r.host(src + i * 8), 0x5000 + i * 8, 8))
            .collect();
        assert!(!r.copy(&pairs), "stalled: no marker yet");
    }
    assert_eq!(r.ctrl(ctrl::DMA_MOST_PENDING), 8, "both batches posted");
    assert_eq!(r.ctrl(ctrl::DMA_DOORBELLS), 4, "two doorbells a batch");
    assert_eq!(r.ctrl(ctrl::DMA_PAIRS), 0);
    r.set_ctrl(ctrl::DMA_STALL, 0);
    assert!(r.marker());
    assert_eq!(r.ctrl(ctrl::DMA_PAIRS), 8);
    assert_eq!(r.hbm(0x5000, 24), pattern(24, 2), "the later batch last");
    r.set_ctrl(ctrl::DMA_MOST_PENDING, 0);
    assert_eq!(r.ctrl(ctrl::DMA_MOST_PENDING), 0);
}

#[test]
fn addresses_outside_guest_memory_or_hbm_stop_the_queue() {
    let mut r = Rig::new(&V3);
    // Past the guest's memory, into a hole between stacks, from a region
    // the client took back.
    for (src, dst) in [
        (r.host(RAM), 0x1000),
        (r.host(0x10_0000), 0x30_0000_0000),
        (0x8000_0000_0000 - 8, r.host(0x10_0000)),
    ] {
        assert!(!r.copy(&[(src, dst, 16)]), "{src:#x} -> {dst:#x}");
        r.init_queue();
    }
    // An S2M buffer smaller than the data the M2S descriptor brings.
    r.ram
        .write_all_at(&Desc::encode(16, 1, r.host(0x10_0000)), M2S_RING)
        .unwrap();
    r.ram
        .write_all_at(&Desc::encode(8, 1, 0x1000), S2M_RING)
        .unwrap();
    r.w(r.s2m(q::DRTP_INC), 1);
    r.w(r.m2s(q::DRTP_INC), 1);
    r.f.udma().wait_idle();
    assert_eq!(r.r(r.s2m(q::STATUS)), q::STATUS_ERROR);
    r.init_queue();
    assert_eq!(r.ctrl(ctrl::DMA_FAULTS), 4);
    r.f.dma_unmap(DmaUnmapFlags::empty(), 0, RAM).unwrap();
    assert_eq!(r.ctrl(ctrl::DMA_MAPPED_MIB), 0);
    r.w(r.s2m(q::DRTP_INC), 1);
    r.w(r.m2s(q::DRTP_INC), 1);
    r.f.udma().wait_idle();
    assert_eq!(r.ctrl(ctrl::DMA_FAULTS), 5, "the ring itself is gone");
}

#[test]
fn a_stalled_engine_moves_nothing_and_a_device_reset_drops_its_queue() {
    let mut r = Rig::new(&V2);
    r.ram.write_all_at(&pattern(64, 9), 0x10_0000).unwrap();
    r.set_ctrl(ctrl::DMA_STALL, 1);
    assert!(!r.copy(&[(r.host(0x10_0000), 0x4000, 64)]));
    assert!(r.f.udma().stats().pairs == 0);
    // A device reset through the mailbox, taken at the next access.
    let misc = r.arch.misc_ram;
    r.w(misc + RESET_REQUEST, 1);
    r.w(misc + RESET_TRIGGER, 1);
    r.r(misc + FW_STATUS);
    assert_eq!(r.r(r.m2s(q::CFG)), q::CFG_RESET, "queues back to reset");
    assert_eq!(r.r(r.m2s(q::DRTP)), 1 << 30);
    r.set_ctrl(ctrl::DMA_STALL, 0);
    assert!(!r.marker());
    assert_eq!(r.hbm(0x4000, 64), [0; 64], "dropped, not moved");
    r.init_queue();
    assert!(r.copy(&[(r.host(0x10_0000), 0x4000, 64)]));
    assert_eq!(r.hbm(0x4000, 64), pattern(64, 9));
}

#[test]
fn an_injected_fault_stops_the_queue_after_the_pairs_before_it() {
    let mut r = Rig::new(&V2);
    r.ram.write_all_at(&pattern(32, 1), 0x10_0000).unwrap();
    r.set_ctrl(ctrl::DMA_FAIL_AFTER, 1);
    let pairs = [
        (r.host(0x10_0000), 0x100, 16),
        (r.host(0x10_0010), 0x110, 16),
    ];
    assert!(!r.copy(&pairs));
    assert_eq!(r.hbm(0x100, 32)[..16], pattern(32, 1)[..16]);
    assert_eq!(r.hbm(0x110, 16), [0; 16]);
    assert_eq!(r.r(r.m2s(q::DRHP)), 1 | 1 << 30);
    r.init_queue();
    assert!(r.copy(&pairs), "once only");
}
