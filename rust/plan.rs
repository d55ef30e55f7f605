// SPDX-License-Identifier: GPL-2.0-only

//! Static mem_ref plans. A blob is parsed and validated ([`parse`]), then
//! every variable is placed once ([`stage`]); what stays is a [`Plan`]:
//! resolving one of its variables (RESOLVE) is a lookup, a bounds check and
//! an add ([`Plan::resolve`]), and dropping it gives all of its HBM back.

pub(crate) mod blob;
pub(crate) mod ids;
pub(crate) mod index;
pub(crate) mod mr_type;
pub(crate) mod parse;
pub(crate) mod stage;
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) mod test_blob;
pub(crate) mod uploads;

use crate::{
    abstractions::resched,
    device::{ChunkLine, Device},
    plan::{
        index::VarIndex,
        mr_type::MrType,
        parse::{ParsedPlan, Placement},
    },
    pool::mempool::Chunk,
    uapi::{MAX_PLANS_PER_FILE, MAX_REMOTE_DEPTH, PA_UNSTAGED},
};
use kernel::{prelude::*, sync::Arc};

/// Kernel bytes of the rbtree nodes that list a plan in its file's table and
/// in the device's telemetry (two nodes in 64-byte slabs).
const TABLE_NODE_BYTES: usize = 2 * 64;

/// The plans a plan's REMOTE records name, each held by reference: none of
/// their memory is freed while the plan (or a transfer through it) lives.
pub(crate) struct Remotes {
    /// Plan ids in the loading file, ascending and distinct.
    ids: KVVec<u32>,
    /// The plan of each id, and whether the file holds it read-only (an
    /// import of another process's plan).
    plans: KVVec<(Arc<Plan>, bool)>,
}

impl Remotes {
    /// The distinct plan ids the REMOTE records of `parsed` name, ascending,
    /// with room for their plans reserved. More distinct ids than a file can
    /// hold plans name a plan that does not exist (`ENOENT`), which also
    /// bounds the cost of keeping them sorted.
    pub(crate) fn wanted(parsed: &ParsedPlan) -> Result<Self> {
        let mut ids = KVVec::new();
        for rec in parsed.records.iter() {
            if let Placement::Remote { plan_id, .. } = rec.placement {
                if let Err(at) = ids.binary_search(&plan_id) {
                    if ids.len() >= MAX_PLANS_PER_FILE as usize {
                        return Err(ENOENT);
                    }
                    ids.reserve(1, GFP_KERNEL_ACCOUNT)?;
                    // Cannot fail: room for one more was just made.
                    ids.insert_within_capacity(at, plan_id)
                        .map_err(|_| ENOMEM)?;
                }
            }
        }
        let plans = KVVec::with_capacity(ids.len(), GFP_KERNEL_ACCOUNT)?;
        Ok(Self { ids, plans })
    }

    /// The plan ids, ascending.
    pub(crate) fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Takes a reference on the plan of each id, in [`Remotes::ids`] order,
    /// from `lookup` (the plan, and whether it is read-only to the file;
    /// `ENOENT` for an unknown id). `E2BIG` when the chain of REMOTE plans
    /// would grow deeper than [`MAX_REMOTE_DEPTH`]. On error the references
    /// taken so far are dropped.
    pub(crate) fn take(
        &mut self,
        mut lookup: impl FnMut(u32) -> Result<(Arc<Plan>, bool)>,
    ) -> Result {
        for &id in self.ids.iter() {
            let plan = lookup(id)?;
            if plan.0.depth >= MAX_REMOTE_DEPTH {
                self.plans.clear();
                return Err(E2BIG);
            }
            // Cannot fail: room for every id was reserved.
            if self.plans.push_within_capacity(plan).is_err() {
                self.plans.clear();
                return Err(ENOMEM);
            }
        }
        Ok(())
    }

    /// `EIO` unless every plan named was staged in reset epoch `epoch`: a
    /// device reset between taking the references and staging wiped them.
    fn check_epoch(&self, epoch: u64) -> Result {
        if self.plans.iter().all(|(p, _)| p.reset_epoch == epoch) {
            Ok(())
        } else {
            Err(EIO)
        }
    }

    /// Depth of a plan naming these plans.
    fn depth(&self) -> u32 {
        self.plans
            .iter()
            .map(|(p, _)| p.depth + 1)
            .max()
            .unwrap_or(0)
    }

