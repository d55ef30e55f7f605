// SPDX-License-Identifier: GPL-2.0-only

//! Placement: every record of a validated plan gets its fixed device PA once.
//! Fresh HBM is scrubbed on allocation (the simulated device discards pages
//! instead of writing zeros), payloads stream from the blob to BAR4, list
//! tables are written last. Any failure drops the half-built [`Plan`], whose
//! destructor gives every chunk back: a failed load leaves no trace.

use super::{
    blob::{BlobSource, Part},
    index::VarIndex,
    parse::{Backing, ParsedPlan, Placement, Record},
    uploads::{Scrub, Uploads},
    Plan, Remotes, Var, NO_CHUNK,
};
use crate::{
    abstractions::{current, resched},
    arch::addr::sbuf_window,
    device::{ChunkLine, Device, Listed, PlanSummary},
    pool::{
        hints::FitHints,
        mempool::{Chunk, SMALL_ALLOC_MAX},
        Grid,
    },
    uapi::PA_UNSTAGED,
};
use kernel::{
    alloc::kvec::PushError,
    prelude::*,
    rbtree::RBTreeNodeReservation,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
};

/// Serial numbers of plans, for telemetry.
static NEXT_SERIAL: Atomic<u64> = Atomic::new(1);

/// Places every record of `parsed` on `dev` in HBM `channel`, uploading
/// payloads from `src`. `remotes` holds the plans the REMOTE records name
/// (checked with [`Remotes::check`]); the plan keeps them. `plan_id` and the
/// current process are recorded for telemetry.
pub(crate) fn stage(
    dev: &Arc<Device>,
    parsed: ParsedPlan,
    src: &(impl BlobSource + ?Sized),
    channel: usize,
    remotes: Remotes,
    plan_id: u32,
) -> Result<Plan> {
    dev.fault.point(ENOMEM)?;
    let ParsedPlan {
        local_scratch,
        shared_scratch,
        records,
        list_targets,
        index,
    } = parsed;
    let mut vars = KVVec::with_capacity(records.len(), GFP_KERNEL_ACCOUNT)?;
    let mut plan = Plan::new(dev, index, remotes, channel)?;
    if local_scratch > 0 {
        plan.local_scratch_pa = plan.alloc_scratch(channel, local_scratch)?;
    }
    if shared_scratch > 0 {
        plan.shared_scratch_pa = plan.alloc_scratch(channel, shared_scratch)?;
    }
    place_records(dev, &mut plan, &mut vars, &records, src, channel)?;
    alias_pointers(&records, &mut vars)?;
    write_list_tables(dev, plan.reset_epoch, &records, &list_targets, &vars)?;
    plan.vars = vars;
    plan.register(dev, plan_id)?;
    Ok(plan)
}

impl Plan {
    /// An empty plan on `dev` in HBM `channel`, holding `remotes`, its
    /// variables found by `index`.
    fn new(dev: &Arc<Device>, index: VarIndex, remotes: Remotes, channel: usize) -> Result<Self> {
        // Waits out a device reset under way; EIO in "reset state unknown".
        let reset_epoch = dev.ready_epoch()?;
        // The REMOTE targets were live when their references were taken; a
        // reset that began since (and that the wait above let end) wiped them.
        remotes.check_epoch(reset_epoch)?;
        Ok(Self {
            dev: dev.clone(),
            vars: KVVec::new(),
            index,
            chunks: KVVec::with_capacity(1, GFP_KERNEL_ACCOUNT)?,
            scratch: KVec::with_capacity(2, GFP_KERNEL_ACCOUNT)?,
            local_scratch_pa: PA_UNSTAGED,
            shared_scratch_pa: PA_UNSTAGED,
            bytes: 0,
            channel,
            serial: 0,
            reset_epoch,
            depth: remotes.depth(),
            remotes,
        })
    }

    /// Lists the staged plan in the device's telemetry as plan `plan_id` of
    /// the current process.
    fn register(&mut self, dev: &Device, plan_id: u32) -> Result {
        let summary = PlanSummary {
            serial: NEXT_SERIAL.fetch_add(1, Relaxed),
            pid: current::tgid(),
            plan_id,
            vars: self.vars.len() as u32,
            bytes: self.bytes,
            kmem: self.footprint() as u64,
        };
        let mut chunks = KVVec::with_capacity(self.chunk_count(), GFP_KERNEL_ACCOUNT)?;
        for (i, c) in Iterator::chain(self.chunks.iter(), self.scratch.iter()).enumerate() {
            if i % resched::EVERY == 0 {
                resched::checkpoint()?;
            }
            let line = ChunkLine {
                channel: c.channel() as u32,
                region: c.region() as u32,
                pa: c.pa(),
                size: c.size(),
            };
            // Cannot fail: there is room for every chunk.
            chunks.push_within_capacity(line).map_err(|_| ENOMEM)?;
        }
        let node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        let listed = Listed { summary, chunks };
        dev.plans
            .lock()
            .insert(node.into_node(summary.serial, listed));
        self.serial = summary.serial;
        Ok(())
    }

