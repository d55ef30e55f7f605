// SPDX-License-Identifier: GPL-2.0-only

//! A host-to-device UDMA queue, driven as the reference driver drives it
//! (aws-neuron-driver 2.24.7.0, `neuron_dma.c`, `udma/udma_m2m.c`,
//! `udma/udma_main.c`): two rings of 16-byte descriptors in coherent host
//! memory, M2S descriptor `i` naming a source and S2M descriptor `i` its
//! destination; a batch of pairs ends with one that copies the 0xabcdef01
//! marker into a host word, the doorbells ring S2M first, and the driver
//! polls the word. Batches are written into the rings first and rung
//! separately ([`H2tQueue::stage`], [`H2tQueue::ring`]): the batches
//! staged while the engine runs share one pair of doorbells. No register
//! is read on the way (the reference calls CSR reads "very slow",
//! udma_main.c:167-172) and no interrupt is used.
//!
//! Every address a descriptor carries is one of the queue's own coherent
//! buffers (by DMA address from the DMA API, never `virt_to_phys`, with the
//! arch's host window bit) or a device address the caller checked: user
//! space never names one.

pub(crate) mod regs;

use crate::abstractions::{io_view::mmio_window, user_dma::DmaDevice};
use crate::arch::DmaEngine;
use kernel::{
    device::{Bound, Device},
    dma::Coherent,
    io::{io_project, io_read, io_write, Io, Mmio, Region},
    prelude::*,
    time::{delay::fsleep, Delta, Instant, Monotonic},
};
use regs::{
    queue_block, Dir, QueueRegs, M2S_COMP_CFG, M2S_Q_SW_CTRL, QUEUE_BLOCK, Q_CFG, Q_DRBP_HIGH,
    Q_DRBP_LOW, Q_DRL, Q_DRTP_INC, S2M_COMP_CFG, S2M_Q_SW_CTRL,
};

/// Bytes of a descriptor (udma.h:32-45): two little-endian words, the
/// first `len_ctrl` (low half) and `meta_ctrl`, the second the address.
const DESC_BYTES: usize = 16;
/// A descriptor as the two words it is written as.
type Desc = [u64; 2];
/// 64-bit words of a descriptor.
const DESC_WORDS: usize = DESC_BYTES / size_of::<u64>();
/// Most bytes one descriptor moves (`MAX_DMA_DESC_SIZE`, udma.h:428),
/// written as length 0 (`ENCODE_64K`, udma_m2m.c:274-277).
pub(crate) const DESC_MAX: usize = 64 * 1024;
/// Data pairs one batch (one marker) holds at most, 2031 as in the
/// reference (`sync_threshold`, neuron_dma.c:311): half its
/// `DMA_H2T_DESC_COUNT` ring of 4096 less the gap and the marker pair.
pub(crate) const BATCH: usize = 2031;
/// Batches in flight at most, each with its own marker word: a 16 MiB
/// piece of scattered pages (4097 pairs) is three batches, staged whole
/// and rung once ([`H2tQueue::ring`]).
const IN_FLIGHT: usize = 4;
/// Descriptors the driver leaves unposted, so a full ring is told from an
/// empty one (udma.h:312-324).
const RING_GAP: usize = 16;
/// Descriptors of each ring: a power of two of at least 32 (udma.h:26,
/// 318), so the ring's end stays 256-byte aligned (udma_main.c:381-386),
/// with room for [`IN_FLIGHT`] whole batches: twice the reference's
/// `DMA_H2T_DESC_COUNT`, which holds two, so that a whole piece is staged
/// before its doorbells ring and the engine still finds the next batch
/// posted when it ends one (the reference posts an asynchronous copy
/// before it waits for the one before, neuron_dma.c:478-490).
const RING_LEN: usize = 8192;
const _: () = assert!(IN_FLIGHT * (BATCH + 1) + RING_GAP <= RING_LEN);
/// What the marker pair copies, and the driver waits to see
/// (`DMA_COMPLETION_MARKER`, neuron_dma.c:146-147).
const MARKER: u32 = 0xabcd_ef01;
/// Longest a batch may take before the queue is stopped: the reference
/// allows about 40 ms for a 64 KiB copy on hardware (v2/neuron_dhal_v2.c:
/// 1309-1319); emulated engines share the host with the guest.
const BATCH_TIMEOUT_MS: i64 = 2000;
/// Pause between looks at the marker: the wait sleeps, leaving the CPU.
const POLL_US: i64 = 20;
/// How often a wait asks whether the function is still there.
const PRESENCE_MS: i64 = 50;

