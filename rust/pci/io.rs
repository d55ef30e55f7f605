// SPDX-License-Identifier: GPL-2.0-only

//! The real BAR path: BAR0 (APB/CSR) and BAR4 (HBM window) of a bound PCI
//! function, serving [`DeviceIo`]. BAR2 (AXI) is unused on every shipping
//! arch and never touched.
//!
//! BAR0 is mapped uncached (registers); BAR4 write-combining ([`WcBar`]),
//! as the reference driver maps its HBM window, for processes' mappings.
//! Bytes move through the function's DMA engine ([`H2tQueue`]), as the
//! reference moves every upload, copy and scrub: user memory in place, its
//! pages pinned and mapped ([`UserPages`]), kernel memory through the
//! queue's bounce buffer; with the `dma` module
//! parameter off, through BAR4 with 64-bit MMIO accesses in a loop without
//! calls, only the unaligned bytes at the ends one at a time: user memory
//! in one copy, written straight from the process's memory with page
//! faults off ([`WcBar::store_user`]) and read into its pinned pages
//! ([`WcBar::load_pages`]), kernel memory from its buffer
//! ([`bar4::write_words`]).

use crate::{
    abstractions::dma_mask,
    abstractions::io_view::mmio_window,
    abstractions::pci_presence,
    abstractions::user_dma::UserPages,
    abstractions::user_source::{UserSink, UserSource},
    abstractions::vma::Backing,
    abstractions::wc_bar::WcBar,
    arch::{addr, ArchInfo},
    hw::bar4,
    hw::io::{
        check_range, read_through_bounce, write_each, write_through_bounce, zero_each, Bounce,
        DeviceIo, Gate, XFER_CHUNK,
    },
    hw::regs::{MiscRam, DEVICE_ID, GONE, MISC_RAM_SIZE},
    hw::udma::{End, H2tQueue, BATCH, DESC_MAX},
};
use kernel::{
    alloc::Flags,
    device::Core,
    devres::Devres,
    io::{Io, IoBase, IoSysMap},
    new_mutex,
    page::{PAGE_SHIFT, PAGE_SIZE},
    pci::{self, Bar, DevresBar},
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
    uaccess::UserPtr,
};

/// Index of BAR0, the registers (`apb_bar = 0`; seed 001 §1).
pub(super) const BAR_APB: u32 = 0;
/// Index of BAR4, the HBM window (`dram_bar = 4`; seed 001 §1).
pub(super) const BAR_DRAM: u32 = 4;

/// Longest piece of a user transfer or a scrub by DMA: a user piece's
/// pages are pinned and mapped in place (at most 4097 of them, each one
/// descriptor pair, so two or three batches of up to [`BATCH`] pairs, each
/// posted while the one before runs), a scrub's is 256 descriptors from the
/// zero page, one batch. A doorbell is
/// a BAR0 write that the emulated function answers before the guest goes
/// on (a round trip), a batch two of them: measured in the bench's PCI
/// guest, 16 MiB pieces moved MEM_WRITE 20% and MEM_READ 13% faster than
/// 4 MiB ones, with 8% less CPU a byte. A piece holds the queue for about
/// 4 ms there (about 1.6 ms at 10 GB/s): what another tenant's transfer
/// waits at most before its own begins.
const BULK_PIECE: usize = 16 * 1024 * 1024;

/// Longest piece of a user transfer or a scrub with the CPU (the `dma`
/// parameter off): a piece is copied straight from the process's memory to
/// BAR4, or from BAR4 into its 256 pages pinned at once, inside the reset
/// gate. Measured in the bench's PCI guest, 64 KiB pieces spent a quarter
/// of MEM_WRITE's time outside the copy (the pinning, the gate and the
/// remap of each). On
/// hardware a CPU load from BAR4 waits for the device (tens to hundreds
/// of MB/s), so a 1 MiB read piece may take tens of milliseconds: what a
/// device reset or a kill of the reader waits at most; other tenants'
/// transfers do not wait for it (the gate is no lock), and the BAR is
/// reached [`XFER_CHUNK`] bytes at a time ([`PciIo::cpu_pages`]).
const CPU_PIECE: usize = 1024 * 1024;