    /// Allocates `size` bytes aligned to `align` in HBM `channel` for the
    /// plan's variables, as one of the run of allocations `hints` follows
    /// if given: its PA, or `Ok(None)` when no region has room.
    fn alloc(
        &mut self,
        channel: usize,
        size: u64,
        align: u64,
        mut hints: Option<&mut FitHints>,
    ) -> Result<Option<u64>> {
        let regions = 0..self.dev.grid.geometry().regions;
        let alloc = |grid: &Grid, r| grid.alloc(channel, r, size, align, hints.as_deref_mut());
        Ok(self
            .take_chunk(channel, regions, ChunkList::Vars, alloc)?
            .map(|(pa, _)| pa))
    }

    /// Allocates a scratchpad of `size` bytes in HBM `channel`, from the
    /// last region down, and scrubs it: its PA, `ENOMEM` when no region has
    /// room.
    fn alloc_scratch(&mut self, channel: usize, size: u64) -> Result<u64> {
        let regions = (0..self.dev.grid.geometry().regions).rev();
        let alloc = |grid: &Grid, r| grid.alloc_scratch(channel, r, size);
        let (pa, size) = self
            .take_chunk(channel, regions, ChunkList::Scratch, alloc)?
            .ok_or(ENOMEM)?;
        // On failure the plan's destructor gives the chunk back.
        self.dev.zero(self.reset_epoch, pa, size)?;
        Ok(pa)
    }

    /// Takes a chunk of HBM `channel` from the first of `regions` that
    /// `alloc` finds room in, charges it to the current task's dmem cgroup,
    /// lists it in `list` and counts its bytes: its `(pa, size)`, or
    /// `Ok(None)` when no region has room. A dmem refusal (`EAGAIN`) is an
    /// error like any other, never "no room", and leaves nothing allocated.
    fn take_chunk(
        &mut self,
        channel: usize,
        regions: impl Iterator<Item = usize>,
        list: ChunkList,
        mut alloc: impl FnMut(&Grid, usize) -> Result<Chunk>,
    ) -> Result<Option<(u64, u64)>> {
        self.dev.fault.point(ENOMEM)?;
        let grid = &self.dev.grid;
        let dmem = self.dev.dmem_region(channel)?;
        for r in regions {
            let mut c = match alloc(grid, r) {
                Ok(c) => c,
                Err(e) if e == ENOMEM => continue,
                Err(e) => return Err(e),
            };
            // The chunk carries its own charge until it is freed.
            if let Err(e) = c.charge_to(dmem) {
                grid.free(c);
                return Err(e);
            }
            let (pa, size) = (c.pa(), c.size());
            // Each list has room for what staging allocates (`chunks` for
            // the arena or every allocating record, `scratch` for both
            // scratchpads); were it full, the chunk goes back rather than
            // stay allocated and unlisted.
            let listed = match list {
                ChunkList::Vars => self.chunks.push_within_capacity(c),
                ChunkList::Scratch => self.scratch.push_within_capacity(c),
            };
            if let Err(PushError(c)) = listed {
                grid.free(c);
                return Err(ENOMEM);
            }
            self.bytes += size;
            return Ok(Some((pa, size)));
        }
        Ok(None)
    }
}

/// Which of a plan's chunk lists a new chunk joins.
#[derive(Clone, Copy)]
enum ChunkList {
    /// The chunks of its variables (or of their arena).
    Vars,
    /// Its scratchpads.
    Scratch,
}

/// Gives every record its PA and size in `vars`, in record order. Pointers
/// are left unplaced for [`alias_pointers`].
fn place_records(
    dev: &Device,
    plan: &mut Plan,
    vars: &mut KVVec<Var>,
    records: &[Record],
    src: &(impl BlobSource + ?Sized),
    channel: usize,
) -> Result {
    let mut allocs = Allocs::start(dev, plan, records, channel)?;
    for (i, rec) in records.iter().enumerate() {
        if i % resched::EVERY == 0 {
            resched::checkpoint()?;
        }
        let mut chunk = NO_CHUNK;
        let mut read_only = false;
        let (pa, size) = match rec.placement {
            Placement::Alloc | Placement::List { .. } => {
                let pa;
                (pa, chunk) = allocs.place(plan, rec, src, channel)?;
                (pa, rec.size)
            }
            Placement::Scratch { backing, offset } => {
                let base = match backing {
                    Backing::Local => plan.local_scratch_pa,
                    Backing::Shared => plan.shared_scratch_pa,
                };
                (base + offset, rec.size)
            }
            Placement::Sb { nc, offset } => {
                let (base, _) = sbuf_window(dev.info, nc as usize).ok_or(EINVAL)?;
                (base + offset, rec.size)
            }
            Placement::Remote { var_id, plan_id } => {
                let t = plan.remotes.var(plan_id, var_id)?;
                read_only = t.read_only;
                (t.pa, alias_size(rec.size, t.size)?)
            }
            Placement::Ptr { .. } => (PA_UNSTAGED, rec.size),
        };
        let mr_type = rec.mr_type;
        let var = Var {
            pa,
            size,
            mr_type,
            chunk,
            read_only,
        };
        vars.push(var, GFP_KERNEL_ACCOUNT)?;
    }
    allocs.finish(src)
}

/// Where the allocating records of a plan go: packed into one arena, like
/// the runtime's per-model allocator (one grid chunk per plan keeps staging
/// linear and per-variable bookkeeping small), or, for a plan too large for
/// one region, one chunk each; a small record aligned beyond its pages is a
/// chunk of its own ([`stands_alone`]). Every byte is written once: padding
/// and tails are scrubbed, payloads uploaded.
struct Allocs<'a> {
    /// Base and size of the arena, if there is one.
    arena: Option<(u64, u64)>,
    /// First byte of the arena not yet scrubbed or written.
    done: u64,
    min_alloc: u64,
    /// Where the searches for the records' own chunks resume.
    hints: FitHints,
    scrub: Scrub<'a>,
    uploads: Uploads,
}