    /// The variable `var_id` of plan `plan_id`, read-only if the plan is
    /// to the loading file: `ENOENT` if either is unknown.
    fn var(&self, plan_id: u32, var_id: u32) -> Result<Var> {
        let i = self.ids.binary_search(&plan_id).map_err(|_| ENOENT)?;
        let (plan, read_only) = self.plans.get(i).ok_or(ENOENT)?;
        let mut var = *plan.var(var_id)?;
        var.read_only |= *read_only;
        Ok(var)
    }

    /// Checks that every REMOTE record of `parsed` names a variable that
    /// exists, before anything is allocated.
    pub(crate) fn check(&self, parsed: &ParsedPlan) -> Result {
        for rec in parsed.records.iter() {
            if let Placement::Remote { var_id, plan_id } = rec.placement {
                self.var(plan_id, var_id)?;
            }
        }
        Ok(())
    }

    fn footprint(&self) -> usize {
        let arr = |bytes: usize| {
            if bytes == 0 {
                0
            } else {
                bytes.next_power_of_two()
            }
        };
        arr(self.ids.capacity() * size_of::<u32>())
            + arr(self.plans.capacity() * size_of::<(Arc<Plan>, bool)>())
    }
}

/// A placed variable: what resolving needs, nothing more.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Var {
    /// Device PA, [`PA_UNSTAGED`] until placed.
    pub(crate) pa: u64,
    /// Bytes the variable spans.
    pub(crate) size: u64,
    /// Kind.
    pub(crate) mr_type: MrType,
    /// Index of the chunk holding it in the plan's chunk list when it
    /// allocates, else [`NO_CHUNK`]. It sits in what would be padding.
    pub(crate) chunk: u32,
    /// A window onto memory the plan's file may only read (a REMOTE into
    /// an imported plan, or a PTR to one): MEM_WRITE refuses it.
    pub(crate) read_only: bool,
}

/// [`Var::chunk`] of a variable that allocates nothing.
pub(crate) const NO_CHUNK: u32 = u32::MAX;

/// A loaded plan. Dropping it frees all of its device memory.
pub(crate) struct Plan {
    dev: Arc<Device>,
    vars: KVVec<Var>,
    index: VarIndex,
    chunks: KVVec<Chunk>,
    scratch: KVec<Chunk>,
    /// Local scratchpad PA or [`PA_UNSTAGED`].
    pub(crate) local_scratch_pa: u64,
    /// Shared scratchpad PA or [`PA_UNSTAGED`].
    pub(crate) shared_scratch_pa: u64,
    /// HBM bytes held (allocations and scratchpads).
    pub(crate) bytes: u64,
    /// The HBM channel all of them are in.
    channel: usize,
    /// Telemetry serial, 0 until registered with the device.
    serial: u64,
    /// The device's reset epoch when staging began.
    reset_epoch: u64,
    /// The plans its REMOTE records point into.
    remotes: Remotes,
    /// Longest chain of REMOTE plans below this one: 0 without REMOTE
    /// records, `d + 1` when naming a plan of depth `d`. At most
    /// [`MAX_REMOTE_DEPTH`], which bounds how deep dropping the last plan of
    /// a chain recurses.
    depth: u32,
}

impl Plan {
    /// Resolves (`var_id`, `offset`, `size`) to a device PA: a lookup, a bounds
    /// check and an add. `ENOENT` unknown variable, `EINVAL` out of bounds or a
    /// non-zero offset into a pointer.
    #[inline(always)]
    pub(crate) fn resolve(&self, var_id: u32, offset: u64, size: u64) -> Result<u64> {
        let v = self.var(var_id)?;
        match offset.checked_add(size) {
            Some(end) if end <= v.size => {}
            _ => return Err(EINVAL),
        }
        if v.mr_type == MrType::Ptr && offset != 0 {
            return Err(EINVAL);
        }
        // Nothing resolves while the sentinel holds (a loaded plan has none).
        if v.pa == PA_UNSTAGED {
            return Err(EINVAL);
        }
        v.pa.checked_add(offset).ok_or(EINVAL)
    }

    /// `EIO` once a device reset began after this plan was staged: its HBM
    /// contents are gone, so nothing of it resolves or moves any more.
    #[inline(always)]
    pub(crate) fn check_live(&self) -> Result {
        self.dev.check_epoch(self.reset_epoch)
    }

    /// The device's reset epoch when this plan was staged: what its
    /// transfers are checked against.
    pub(crate) fn reset_epoch(&self) -> u64 {
        self.reset_epoch
    }