/// Bytes of the widest BAR4 access a bulk transfer makes.
const WIDE: usize = size_of::<u64>();

/// The word-aligned middle of a transfer of `len` bytes at BAR offset
/// `off`: bytes before it, and its length (a multiple of [`WIDE`], 0 when
/// the transfer holds no aligned word). The bytes around it go one at a
/// time.
fn aligned_part(off: usize, len: usize) -> (usize, usize) {
    let head = (WIDE - off % WIDE) % WIDE;
    if head + WIDE > len {
        return (len, 0);
    }
    (head, (len - head) / WIDE * WIDE)
}

/// `spans` (DMA address, length) cut into descriptors of at most
/// [`DESC_MAX`] bytes: the table's segments are no longer than that, but
/// an IOMMU may join them past it.
fn descriptors(spans: impl Iterator<Item = (u64, usize)>) -> impl Iterator<Item = (u64, usize)> {
    spans.flat_map(|(addr, len)| {
        (0..len)
            .step_by(DESC_MAX)
            .map(move |at| (addr + at as u64, (len - at).min(DESC_MAX)))
    })
}

/// BAR0 and BAR4 of one bound PCI function, and its DMA queue.
#[pin_data]
pub(crate) struct PciIo {
    info: &'static ArchInfo,
    /// The function, for its configuration space.
    pdev: ARef<pci::Device>,
    bar0: DevresBar,
    bar4: Devres<WcBar>,
    /// Bus address of BAR4, where a process's mapping of it points.
    bar4_start: u64,
    /// BAR0 offset of the MISC RAM; `MISC_RAM_SIZE` bytes from there are in BAR0.
    misc_ram: usize,
    bar4_size: u64,
    present: Atomic<bool>,
    /// Whether bytes move by DMA (the `dma` parameter at probe).
    dma_on: bool,
    /// The DMA queue, one transfer at a time; `None` with the `dma`
    /// parameter off, and once the function is unbound.
    #[pin]
    dma: Mutex<Option<H2tQueue>>,
}

impl PciIo {
    /// Maps BAR0 uncached and BAR4 write-combining and, unless the `dma`
    /// parameter is off, sets the function's DMA mask and allocates its
    /// queue's memory.
    pub(super) fn map(
        pdev: &pci::Device<Core<'_>>,
        info: &'static ArchInfo,
        bar4_size: u64,
    ) -> Result<Arc<Self>> {
        let queue = if crate::use_dma() {
            dma_mask::set_at_probe(pdev, info.dma.host_bits)?;
            Some(H2tQueue::new(pdev.as_ref(), &info.dma)?)
        } else {
            None
        };
        let bar0 = pdev.iomap_region(BAR_APB, c"neuron_hbm")?.into_devres()?;
        let bar4 = WcBar::map(pdev, BAR_DRAM, c"neuron_hbm")?;
        let bar4_start = pdev.resource_start(BAR_DRAM)?;
        let misc_ram = usize::try_from(info.bar0_misc_ram)?;
        Arc::pin_init(
            try_pin_init!(Self {
                info,
                pdev: pdev.into(),
                bar0,
                bar4,
                bar4_start,
                misc_ram,
                bar4_size,
                present: Atomic::new(true),
                dma_on: queue.is_some(),
                dma <- new_mutex!(queue),
            }),
            GFP_KERNEL,
        )
    }