impl<'a> Allocs<'a> {
    /// Lays out and allocates the arena of `records` for `plan`, or makes
    /// room for one chunk per record.
    fn start(dev: &'a Device, plan: &mut Plan, records: &[Record], channel: usize) -> Result<Self> {
        let min_alloc = dev.grid.geometry().min_alloc;
        let layout = Arena::layout(records, min_alloc)?;
        let arena = match layout {
            Some(a) if a.records > 1 => plan
                .alloc(channel, a.size, a.align, None)?
                .map(|base| (base, a.size)),
            _ => None,
        };
        // Room for every chunk still to come, so pushes cannot fail: one per
        // record that stands alone and, without an arena, one per record
        // that would have been in it.
        let alone = records
            .iter()
            .filter(|r| r.allocates() && stands_alone(r, min_alloc))
            .count();
        let packed = match arena {
            Some(_) => 0,
            None => layout.map_or(0, |a| a.records),
        };
        plan.chunks.reserve(alone + packed, GFP_KERNEL_ACCOUNT)?;
        Ok(Self {
            arena,
            done: 0,
            min_alloc,
            hints: FitHints::new(),
            scrub: Scrub::new(dev, plan.reset_epoch),
            uploads: Uploads::new(),
        })
    }

    /// Places the allocating record `rec`, uploading its payload from `src`:
    /// its PA and the index of its chunk in the plan's list.
    fn place(
        &mut self,
        plan: &mut Plan,
        rec: &Record,
        src: &(impl BlobSource + ?Sized),
        channel: usize,
    ) -> Result<(u64, u32)> {
        let packed = self.arena.filter(|_| !stands_alone(rec, self.min_alloc));
        let (pa, gap_from, end) = match packed {
            Some((base, _)) => {
                let off = align_up(self.done, rec.alignment.max(self.min_alloc))?;
                (base + off, base + self.done, base + off + rec.size)
            }
            None => {
                self.hints.reserve()?;
                let hints = Some(&mut self.hints);
                let pa = plan
                    .alloc(channel, rec.size, rec.alignment, hints)?
                    .ok_or(ENOMEM)?;
                let fresh = plan.chunks.last().map_or(rec.size, |c| c.size());
                (pa, pa, pa + fresh)
            }
        };
        self.scrub.add(gap_from, pa)?;
        if rec.data_len > 0 {
            let part = Part {
                pa,
                off: rec.data_off,
                len: rec.data_len,
            };
            let (dev, staged_at) = (self.scrub.dev, self.scrub.staged_at);
            self.uploads.add(dev, staged_at, src, part)?;
        }
        self.scrub.add(pa + rec.data_len, end)?;
        if let Some((base, _)) = packed {
            self.done = end - base;
        }
        // The arena is the plan's first chunk; else this record's is its last.
        let chunk = match packed {
            Some(_) => 0,
            None => plan.chunks.len() - 1,
        };
        Ok((pa, u32::try_from(chunk)?))
    }

    /// Uploads the payloads still waiting and scrubs what is left of the
    /// arena.
    fn finish(mut self, src: &(impl BlobSource + ?Sized)) -> Result {
        let (dev, staged_at) = (self.scrub.dev, self.scrub.staged_at);
        self.uploads.flush(dev, staged_at, src)?;
        if let Some((base, size)) = self.arena {
            self.scrub.add(base + self.done, base + size)?;
        }
        self.scrub.flush()
    }
}

/// Points every pointer at its (non-pointer) target.
fn alias_pointers(records: &[Record], vars: &mut [Var]) -> Result {
    for (i, rec) in records.iter().enumerate() {
        if let Placement::Ptr { target } = rec.placement {
            let t = vars[target as usize];
            vars[i].pa = t.pa;
            vars[i].size = alias_size(rec.size, t.size)?;
            vars[i].read_only = t.read_only;
        }
    }
    Ok(())
}

/// Entries of a list table written to the device per BAR4 write.
const LIST_ENTRIES_PER_WRITE: usize = 512;
/// Bytes of one list table entry (a little-endian device PA).
const LIST_ENTRY_BYTES: usize = size_of::<u64>();

/// Writes the list tables through BAR4 (for a plan staged at reset epoch
/// `staged_at`): the PAs of what they list.
fn write_list_tables(
    dev: &Device,
    staged_at: u64,
    records: &[Record],
    targets: &[u32],
    vars: &[Var],
) -> Result {
    let piece_bytes = LIST_ENTRIES_PER_WRITE * LIST_ENTRY_BYTES;
    let mut table = KVec::from_elem(0u8, piece_bytes, GFP_KERNEL_ACCOUNT)?;
    for (i, rec) in records.iter().enumerate() {
        if i % resched::EVERY == 0 {
            resched::checkpoint()?;
        }
        if let Placement::List { first, count } = rec.placement {
            let listed = &targets[first as usize..(first + count) as usize];
            for (k, piece) in listed.chunks(LIST_ENTRIES_PER_WRITE).enumerate() {
                for (entry, &t) in table.chunks_exact_mut(LIST_ENTRY_BYTES).zip(piece) {
                    entry.copy_from_slice(&vars[t as usize].pa.to_le_bytes());
                }
                let at = vars[i].pa + (k * piece_bytes) as u64;
                dev.write(staged_at, at, &table[..piece.len() * LIST_ENTRY_BYTES])?;
            }
        }
    }
    Ok(())
}