/// `len_ctrl` bits (udma.h:60-72): ring id (phase) 25:24, FIRST 26, LAST 27.
const RING_ID_SHIFT: u32 = 24;
const FIRST_LAST: u32 = 0b11 << 26;
/// M2S `meta_ctrl` of a copy (udma_m2m.c:52-77) and with the write
/// barrier the last data pair of a batch carries (udma_m2m.c:80-99,
/// neuron_dma.c:336).
const META_COPY: u32 = 0x0108_0003;
const META_BARRIER: u32 = 0x0508_0003;

/// One end of a copy.
#[derive(Clone, Copy, Debug)]
pub(crate) enum End {
    /// The bounce buffer at this offset.
    Bounce(usize),
    /// The queue's zero page (as a source only): the reference's memset
    /// fills one host buffer and copies it over and over
    /// (neuron_dma.c:532-564).
    Zeros,
    /// Device physical address.
    Device(u64),
    /// A DMA address the DMA API gave for user pages the caller pinned
    /// and mapped ([`crate::abstractions::user_dma::Mapped`]).
    Host(u64),
}

/// One queue pair and the coherent memory it moves bytes through.
pub(crate) struct H2tQueue {
    /// The function, for mappings of user pages.
    dev: DmaDevice,
    /// BAR0 offset of the M2S and S2M queue blocks.
    blocks: [usize; 2],
    host_base: u64,
    /// The rings, as 64-bit words, [`DESC_WORDS`] a descriptor.
    m2s: Coherent<[u64]>,
    s2m: Coherent<[u64]>,
    bounce: Coherent<[u8]>,
    zeros: Coherent<[u8]>,
    /// Word 0 the marker, word `1 + s` where the marker pair of the batch
    /// in slot `s` copies it.
    marker: Coherent<[u32]>,
    next: usize,
    phase: u32,
    /// Descriptors each batch in flight holds, oldest at `oldest`, slot
    /// by slot.
    posted: [usize; IN_FLIGHT],
    oldest: usize,
    in_flight: usize,
    /// How many of the newest batches in flight are staged but not rung:
    /// the engine does not know them yet.
    unrung: usize,
    /// Whether the queues hold the rings since the last device reset or
    /// stop.
    ready: bool,
}

impl H2tQueue {
    /// The queue of `engine` on `dev`, its memory allocated; the queues
    /// are set up at first use.
    pub(crate) fn new(dev: &Device<Bound>, engine: &DmaEngine) -> Result<Self> {
        let ring = RING_LEN * DESC_WORDS;
        let block = |dir| usize::try_from(queue_block(engine.unit, dir, 0));
        Ok(Self {
            dev: DmaDevice::new(dev),
            blocks: [block(Dir::M2s)?, block(Dir::S2m)?],
            host_base: engine.host_base,
            m2s: Coherent::zeroed_slice(dev, ring, GFP_KERNEL)?,
            s2m: Coherent::zeroed_slice(dev, ring, GFP_KERNEL)?,
            bounce: Coherent::zeroed_slice(dev, DESC_MAX, GFP_KERNEL)?,
            zeros: Coherent::zeroed_slice(dev, DESC_MAX, GFP_KERNEL)?,
            marker: Coherent::zeroed_slice(dev, 1 + IN_FLIGHT, GFP_KERNEL)?,
            next: 0,
            phase: 1,
            posted: [0; IN_FLIGHT],
            oldest: 0,
            in_flight: 0,
            unrung: 0,
            ready: false,
        })
    }

    /// The function the queue moves bytes for, to map user pages for:
    /// the queue is dropped before it unbinds.
    pub(crate) fn dma_device(&self) -> &DmaDevice {
        &self.dev
    }