    fn with_bar0<R>(&self, f: impl FnOnce(&Bar<'_>) -> Result<R>) -> Result<R> {
        if !self.present.load(Relaxed) {
            return Err(ENODEV);
        }
        let guard = self.bar0.try_access().ok_or(ENODEV)?;
        f(&guard)
    }

    fn with_bar4<R>(&self, f: impl FnOnce(&WcBar) -> Result<R>) -> Result<R> {
        if !self.present.load(Relaxed) {
            return Err(ENODEV);
        }
        let guard = self.bar4.try_access().ok_or(ENODEV)?;
        f(&guard)
    }

    /// Marks the function gone (it is being unbound): every access from
    /// now on answers `ENODEV`, and no new page of BAR4 is mapped.
    pub(super) fn set_gone(&self) {
        self.present.store(false, Relaxed);
    }

    /// Frees the DMA queue's memory while the function is still bound,
    /// once no transfer runs any more (unbind waits them out first).
    pub(super) fn release_dma(&self) {
        self.dma.lock().take();
    }

    /// Stages `batch` (at most [`BATCH`] pairs) behind the batches in
    /// flight on `queue`, first ringing what is staged and waiting for the
    /// oldest batch to end while the ring has no room. Rings it at once
    /// when the engine has nothing rung to run; else it waits, staged,
    /// behind the batch running, for the next ring ([`PciIo::dma_wait`]):
    /// the batches staged meanwhile share a pair of doorbells, and the
    /// engine still finds the next batch rung when it ends one.
    fn dma_post(&self, queue: &mut H2tQueue, batch: &[(End, End, usize)]) -> Result {
        while !queue.has_room(batch.len()) {
            self.dma_wait(queue)?;
        }
        self.with_bar0(|b| {
            let running = queue.running();
            queue.stage(b.as_view(), batch)?;
            match running {
                true => Ok(()),
                false => queue.ring(b.as_view()),
            }
        })
    }

    /// Rings what is staged on `queue` and waits for its oldest batch
    /// ([`H2tQueue::wait`]).
    fn dma_wait(&self, queue: &mut H2tQueue) -> Result {
        self.with_bar0(|b| queue.ring(b.as_view()))?;
        // A function removed by surprise completes nothing: its
        // configuration space reads all ones.
        queue.wait(&|| !self.config_present())
    }

    /// Adds `pair` to `pairs` (allocating with `flags`), first posting the
    /// pairs on `queue` as a batch when they fill one: a full batch goes to
    /// the engine while the next is built.
    fn dma_add(
        &self,
        queue: &mut H2tQueue,
        pairs: &mut KVVec<(End, End, usize)>,
        pair: (End, End, usize),
        flags: Flags,
    ) -> Result {
        if pairs.len() == BATCH {
            self.dma_post(queue, pairs)?;
            pairs.clear();
        }
        pairs.push(pair, flags)?;
        Ok(())
    }

    /// Posts the pairs [`PciIo::dma_add`] left in `pairs`, if any.
    fn dma_post_rest(&self, queue: &mut H2tQueue, pairs: &[(End, End, usize)]) -> Result {
        match pairs.is_empty() {
            true => Ok(()),
            false => self.dma_post(queue, pairs),
        }
    }

    /// Ends a run of batches on `queue` whose posts gave `posted`: rings
    /// what is staged and waits for every batch in flight. On a failure
    /// with a batch in flight, rung or only staged, the queue is stopped
    /// (and set up again at the next batch), so nothing posted outlives the
    /// pages it names: `ETIMEDOUT` once a batch outlives its time, `ENODEV`
    /// when the function is gone meanwhile.
    fn dma_end(&self, queue: &mut H2tQueue, posted: Result) -> Result {
        let ended = posted.and_then(|()| {
            while queue.busy() {
                self.dma_wait(queue)?;
            }
            Ok(())
        });
        ended.map_err(|e| {
            if !queue.busy() {
                return e;
            }
            // Stopped even if BAR0 is gone: the next batch starts over.
            let _ = self.with_bar0(|b| queue.stop(b.as_view()));
            // Marks a function that is gone as such, as a transfer's end
            // does (`ENODEV` from then on).
            match self.confirm_present() {
                Ok(()) => e,
                Err(gone) => gone,
            }
        })
    }

    /// Runs `pairs` through `queue` in batches of at most [`BATCH`], each
    /// posted while the one before runs, and waits for them all
    /// ([`PciIo::dma_end`]).
    fn dma_run(&self, queue: &mut H2tQueue, pairs: &[(End, End, usize)]) -> Result {
        let posted = pairs
            .chunks(BATCH)
            .try_for_each(|b| self.dma_post(queue, b));
        self.dma_end(queue, posted)
    }

    /// Writes `src` to device address `pa` by DMA, through the bounce
    /// buffer one descriptor at a time.
    fn dma_write(&self, queue: &mut H2tQueue, pa: u64, src: &[u8]) -> Result {
        for (i, piece) in src.chunks(DESC_MAX).enumerate() {
            queue.copy_in(piece)?;
            let dst = End::Device(pa + (i * DESC_MAX) as u64);
            self.dma_run(queue, &[(End::Bounce(0), dst, piece.len())])?;
        }
        Ok(())
    }

    /// Reads device address `pa` into `dst` by DMA, through the bounce
    /// buffer.
    fn dma_read(&self, queue: &mut H2tQueue, pa: u64, dst: &mut [u8]) -> Result {
        for (i, piece) in dst.chunks_mut(DESC_MAX).enumerate() {
            let src = End::Device(pa + (i * DESC_MAX) as u64);
            self.dma_run(queue, &[(src, End::Bounce(0), piece.len())])?;
            queue.copy_out(piece)?;
        }
        Ok(())
    }

    /// Zeroes each of `ranges` (device address, length) by DMA from the
    /// queue's zero page, [`BATCH`] descriptors a doorbell: many small
    /// ranges cost the doorbells of one.
    fn dma_zero(&self, queue: &mut H2tQueue, ranges: &[(u64, u64)]) -> Result {
        let mut pairs = KVVec::with_capacity(BATCH, GFP_KERNEL)?;
        let mut post_all = || {
            for &(pa, len) in ranges {
                let mut done = 0u64;
                while done < len {
                    let n = (len - done).min(DESC_MAX as u64) as usize;
                    let pair = (End::Zeros, End::Device(pa + done), n);
                    self.dma_add(queue, &mut pairs, pair, GFP_KERNEL)?;
                    done += n as u64;
                }
            }
            self.dma_post_rest(queue, &pairs)
        };
        let posted = post_all();
        self.dma_end(queue, posted)
    }

    /// Moves each part's user pages to (`to_device`) or from its BAR4
    /// offset by DMA in place, each segment of their scatter-gather table
    /// one descriptor pair (physically contiguous pages one segment of up
    /// to [`DESC_MAX`]), as few batches as the pairs need. `ENODEV` once
    /// the queue is gone (the function is unbound).
    fn dma_user(&self, parts: &[(u64, &UserPages)], to_device: bool) -> Result {
        let mut guard = self.dma.lock();
        let queue = Option::as_mut(&mut *guard).ok_or(ENODEV)?;
        // Declared first, dropped last: no mapping goes before the batches
        // that name it have ended or the queue is stopped.
        let mut maps = KVec::with_capacity(parts.len(), GFP_KERNEL_ACCOUNT)?;
        let mut pairs = KVVec::with_capacity(BATCH, GFP_KERNEL_ACCOUNT)?;
        let mut post_all = || {
            for &(off, pages) in parts {
                let mut at = addr::bar4_to_pa(self.info, off)?;
                maps.push(
                    pages.map(queue.dma_device(), DESC_MAX as u32)?,
                    GFP_KERNEL_ACCOUNT,
                )?;
                let mapped = maps.last().ok_or(EINVAL)?;
                for (addr, n) in descriptors(mapped.spans()) {
                    let (host, dev) = (End::Host(addr), End::Device(at));
                    let pair = if to_device {
                        (host, dev, n)
                    } else {
                        (dev, host, n)
                    };
                    self.dma_add(queue, &mut pairs, pair, GFP_KERNEL_ACCOUNT)?;
                    at += n as u64;
                }
            }
            self.dma_post_rest(queue, &pairs)
        };
        let posted = post_all();
        self.dma_end(queue, posted)
    }

    /// Runs `copy(bar, bar_offset, from, n)` over the `len` bytes of a
    /// pinned user piece at BAR4 offset `off`, [`XFER_CHUNK`] bytes at a
    /// time, each with its own access to BAR4: the access holds off the
    /// BAR's release (an RCU read-side section), which a CPU read of BAR4,
    /// waiting for the device, makes long.
    fn cpu_pages(
        &self,
        off: u64,
        len: usize,
        mut copy: impl FnMut(&WcBar, usize, usize, usize) -> Result,
    ) -> Result {
        let off = usize::try_from(off)?;
        (0..len).step_by(XFER_CHUNK).try_for_each(|from| {
            let n = (len - from).min(XFER_CHUNK);
            self.with_bar4(|b| copy(b, off + from, from, n))
        })
    }

    /// Writes the next `len` bytes of `src` to BAR4 offset `off` with the
    /// CPU, [`XFER_CHUNK`] bytes at a time, each inside `gate` with its own
    /// access to BAR4, straight from the process's memory with page faults
    /// off ([`WcBar::store_user`]): nothing is pinned. A page not present is
    /// faulted in outside the gate ([`UserSource::copy_next_unfaulted`]), so
    /// a buffer that faults slowly holds off no device reset. Pinning cost
    /// as much as a seventh of the copy (about 50 µs a MiB against 330 in
    /// the bench's PCI guest).
    fn cpu_write_user(&self, off: u64, src: &mut UserSource, len: usize, gate: Gate<'_>) -> Result {
        let off = usize::try_from(off)?;
        (0..len).step_by(XFER_CHUNK).try_for_each(|start| {
            let n = (len - start).min(XFER_CHUNK);
            src.copy_next_unfaulted(n, |at, from, left| {
                let mut missed = left;
                gate(&mut || {
                    missed = self.with_bar4(|b| b.store_user(off + start + from, at, left))?;
                    Ok(())
                })?;
                Ok(missed)
            })
        })
    }

    /// Runs `op` with the DMA queue and the device address of BAR4 offset
    /// `off`; `None` when bytes go through BAR4 instead.
    fn with_dma(&self, off: u64, op: impl FnOnce(&mut H2tQueue, u64) -> Result) -> Option<Result> {
        let mut guard = self.dma.lock();
        let queue = Option::as_mut(&mut *guard)?;
        Some(addr::bar4_to_pa(self.info, off).and_then(|pa| op(queue, pa)))
    }
}

impl DeviceIo for PciIo {
    fn with_misc_ram(&self, f: &mut dyn FnMut(MiscRam<'_>)) -> Result {
        self.with_bar0(|b| {
            // Mapped while the access guard `b` lives, i.e. for this call.
            let window = mmio_window::<MISC_RAM_SIZE>(b.as_view(), self.misc_ram)?;
            f(IoSysMap::Io(window));
            Ok(())
        })
    }

    fn bar4_write(&self, off: u64, src: &[u8]) -> Result {
        check_range(off, src.len() as u64, self.bar4_size)?;
        if let Some(r) = self.with_dma(off, |q, pa| self.dma_write(q, pa, src)) {
            return r;
        }
        let off = off as usize;
        let (head, len) = aligned_part(off, src.len());
        self.with_bar4(|b| {
            let narrow = |i: usize| b.try_write8(src[i], off + i);
            (0..head).try_for_each(narrow)?;
            if len > 0 {
                bar4::write_words(b, off + head, &src[head..head + len])?;
            }
            (head + len..src.len()).try_for_each(narrow)
        })
    }

    fn bulk_piece(&self) -> usize {
        if self.dma_on {
            BULK_PIECE
        } else {
            CPU_PIECE
        }
    }

    fn bar4_write_from_user(
        &self,
        off: u64,
        src: &mut UserSource,
        len: usize,
        bounce: &mut Bounce,
        gate: Gate<'_>,
    ) -> Result {
        check_range(off, len as u64, self.bar4_size)?;
        if !self.dma_on {
            return self.cpu_write_user(off, src, len, gate);
        }
        // Pinned outside the gate (pinning may fault pages in); memory that
        // cannot be pinned (an I/O mapping) is copied instead.
        match src.pin_next(len) {
            Ok(pages) => gate(&mut || self.dma_user(&[(off, &pages)], true)),
            Err(_) => write_through_bounce(self, off, src, len, bounce, gate),
        }
    }

    fn bar4_read_to_user(
        &self,
        off: u64,
        dst: &mut UserSink,
        len: usize,
        bounce: &mut Bounce,
        gate: Gate<'_>,
    ) -> Result {
        check_range(off, len as u64, self.bar4_size)?;
        match dst.pin_next(len) {
            Ok(pages) if self.dma_on => gate(&mut || self.dma_user(&[(off, &pages)], false)),
            Ok(pages) => gate(&mut || {
                self.cpu_pages(off, len, |b, at, from, n| b.load_pages(at, &pages, from, n))
            }),
            Err(_) => read_through_bounce(self, off, dst, len, bounce, gate),
        }
    }

    fn bar4_write_gathered(&self, parts: &[(u64, UserPtr, usize)], gate: Gate<'_>) -> Result {
        if !self.dma_on {
            return write_each(self, parts, gate);
        }
        // Pinned outside the gate, as one piece is; a part that cannot be
        // pinned is copied on its own.
        let mut pinned = KVec::with_capacity(parts.len(), GFP_KERNEL_ACCOUNT)?;
        for &(off, at, len) in parts {
            check_range(off, len as u64, self.bar4_size)?;
            match UserPages::pin(at, len, false) {
                Ok(pages) => pinned.push((off, pages), GFP_KERNEL_ACCOUNT)?,
                Err(_) => write_each(self, &[(off, at, len)], gate)?,
            }
        }
        let mut refs = KVec::with_capacity(pinned.len(), GFP_KERNEL_ACCOUNT)?;
        for (off, pages) in &pinned {
            refs.push((*off, pages), GFP_KERNEL_ACCOUNT)?;
        }
        gate(&mut || self.dma_user(&refs, true))
    }

    fn bar4_read(&self, off: u64, dst: &mut [u8]) -> Result {
        check_range(off, dst.len() as u64, self.bar4_size)?;
        if let Some(r) = self.with_dma(off, |q, pa| self.dma_read(q, pa, dst)) {
            return r;
        }
        let off = off as usize;
        let (head, len) = aligned_part(off, dst.len());
        self.with_bar4(|b| {
            for i in Iterator::chain(0..head, head + len..dst.len()) {
                dst[i] = b.try_read8(off + i)?;
            }
            if len > 0 {
                bar4::read_words(b, off + head, &mut dst[head..head + len])?;
            }
            Ok(())
        })
    }

    fn bar4_zero(&self, off: u64, len: u64) -> Result {
        check_range(off, len, self.bar4_size)?;
        if let Some(r) = self.with_dma(off, |q, pa| self.dma_zero(q, &[(pa, len)])) {
            return r;
        }
        let (off, total) = (off as usize, len as usize);
        let (head, len) = aligned_part(off, total);
        // Zeros straight from a register: no buffer to allocate or fill.
        self.with_bar4(|b| {
            let narrow = |i: usize| b.try_write8(0, off + i);
            (0..head).try_for_each(narrow)?;
            if len > 0 {
                bar4::zero_words(b, off + head, len)?;
            }
            (head + len..total).try_for_each(narrow)
        })
    }

    fn bar4_zero_gathered(&self, parts: &[(u64, u64)]) -> Result {
        let mut ranges = KVec::with_capacity(parts.len(), GFP_KERNEL_ACCOUNT)?;
        for &(off, len) in parts {
            check_range(off, len, self.bar4_size)?;
            ranges.push((addr::bar4_to_pa(self.info, off)?, len), GFP_KERNEL_ACCOUNT)?;
        }
        let mut guard = self.dma.lock();
        match Option::as_mut(&mut *guard) {
            Some(queue) => self.dma_zero(queue, &ranges),
            None => {
                drop(guard);
                zero_each(self, parts)
            }
        }
    }

    fn engines_reset(&self) {
        if let Some(queue) = Option::as_mut(&mut *self.dma.lock()) {
            queue.forget();
        }
    }

    fn bar4_backing(&self) -> Backing {
        Backing::Io
    }

    fn bar4_map_page(&self, off: u64, insert: &mut dyn FnMut(usize) -> Result) -> Result {
        // The BAR stays requested until the function is unbound, and
        // unbinding takes every mapping away (`Device::revoke_mappings`)
        // after this flag falls and before the BAR is released; a fault
        // racing it runs as a transfer piece (`Device::map_page`), which
        // the revocation waits out before it unmaps, so a page it inserts
        // is taken away with the rest.
        if !self.present.load(Relaxed) {
            return Err(ENODEV);
        }
        check_range(off, PAGE_SIZE as u64, self.bar4_size)?;
        if off % PAGE_SIZE as u64 != 0 {
            return Err(EINVAL);
        }
        let pfn = (self.bar4_start + off) >> PAGE_SHIFT;
        insert(usize::try_from(pfn)?)
    }

    fn is_present(&self) -> bool {
        self.present.load(Relaxed) && self.bar0.try_access().is_some()
    }

    fn config_present(&self) -> bool {
        pci_presence::is_present(&self.pdev)
    }

    fn confirm_present(&self) -> Result {
        let io: &dyn DeviceIo = self;
        let id = io.misc_ram(|mb| u32::from(mb.read(DEVICE_ID)))?;
        // All ones alone may be a transient (a link retraining): the
        // function is gone only when its configuration space is too.
        if id == GONE && !self.config_present() {
            // Removed by surprise: no read answers any more, and none will.
            self.present.store(false, Relaxed);
            return Err(ENODEV);
        }
        Ok(())
    }
}

#[kunit_tests(neuron_hbm_pci)]
mod tests {
    use super::*;