/// One contiguous allocation holding every allocating record of a plan.
#[derive(Clone, Copy)]
struct Arena {
    size: u64,
    align: u64,
    /// Allocating records packed into it.
    records: usize,
}

impl Arena {
    /// Packs the allocating records that do not stand alone in order, each
    /// at its alignment (at least `min_alloc`, as a chunk of its own would
    /// be), into a size that is a multiple of the largest alignment. `None`
    /// without any.
    fn layout(records: &[Record], min_alloc: u64) -> Result<Option<Self>> {
        let mut end = 0u64;
        let mut align = min_alloc;
        let mut count = 0;
        let packed = |r: &&Record| r.allocates() && !stands_alone(r, min_alloc);
        for rec in records.iter().filter(packed) {
            let a = rec.alignment.max(min_alloc);
            end = align_up(end, a)?.checked_add(rec.size).ok_or(ENOMEM)?;
            align = align.max(a);
            count += 1;
        }
        // Rounded up to its alignment, as the grid rounds every chunk.
        Ok((count > 0).then_some(Self {
            size: align_up(end, align)?,
            align,
            records: count,
        }))
    }
}

/// Whether the allocating record `rec` is a chunk of its own rather than
/// part of its plan's arena: a record of at most the small pool's
/// threshold whose alignment exceeds its pages. Packed, it would cost its
/// alignment; alone in the small pool it costs its pages, placed aligned,
/// and the gaps between such records stay free for other small chunks.
fn stands_alone(rec: &Record, min_alloc: u64) -> bool {
    rec.size
        .checked_next_multiple_of(min_alloc)
        .is_some_and(|pages| pages <= SMALL_ALLOC_MAX && rec.alignment > pages)
}

/// `v` rounded up to the power of two `a`; `ENOMEM` on overflow.
fn align_up(v: u64, a: u64) -> Result<u64> {
    v.checked_add(a - 1).map(|x| x & !(a - 1)).ok_or(ENOMEM)
}

/// Size of an alias: its own if given (and within its target), else the target's.
fn alias_size(own: u64, target: u64) -> Result<u64> {
    match own {
        0 => Ok(target),
        s if s <= target => Ok(s),
        _ => Err(EINVAL),
    }
}

#[kunit_tests(neuron_hbm_plan_stage)]
mod tests {
    use super::*;
    use crate::{
        arch::addr::sbuf_window,
        arch::{GIB, MIB, V2},
        device::tree_batch::walk,
        plan::{mr_type::MrType, parse::parse, test_blob::TestBlob},
        uapi::MAX_REMOTE_DEPTH,
    };

    fn device() -> Result<Arc<Device>> {
        device_with(2)
    }

    fn device_with(regions: usize) -> Result<Arc<Device>> {
        Device::new_test_sim(regions)
    }

    fn used(dev: &Device) -> u64 {
        (0..2)
            .flat_map(|ch| (0..2).map(move |r| (ch, r)))
            .map(|(ch, r)| dev.grid.stats(ch, r).map_or(0, |s| s.used))
            .sum()
    }

    fn load(dev: &Arc<Device>, b: &TestBlob, ch: usize) -> Result<Plan> {
        load_over(dev, b, ch, None)
    }

    /// Loads `b` with every REMOTE record naming `target`.
    fn load_over(
        dev: &Arc<Device>,
        b: &TestBlob,
        ch: usize,
        target: Option<&Arc<Plan>>,
    ) -> Result<Plan> {
        load_over_as(dev, b, ch, target, false)
    }

    /// Loads `b` with every REMOTE record naming `target`, which the
    /// loading file holds `read_only` or not.
    fn load_over_as(
        dev: &Arc<Device>,
        b: &TestBlob,
        ch: usize,
        target: Option<&Arc<Plan>>,
        read_only: bool,
    ) -> Result<Plan> {
        let bytes = b.build()?;
        let parsed = parse(&bytes[..], dev.info)?;
        let mut remotes = Remotes::wanted(&parsed)?;
        remotes.take(|_| Ok((target.cloned().ok_or(ENOENT)?, read_only)))?;
        remotes.check(&parsed)?;
        stage(dev, parsed, &bytes[..], ch, remotes, 1)
    }