    /// Copies `src` to the start of the bounce buffer.
    pub(crate) fn copy_in(&self, src: &[u8]) -> Result {
        io_project!(&self.bounce, [try: 0..src.len()]).copy_from_slice(src);
        Ok(())
    }

    /// Copies the bounce buffer's first `dst.len()` bytes out.
    pub(crate) fn copy_out(&self, dst: &mut [u8]) -> Result {
        io_project!(&self.bounce, [try: 0..dst.len()]).copy_to_slice(dst);
        Ok(())
    }

    fn block<'a>(&self, bar0: Mmio<'a, Region>, dir: Dir) -> Result<QueueRegs<'a>> {
        let off = match dir {
            Dir::M2s => self.blocks[0],
            Dir::S2m => self.blocks[1],
        };
        mmio_window::<QUEUE_BLOCK>(bar0, off)
    }

    /// Sets both queues up as `udma_m2m_init_queue` does, M2S first: pause,
    /// `RST_Q` (no wait), ring base and length, no completion ring, enable
    /// (udma_main.c:406-470, udma_m2m.c:186-227).
    fn init(&mut self, bar0: Mmio<'_, Region>) -> Result {
        for dir in [Dir::M2s, Dir::S2m] {
            let q = self.block(bar0, dir)?;
            let ring = match dir {
                Dir::M2s => self.m2s.dma_address(),
                Dir::S2m => self.s2m.dma_address(),
            } | self.host_base;
            let cfg = pause_and_reset(&q, dir);
            q.write_reg(Q_DRBP_LOW::zeroed().with_addr(ring as u32));
            q.write_reg(Q_DRBP_HIGH::zeroed().with_addr((ring >> 32) as u32));
            q.write_reg(Q_DRL::zeroed().try_with_descs(RING_LEN as u32)?);
            match dir {
                Dir::M2s => q.write_reg(M2S_COMP_CFG::zeroed()),
                Dir::S2m => q.write_reg(S2M_COMP_CFG::zeroed()),
            }
            q.write_reg(cfg.with_const_enable::<3>());
        }
        self.next = 0;
        self.phase = 1;
        self.ready = true;
        Ok(())
    }

    /// Nothing in flight any more: the queue was set up again or stopped.
    fn drop_in_flight(&mut self) {
        self.oldest = 0;
        self.in_flight = 0;
        self.unrung = 0;
    }

    /// Descriptors of the batches in flight from the `from`-th oldest on.
    fn held_from(&self, from: usize) -> usize {
        (from..self.in_flight)
            .map(|k| self.posted[(self.oldest + k) % IN_FLIGHT])
            .sum()
    }

    /// Descriptors of every batch in flight.
    fn used(&self) -> usize {
        self.held_from(0)
    }

    /// Whether a batch of `pairs` pairs may be posted now, its marker
    /// pair and the gap included, beside the batches in flight.
    pub(crate) fn has_room(&self, pairs: usize) -> bool {
        self.in_flight < IN_FLIGHT && self.used() + pairs + 1 + RING_GAP <= RING_LEN
    }

    /// Whether a batch posted has not been seen to end yet.
    pub(crate) fn busy(&self) -> bool {
        self.in_flight > 0
    }

    /// The DMA address of `end`, `EINVAL` for zeros as a destination.
    fn address(&self, end: End, len: usize, to: bool) -> Result<u64> {
        match end {
            End::Bounce(off) if off.checked_add(len).is_some_and(|e| e <= DESC_MAX) => {
                Ok((self.bounce.dma_address() + off as u64) | self.host_base)
            }
            End::Zeros if !to && len <= DESC_MAX => Ok(self.zeros.dma_address() | self.host_base),
            End::Device(pa) => Ok(pa),
            End::Host(addr) if len <= DESC_MAX => Ok(addr | self.host_base),
            _ => Err(EINVAL),
        }
    }

    /// The M2S and S2M descriptors of a pair of ring phase `phase`.
    fn pair(src: u64, dst: u64, len: usize, meta: u32, phase: u32) -> Result<[Desc; 2]> {
        if len == 0 || len > DESC_MAX {
            return Err(EINVAL);
        }
        let len_ctrl = (len % DESC_MAX) as u32 | phase << RING_ID_SHIFT;
        let desc = |ctrl: u32, meta: u32, addr: u64| {
            [
                (u64::from(meta) << 32 | u64::from(ctrl)).to_le(),
                addr.to_le(),
            ]
        };
        Ok([
            desc(len_ctrl | FIRST_LAST, meta, src),
            desc(len_ctrl, 0, dst),
        ])
    }

    /// The M2S and S2M descriptors of the pair `(src, dst, len)` with
    /// `meta` and ring phase `phase`: `EINVAL` for an end it may not name.
    fn descs(&self, pair: (End, End, usize), meta: u32, phase: u32) -> Result<[Desc; 2]> {
        let (src, dst, len) = pair;
        let (s, d) = (
            self.address(src, len, false)?,
            self.address(dst, len, true)?,
        );
        Self::pair(s, d, len, meta, phase)
    }

    /// Stages `pairs` (source, destination, bytes: at most [`DESC_MAX`]
    /// each, at most [`BATCH`] of them) and the marker pair behind the
    /// batches in flight: writes their descriptors past the ring's tail,
    /// where the engine does not read until [`H2tQueue::ring`] moves the
    /// tail; `EBUSY` without [`H2tQueue::has_room`]. Touches only BAR0 (to
    /// set the queues up after a reset or a stop) and memory, allocates
    /// nothing: never sleeps (the caller holds BAR0's access guard, an RCU
    /// read-side section).
    pub(crate) fn stage(&mut self, bar0: Mmio<'_, Region>, pairs: &[(End, End, usize)]) -> Result {
        if pairs.is_empty() || pairs.len() > BATCH {
            return Err(EINVAL);
        }
        if !self.has_room(pairs.len()) {
            return Err(EBUSY);
        }
        if !self.ready {
            self.init(bar0)?;
        }
        let slot = (self.oldest + self.in_flight) % IN_FLIGHT;
        let word = |i: usize| self.marker.dma_address() + 4 * i as u64;
        let marker = (End::Host(word(0)), End::Host(word(1 + slot)), 4);
        let all = || {
            Iterator::chain(pairs.iter(), [&marker])
                .copied()
                .enumerate()
        };
        io_write!(&self.marker, [try: 0], MARKER);
        io_write!(&self.marker, [try: 1 + slot], 0);
        // Each descriptor is checked as it is written into a slot past the
        // ring's tail, where the engine does not read: a pair refused
        // returns before the tail moves, leaving the rings as the engine
        // knows them.
        let (mut next, mut phase) = (self.next, self.phase);
        for (i, pair) in all() {
            // The last data pair carries the write barrier.
            let meta = if i + 1 == pairs.len() {
                META_BARRIER
            } else {
                META_COPY
            };
            let [m, d] = self.descs(pair, meta, phase)?;
            let at = next * DESC_WORDS;
            for (k, (m, d)) in m.into_iter().zip(d).enumerate() {
                io_write!(&self.m2s, [try: at + k], m);
                io_write!(&self.s2m, [try: at + k], d);
            }
            next = (next + 1) % RING_LEN;
            if next == 0 {
                phase = (phase + 1) % 4;
            }
        }
        (self.next, self.phase) = (next, phase);
        self.posted[slot] = pairs.len() + 1;
        self.in_flight += 1;
        self.unrung += 1;
        Ok(())
    }

    /// Hands the engine every batch staged since the last ring: moves both
    /// tails past them with one doorbell each, S2M first
    /// (udma_m2m.c:413-444). A doorbell of the emulated function is a
    /// round trip that holds the guest CPU (QEMU's vfio-user client does
    /// not post BAR0 writes while BAR4 is mapped), dearer while its engine
    /// runs; on hardware a posted write: one pair of them for a whole
    /// scattered piece instead of one per batch. Never sleeps.
    pub(crate) fn ring(&mut self, bar0: Mmio<'_, Region>) -> Result {
        let descs = self.held_from(self.in_flight - self.unrung);
        if descs == 0 {
            return Ok(());
        }
        // The descriptors are in coherent memory; the MMIO write orders
        // after them (`writel`).
        let n = Q_DRTP_INC::zeroed().try_with_descs(descs as u32)?;
        self.block(bar0, Dir::S2m)?.write_reg(n);
        self.block(bar0, Dir::M2s)?.write_reg(n);
        self.unrung = 0;
        Ok(())
    }

    /// Retires the oldest batch in flight if it was rung and its marker
    /// landed; whether it did.
    fn retire_oldest(&mut self) -> bool {
        let landed =
            || -> Result<bool> { Ok(io_read!(&self.marker, [try: 1 + self.oldest]) == MARKER) };
        // `oldest` < `IN_FLIGHT`: the word is always there.
        if self.in_flight > self.unrung && landed().unwrap_or(false) {
            self.oldest = (self.oldest + 1) % IN_FLIGHT;
            self.in_flight -= 1;
            return true;
        }
        false
    }

    /// Whether a batch rung is still running (or queued) in the engine, as
    /// far as the markers tell: retires those that ended.
    pub(crate) fn running(&mut self) -> bool {
        while self.retire_oldest() {}
        self.in_flight > self.unrung
    }

    /// Waits, sleeping, until the marker of the oldest batch in flight
    /// lands: every pair posted before it is done, the queue running in
    /// order (neuron_dma.c:256), and its descriptors are free again.
    /// `ETIMEDOUT` after [`BATCH_TIMEOUT_MS`], `ENODEV` once `gone` (asked
    /// every [`PRESENCE_MS`]) says the function left; the caller then stops
    /// the queue ([`H2tQueue::stop`]). Not cut short by a signal: the
    /// engine may write the bounce buffer until the batch ends, and a batch
    /// is short. `EINVAL` when the oldest batch was never rung
    /// ([`H2tQueue::ring`]): nothing would end it.
    pub(crate) fn wait(&mut self, gone: &dyn Fn() -> bool) -> Result {
        if !self.busy() {
            return Ok(());
        }
        if self.unrung == self.in_flight {
            return Err(EINVAL);
        }
        let start = Instant::<Monotonic>::now();
        let mut asked = Delta::ZERO;
        loop {
            if self.retire_oldest() {
                return Ok(());
            }
            let waited = start.elapsed();
            if waited > Delta::from_millis(BATCH_TIMEOUT_MS) {
                return Err(ETIMEDOUT);
            }
            if waited - asked > Delta::from_millis(PRESENCE_MS) {
                asked = waited;
                if gone() {
                    return Err(ENODEV);
                }
            }
            fsleep(Delta::from_micros(POLL_US));
        }
    }

    /// Stops both queues after a batch that did not end (pause, `RST_Q`);
    /// the next batch sets them up again.
    pub(crate) fn stop(&mut self, bar0: Mmio<'_, Region>) -> Result {
        self.ready = false;
        self.drop_in_flight();
        for dir in [Dir::M2s, Dir::S2m] {
            pause_and_reset(&self.block(bar0, dir)?, dir);
        }
        Ok(())
    }

    /// A device reset returned the queues to their reset state: the next
    /// batch sets them up again (as the reference's reset thread does,
    /// neuron_reset.c:133).
    pub(crate) fn forget(&mut self) {
        self.ready = false;
        self.drop_in_flight();
    }
}

/// Pauses queue `q` of direction `dir` and clears its pointers (`RST_Q`,
/// no wait), as `udma_q_reset` does (udma_main.c:406-423); the paused
/// `cfg`, which enabling extends.
fn pause_and_reset(q: &QueueRegs<'_>, dir: Dir) -> Q_CFG {
    let paused = Q_CFG::zeroed().with_const_reset_value::<3>();
    q.write_reg(paused);
    match dir {
        Dir::M2s => q.write_reg(M2S_Q_SW_CTRL::zeroed().with_rst_q(true)),
        Dir::S2m => q.write_reg(S2M_Q_SW_CTRL::zeroed().with_rst_q(true)),
    }
    paused
}