    #[test]
    fn transfers_split_into_bytes_words_and_bytes() {
        // No aligned word inside: every byte on its own.
        assert_eq!(aligned_part(0, 2), (2, 0));
        assert_eq!(aligned_part(1, 1), (1, 0));
        assert_eq!(aligned_part(7, 8), (8, 0));
        assert_eq!(aligned_part(0, 0), (0, 0));
        // Head, words, tail.
        assert_eq!(aligned_part(0, 16), (0, 16));
        assert_eq!(aligned_part(3, 20), (5, 8));
        assert_eq!(aligned_part(7, 9), (1, 8));
        assert_eq!(aligned_part(8, 65536), (0, 65536));
    }

    #[test]
    fn segments_are_cut_into_descriptors() {
        let page = 4096usize;
        let spans = [
            (0x1000u64, 100),
            (0x9000, DESC_MAX),
            (0x10_0000, 2 * DESC_MAX + 5),
        ];
        let mut out = KVec::new();
        for s in descriptors(spans.into_iter()) {
            out.push(s, GFP_KERNEL).unwrap();
        }
        let max = DESC_MAX as u64;
        assert_eq!(
            &out[..],
            &[
                (0x1000, 100),
                (0x9000, DESC_MAX),
                (0x10_0000, DESC_MAX),
                (0x10_0000 + max, DESC_MAX),
                (0x10_0000 + 2 * max, 5),
            ]
        );
        assert_eq!(descriptors([(0u64, page)].into_iter()).count(), 1);
    }
}