    fn read_u64(dev: &Device, pa: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        dev.read(0, pa, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    #[test]
    fn every_kind_is_placed() -> Result {
        let dev = device()?;
        let mut b = TestBlob::new(MIB, 2 * MIB);
        let w = b.rec(MrType::Buffer, 1, 10_000)?;
        b.recs[w].alignment = 2 * MIB;
        b.payload(w, b"weights!")?;
        b.rec(MrType::Input, 2, 4096)?;
        let v = b.rec(MrType::VirtualTmpBuf, 3, 4096)?;
        b.recs[v].u = [8192, 1];
        let p = b.rec(MrType::Ptr, 4, 0)?;
        b.recs[p].u = [1, 0];
        let l = b.rec(MrType::List, 5, 24)?;
        b.list(l, &[1, 3, 4])?;
        let t = b.rec(MrType::PtrTable, 6, 8)?;
        b.list(t, &[5])?;
        let s = b.rec(MrType::Sb, 7, 4096)?;
        b.recs[s].u = [1, 4096];
        let r = b.rec(MrType::Remote, 8, 0)?;
        b.recs[r].u = [1 | (9 << 32), 0];
        let mut tb = TestBlob::new(0, 0);
        tb.rec(MrType::Buffer, 1, 8192)?;
        let target = Arc::new(load(&dev, &tb, 0)?, GFP_KERNEL)?;
        let plan = load_over(&dev, &b, 1, Some(&target))?;

        let pa = |id| plan.resolve(id, 0, 0);
        let w_pa = pa(1)?;
        assert!((64 * GIB..80 * GIB).contains(&w_pa)); // channel 1
        assert_eq!(w_pa % (2 * MIB), 0);
        let mut head = [0u8; 10];
        dev.read(0, w_pa, &mut head)?;
        assert_eq!(&head, b"weights!\0\0"); // payload, then scrubbed bytes
        assert_eq!(pa(3)?, plan.shared_scratch_pa + 8192);
        assert_eq!(pa(4)?, w_pa); // pointer aliases its target
        assert_eq!(plan.var(4)?.size, 10_000);
        let list = pa(5)?;
        assert_eq!(read_u64(&dev, list)?, w_pa);
        assert_eq!(read_u64(&dev, list + 8)?, pa(3)?);
        assert_eq!(read_u64(&dev, list + 16)?, w_pa);
        assert_eq!(read_u64(&dev, pa(6)?)?, list);
        assert_eq!(pa(7)?, sbuf_window(&V2, 1).unwrap().0 + 4096);
        assert_eq!(pa(8)?, target.resolve(1, 0, 0)?);
        assert_eq!(plan.var(8)?.size, 8192);
        assert!(plan.vars().iter().all(|v| v.pa != PA_UNSTAGED));
        // Scratchpads sit at the top of channel 1's main pool, below its
        // small pool (the top GiB), the local one above.
        assert_eq!(plan.local_scratch_pa, 79 * GIB - MIB);
        assert_eq!(plan.shared_scratch_pa, plan.local_scratch_pa - 2 * MIB);
        // Var 1, small and aligned beyond its pages, stands alone; the rest
        // of what the plan allocates lies in its arena; the others in no
        // chunk.
        assert_eq!(plan.chunk_of(plan.var(1)?), Some((w_pa, 12 * 1024)));
        let arena = plan.chunk_of(plan.var(2)?).ok_or(EINVAL)?;
        for id in 2..=8 {
            let v = plan.var(id)?;
            let want = v.mr_type.allocates().then_some(arena);
            assert_eq!(plan.chunk_of(v), want);
        }
        Ok(())
    }

    #[test]
    fn remote_target_lives_as_long_as_its_referrer() -> Result {
        let dev = device()?;
        let before = used(&dev);
        let mut tb = TestBlob::new(0, 0);
        tb.rec(MrType::Buffer, 1, 8192)?;
        let target = Arc::new(load(&dev, &tb, 0)?, GFP_KERNEL)?;
        let held = used(&dev);
        let mut b = TestBlob::new(0, 0);
        let r = b.rec(MrType::Remote, 1, 0)?;
        b.recs[r].u = [1 | (5 << 32), 0];
        let referrer = load_over(&dev, &b, 0, Some(&target))?;
        // The last other reference goes: the memory stays while reachable.
        drop(target);
        assert_eq!(used(&dev), held);
        drop(referrer);
        assert_eq!(used(&dev), before);
        Ok(())
    }

    #[test]
    fn windows_onto_a_read_only_plan_are_read_only() -> Result {
        let dev = device()?;
        let mut tb = TestBlob::new(0, 0);
        tb.rec(MrType::Buffer, 1, 8192)?;
        let target = Arc::new(load(&dev, &tb, 0)?, GFP_KERNEL)?;
        let mut b = TestBlob::new(0, 0);
        let r = b.rec(MrType::Remote, 1, 0)?;
        b.recs[r].u = [1 | (5 << 32), 0];
        let p = b.rec(MrType::Ptr, 2, 0)?;
        b.recs[p].u = [1, 0];
        b.rec(MrType::Buffer, 3, 4096)?;
        for read_only in [false, true] {
            let plan = load_over_as(&dev, &b, 0, Some(&target), read_only)?;
            let want = if read_only { Err(EACCES) } else { Ok(()) };
            assert_eq!(plan.check_writable(1), want); // the REMOTE
            assert_eq!(plan.check_writable(2), want); // a PTR to it
            assert_eq!(plan.check_writable(3), Ok(())); // its own buffer
            assert_eq!(plan.resolve(1, 0, 8192)?, target.resolve(1, 0, 8192)?);
        }
        Ok(())
    }

    #[test]
    fn remote_chains_are_bounded() -> Result {
        let dev = device()?;
        let mut tb = TestBlob::new(0, 0);
        tb.rec(MrType::Buffer, 1, 4096)?;
        let first = Arc::new(load(&dev, &tb, 0)?, GFP_KERNEL)?;
        let mut last = first.clone();
        let mut b = TestBlob::new(0, 0);
        let r = b.rec(MrType::Remote, 1, 0)?;
        b.recs[r].u = [1 | (5 << 32), 0];
        for _ in 0..MAX_REMOTE_DEPTH {
            last = Arc::new(load_over(&dev, &b, 0, Some(&last))?, GFP_KERNEL)?;
        }
        assert_eq!(last.depth, MAX_REMOTE_DEPTH);
        assert_eq!(load_over(&dev, &b, 0, Some(&last)).err(), Some(E2BIG));
        // A missing variable of a present plan is refused before staging.
        b.recs[r].u = [2 | (5 << 32), 0];
        let before = used(&dev);
        assert_eq!(load_over(&dev, &b, 0, Some(&first)).err(), Some(ENOENT));
        assert_eq!(used(&dev), before);
        Ok(())
    }

    #[test]
    fn remote_into_a_plan_wiped_by_a_reset_is_refused() -> Result {
        let dev = device()?;
        let mut tb = TestBlob::new(0, 0);
        tb.rec(MrType::Buffer, 1, 4096)?;
        let target = Arc::new(load(&dev, &tb, 0)?, GFP_KERNEL)?;
        // The reference is taken after the reset here, as it is when the
        // reset ends between PLAN_LOAD taking it and staging.
        crate::device::Device::reset(
            &dev,
            crate::hw::fw::ResetKind::Device,
            0,
            crate::device::reset_batch::ADMIN_FOR_TESTS,
        )?;
        let mut b = TestBlob::new(0, 0);
        let r = b.rec(MrType::Remote, 1, 0)?;
        b.recs[r].u = [1 | (5 << 32), 0];
        let before = used(&dev);
        assert_eq!(load_over(&dev, &b, 0, Some(&target)).err(), Some(EIO));
        assert_eq!(used(&dev), before);
        Ok(())
    }

    #[test]
    fn resolve_is_bounds_checked() -> Result {
        let dev = device()?;
        let mut b = TestBlob::new(0, 0);
        b.rec(MrType::Buffer, 1, 4096)?;
        let p = b.rec(MrType::Ptr, 2, 0)?;
        b.recs[p].u = [1, 0];
        let plan = load(&dev, &b, 0)?;
        let base = plan.resolve(1, 0, 0)?;
        assert_eq!(plan.resolve(1, 4095, 1), Ok(base + 4095));
        assert_eq!(plan.resolve(1, 4096, 0), Ok(base + 4096));
        assert_eq!(plan.resolve(1, 4095, 2), Err(EINVAL));
        assert_eq!(plan.resolve(1, u64::MAX, 2), Err(EINVAL));
        assert_eq!(plan.resolve(1, 1, u64::MAX), Err(EINVAL));
        assert_eq!(plan.resolve(2, 0, 4096), Ok(base));
        assert_eq!(plan.resolve(2, 8, 8), Err(EINVAL)); // pointer: offset must be 0
        assert_eq!(plan.resolve(3, 0, 0), Err(ENOENT));
        Ok(())
    }

    #[test]
    fn failure_halfway_leaves_nothing() -> Result {
        let dev = device()?;
        let before = used(&dev);
        let mut b = TestBlob::new(MIB, 0);
        b.rec(MrType::Buffer, 1, 4096)?;
        b.payload(0, &[1; 100])?;
        b.rec(MrType::Buffer, 2, 20 * GIB)?; // larger than any region
        assert_eq!(load(&dev, &b, 0).err(), Some(ENOMEM));
        assert_eq!(used(&dev), before);
        // An alias larger than its target fails after everything is placed.
        let mut b = TestBlob::new(MIB, 0);
        b.rec(MrType::Buffer, 1, 4096)?;
        let p = b.rec(MrType::Ptr, 2, 8192)?;
        b.recs[p].u = [1, 0];
        assert_eq!(load(&dev, &b, 0).err(), Some(EINVAL));
        assert_eq!(used(&dev), before);
        Ok(())
    }

    #[test]
    fn dropping_a_plan_frees_it() -> Result {
        let dev = device()?;
        let before = used(&dev);
        let mut b = TestBlob::new(MIB, MIB);
        b.rec(MrType::Buffer, 1, 3 * MIB)?;
        b.rec(MrType::TmpBuf, 2, 4096)?;
        let plan = load(&dev, &b, 0)?;
        assert_eq!(plan.bytes, 5 * MIB + 4096);
        assert_eq!(used(&dev), before + plan.bytes);
        // One arena for both records plus the two scratchpads.
        assert_eq!(plan.chunk_count(), 3);
        drop(plan);
        assert_eq!(used(&dev), before);
        Ok(())
    }

    #[test]
    fn plans_unloaded_out_of_order_free_their_scratchpads() -> Result {
        let dev = device()?;
        let mut b = TestBlob::new(MIB, 0);
        b.rec(MrType::Buffer, 1, 4096)?;
        let first = load(&dev, &b, 0)?;
        let second = load(&dev, &b, 0)?;
        assert_eq!(second.local_scratch_pa, first.local_scratch_pa - MIB);
        // Unloaded first, the upper plan's scratchpad is freed at once: a
        // plan below it (another tenant's, perhaps) does not hold it.
        let second_bytes = second.bytes;
        let top = first.local_scratch_pa;
        drop(first);
        assert_eq!(used(&dev), second_bytes);
        // Its hole is the next scratchpad's place.
        let third = load(&dev, &b, 0)?;
        assert_eq!(third.local_scratch_pa, top);
        drop(second);
        drop(third);
        assert_eq!(used(&dev), 0);
        Ok(())
    }

    #[test]
    fn fresh_memory_never_shows_old_bytes() -> Result {
        let dev = device()?;
        let mut b = TestBlob::new(0, 0);
        let w = b.rec(MrType::Buffer, 1, 4096)?;
        b.payload(w, &[0xa5; 4096])?;
        let plan = load(&dev, &b, 0)?;
        let pa = plan.resolve(1, 0, 0)?;
        drop(plan);
        let mut b = TestBlob::new(0, 0);
        b.rec(MrType::Buffer, 1, 4096)?;
        let plan = load(&dev, &b, 0)?;
        assert_eq!(plan.resolve(1, 0, 0)?, pa); // the same place, scrubbed
        let mut back = [0xffu8; 64];
        dev.read(0, pa, &mut back)?;
        assert_eq!(back, [0u8; 64]);
        Ok(())
    }

    #[test]
    fn arena_is_scrubbed_around_payloads() -> Result {
        let dev = device()?;
        // Dirty the place where the next plan's arena lands.
        let mut b = TestBlob::new(0, 0);
        let w = b.rec(MrType::Buffer, 1, 64 * 1024)?;
        b.payload(w, &KVec::from_elem(0xa5u8, 64 * 1024, GFP_KERNEL)?)?;
        let plan = load(&dev, &b, 0)?;
        let base = plan.resolve(1, 0, 0)?;
        drop(plan);
        // Records without payload around one with: padding, the payload's
        // tail and the arena's tail are all scrubbed, the payload kept.
        let mut b = TestBlob::new(0, 0);
        b.rec(MrType::Buffer, 1, 100)?;
        let p = b.rec(MrType::Buffer, 2, 8192)?;
        b.payload(p, b"weights")?;
        b.rec(MrType::Buffer, 3, 5000)?;
        b.rec(MrType::Buffer, 4, 3)?;
        let plan = load(&dev, &b, 0)?;
        assert_eq!(plan.resolve(1, 0, 0)?, base);
        assert!(plan.bytes <= 64 * 1024);
        let mut back = KVec::from_elem(0xffu8, plan.bytes as usize, GFP_KERNEL)?;
        dev.read(0, base, &mut back)?;
        let at = (plan.resolve(2, 0, 0)? - base) as usize;
        let want = |i: usize| match i.checked_sub(at) {
            Some(k) if k < 7 => b"weights"[k],
            _ => 0,
        };
        let wrong = back.iter().enumerate().position(|(i, &x)| x != want(i));
        assert_eq!(wrong, None);
        Ok(())
    }

    #[test]
    fn records_share_one_arena() -> Result {
        let dev = device()?;
        let mut b = TestBlob::new(0, 0);
        b.rec(MrType::Buffer, 1, 100)?;
        let big = b.rec(MrType::Buffer, 2, 3 * MIB)?;
        b.recs[big].alignment = 2 * MIB;
        b.rec(MrType::Input, 3, 4096)?;
        let plan = load(&dev, &b, 0)?;
        assert_eq!(plan.chunk_count(), 1);
        let (a, c) = (plan.resolve(1, 0, 0)?, plan.resolve(2, 0, 0)?);
        assert_eq!(c % (2 * MIB), 0);
        assert!(c >= a + 4096);
        assert_eq!(plan.resolve(3, 0, 0)?, c + 3 * MIB);
        // 5 MiB + 4 KiB of records, rounded up to the 2 MiB alignment.
        assert_eq!(c + 3 * MIB + 4096 - a, 5 * MIB + 4096);
        assert_eq!(plan.bytes, 6 * MIB);
        // Each variable's chunk is the arena (what a mapping may reach).
        for id in 1..=3 {
            assert_eq!(plan.chunk_of(plan.var(id)?), Some((a, 6 * MIB)));
        }
        Ok(())
    }

    /// A SHARDED window lies in its core's shard of the shared scratchpad;
    /// a MAIN one is HBM of the plan's own, in its arena.
    #[test]
    fn sharded_and_main_scratch_are_placed() -> Result {
        let dev = device()?;
        let mut b = TestBlob::new(0, 2 * MIB);
        b.rec(MrType::Buffer, 1, 4096)?;
        let sharded = b.rec(MrType::VirtualTmpBuf, 2, 4096)?;
        b.recs[sharded].u = [8192, 2 | (1 << 32)];
        let main = b.rec(MrType::VirtualTmpBuf, 3, 64 * 1024)?;
        b.recs[main].u = [0, 3];
        let plan = load(&dev, &b, 0)?;
        assert_eq!(plan.resolve(2, 0, 0)?, plan.shared_scratch_pa + MIB + 8192);
        let arena = plan.resolve(1, 0, 0)?;
        let main_pa = plan.resolve(3, 0, 0)?;
        assert_eq!(main_pa, arena + 4096);
        assert_eq!(plan.chunk_of(plan.var(3)?), Some((arena, 68 * 1024)));
        assert_eq!(plan.bytes, 2 * MIB + 68 * 1024);
        Ok(())
    }

    /// Small records aligned beyond their pages are chunks of their own in
    /// the small pool, charged their pages; the rest share the arena.
    #[test]
    fn small_overaligned_records_stand_alone() -> Result {
        let dev = device()?;
        let mut b = TestBlob::new(0, 0);
        b.rec(MrType::Buffer, 1, 100)?;
        for id in 2..10 {
            let r = b.rec(MrType::Buffer, id, 4096)?;
            b.recs[r].alignment = 64 * 1024;
        }
        b.payload(1, b"aligned")?; // var 2
        b.rec(MrType::Input, 10, 8192)?;
        let plan = load(&dev, &b, 0)?;
        assert_eq!(plan.chunk_count(), 9);
        assert_eq!(plan.bytes, 8 * 4096 + 3 * 4096);
        assert_eq!(used(&dev), plan.bytes);
        let arena = plan.resolve(1, 0, 0)?;
        assert_eq!(plan.resolve(10, 0, 0)?, arena + 4096);
        for id in 2..10 {
            let pa = plan.resolve(id, 0, 0)?;
            assert_eq!(pa % (64 * 1024), 0);
            assert_eq!(plan.chunk_of(plan.var(id)?), Some((pa, 4096)));
        }
        let mut back = [0xffu8; 8];
        dev.read(0, plan.resolve(2, 0, 0)?, &mut back)?;
        assert_eq!(&back, b"aligned\0");
        Ok(())
    }

    #[test]
    fn plan_larger_than_a_region_falls_back_to_chunks() -> Result {
        let dev = device()?; // 8 GiB regions
        let mut b = TestBlob::new(0, 0);
        b.rec(MrType::Buffer, 1, 5 * GIB)?;
        b.rec(MrType::Buffer, 2, 5 * GIB)?;
        let plan = load(&dev, &b, 0)?;
        assert_eq!(plan.chunk_count(), 2);
        let (a, c) = (plan.resolve(1, 0, 0)?, plan.resolve(2, 0, 0)?);
        assert!(a < 8 * GIB && c >= 8 * GIB); // one per region

        // Each variable's chunk is its own.
        assert_eq!(plan.chunk_of(plan.var(1)?), Some((a, 5 * GIB)));
        assert_eq!(plan.chunk_of(plan.var(2)?), Some((c, 5 * GIB)));
        Ok(())
    }

    #[test]
    fn telemetry_lists_every_chunk_of_every_plan() -> Result {
        let dev = device()?;
        let mut plans = KVec::new();
        // Plans of one arena, of a scratchpad and an arena, and of none
        // (a State Buffer window only).
        for scratch in [0, MIB, 0] {
            let mut b = TestBlob::new(scratch, 0);
            let kind = match plans.len() {
                2 => MrType::Sb,
                _ => MrType::Buffer,
            };
            b.rec(kind, 1, 4096)?;
            plans.push(load(&dev, &b, 0)?, GFP_KERNEL)?;
        }
        let mut seen = KVec::new();
        walk(
            (0, 0),
            |at| dev.chunks_from(at),
            |c| seen.push(c, GFP_KERNEL),
        )?;
        let mut spans = KVec::new();
        for c in seen.iter() {
            assert_eq!(c.channel, 0);
            spans.push((c.region, c.pa, c.size), GFP_KERNEL)?;
        }
        let arena = |p: &Plan| {
            let (pa, size) = p.chunk_of(p.var(1)?).ok_or(EINVAL)?;
            Ok::<_, Error>((0, pa, size))
        };
        // Scratchpads come from the last region down.
        let want = [
            arena(&plans[0])?,
            arena(&plans[1])?,
            (1, plans[1].local_scratch_pa, MIB),
        ];
        assert_eq!(&spans[..], &want[..]);
        Ok(())
    }

    #[test]
    fn v3_v4_plans_on_the_last_channel() -> Result {
        for info in [&crate::arch::V3, &crate::arch::V4] {
            let dev = Device::new_test_sim_of(info, 2)?;
            let mut b = TestBlob::new(MIB, 0);
            let w = b.rec(MrType::Buffer, 1, 8192)?;
            b.payload(w, b"far away")?;
            let s = b.rec(MrType::Sb, 2, 4096)?;
            b.recs[s].u = [7, 0]; // the eighth NeuronCore
            let plan = load(&dev, &b, 3)?;
            let pa = plan.resolve(1, 0, 0)?;
            assert!(pa >= info.channel_base[3] && pa < info.channel_base[3] + info.channel_size);
            let mut back = [0u8; 8];
            dev.read(0, pa, &mut back)?;
            assert_eq!(&back, b"far away");
            // BAR4: channel 3 sits at 192 GiB.
            let off = crate::arch::addr::bar4_offset(info, pa, 8)?;
            assert_eq!(off, 192 * GIB + (pa - info.channel_base[3]));
            assert_eq!(plan.resolve(2, 0, 0)?, sbuf_window(info, 7).unwrap().0);
            assert!(plan.local_scratch_pa >= info.channel_base[3]);
            // fdinfo counts the plan's bytes on the channel it names.
            assert_eq!(plan.channel(), 3);
        }
        Ok(())
    }

    #[test]
    fn twelve_gib_stays_sparse() -> Result {
        let dev = device_with(1)?;
        let mut b = TestBlob::new(0, 0);
        b.rec(MrType::Buffer, 1, 12 * GIB)?;
        b.rec(MrType::Buffer, 2, 4096)?;
        let plan = load(&dev, &b, 1)?;
        assert_eq!(plan.var(1)?.size, 12 * GIB);
        assert_eq!(dev.sim().map(|s| s.bar4_resident_pages()), Some(0));
        Ok(())
    }
}