    /// Resolves like [`Plan::resolve`] for a transfer through BAR4: `EINVAL`
    /// for a State Buffer variable, which is on-core SRAM and not HBM.
    pub(crate) fn resolve_hbm(&self, var_id: u32, offset: u64, len: u64) -> Result<u64> {
        if self.var(var_id)?.mr_type == MrType::Sb {
            return Err(EINVAL);
        }
        self.resolve(var_id, offset, len)
    }

    /// `EACCES` if variable `var_id` is a window onto memory its file may
    /// only read ([`Var::read_only`]).
    pub(crate) fn check_writable(&self, var_id: u32) -> Result {
        if self.var(var_id)?.read_only {
            Err(EACCES)
        } else {
            Ok(())
        }
    }

    /// Whether the plan's memory is on `dev`.
    pub(crate) fn is_on(&self, dev: &Device) -> bool {
        core::ptr::eq(&*self.dev, dev)
    }

    /// The variable `var_id`.
    #[inline(always)]
    pub(crate) fn var(&self, var_id: u32) -> Result<&Var> {
        Ok(&self.vars[self.index.get(var_id).ok_or(ENOENT)?])
    }

    /// Variables in record order.
    pub(crate) fn vars(&self) -> &[Var] {
        &self.vars
    }

    /// Ids (in the loading file) of the plans this one points into.
    pub(crate) fn remote_ids(&self) -> &[u32] {
        self.remotes.ids()
    }

    /// Whether `lookup` still gives, for each id of [`Plan::remote_ids`], the
    /// very plan this one holds.
    pub(crate) fn remotes_match<'a>(
        &self,
        mut lookup: impl FnMut(u32) -> Option<&'a Arc<Plan>>,
    ) -> bool {
        let r = &self.remotes;
        r.ids
            .iter()
            .zip(r.plans.iter())
            .all(|(&id, (p, _))| lookup(id).is_some_and(|q| Arc::ptr_eq(p, q)))
    }

    /// The HBM channel this plan's [`Plan::bytes`] are in.
    pub(crate) fn channel(&self) -> usize {
        self.channel
    }

    /// `(pa, size)` of the chunk holding `var`, a variable of this plan;
    /// `None` for a variable that allocates nothing.
    pub(crate) fn chunk_of(&self, var: &Var) -> Option<(u64, u64)> {
        let c = self.chunks.get(var.chunk as usize)?;
        Some((c.pa(), c.size()))
    }

    /// `(pa, size)` of the scratchpad holding all of variable `var` (a
    /// VIRTUAL_TMP_BUF), if one does.
    pub(crate) fn scratch_of(&self, var: &Var) -> Option<(u64, u64)> {
        let end = var.pa.checked_add(var.size)?;
        self.scratch
            .iter()
            .map(|c| (c.pa(), c.size()))
            .find(|&(pa, size)| pa <= var.pa && end <= pa + size)
    }

    /// `(pa, size)` of each chunk holding the plan's allocating variables
    /// (its scratchpads are not among them).
    pub(crate) fn var_chunks(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.chunks.iter().map(|c| (c.pa(), c.size()))
    }

    /// Live HBM chunks this plan holds (scratchpads included).
    pub(crate) fn chunk_count(&self) -> usize {
        self.chunks.len() + self.scratch.len()
    }

    /// Kernel bytes this plan's bookkeeping takes, each array counted at the size the allocator
    /// really hands out (kmalloc rounds up to a power of two).
    pub(crate) fn footprint(&self) -> usize {
        let arr = |bytes: usize| bytes.next_power_of_two();
        // The `Arc` around the plan adds its reference count.
        arr(size_of::<Self>() + 8)
            + TABLE_NODE_BYTES
            + self.remotes.footprint()
            + arr(self.vars.capacity() * size_of::<Var>())
            + arr(self.chunks.capacity() * size_of::<Chunk>())
            + arr(self.scratch.capacity() * size_of::<Chunk>())
            + self.index.footprint()
            + arr(self.chunk_count() * size_of::<ChunkLine>())
    }
}

impl Drop for Plan {
    fn drop(&mut self) {
        if self.serial != 0 {
            // Its telemetry goes with the lock dropped.
            let listed = self.dev.plans.lock().remove(&self.serial);
            drop(listed);
        }
        let grid = &self.dev.grid;
        // What backs each chunk goes with it (the simulated device's pages,
        // charged to whoever wrote them), not when a later scrub reaches it.
        for (i, c) in self.chunks.drain_all().enumerate() {
            if i % resched::EVERY == 0 {
                resched::yield_now();
            }
            self.dev.release(c.pa(), c.size());
            grid.free(c);
        }
        for c in self.scratch.drain_all() {
            self.dev.release(c.pa(), c.size());
            grid.free(c);
        }
    }
}
