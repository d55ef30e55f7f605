// SPDX-License-Identifier: GPL-2.0

//! Placement: every record of a validated plan gets its fixed device PA once.
//! Fresh HBM is scrubbed on allocation (the simulated device discards pages
//! instead of writing zeros), payloads stream from the blob to BAR4, list
//! tables are written last. Any failure drops the half-built [`Plan`], whose
//! destructor gives every chunk back: a failed load leaves no trace.

use super::{
    blob::BlobSource,
    index::VarIndex,
    parse::{Backing, MrType, ParsedPlan, Placement},
};
use crate::{addr::sbuf_window, device::Device, mempool::Chunk, uapi::PA_UNSTAGED};
use kernel::{prelude::*, sync::Arc};

/// A placed variable: what resolving needs, nothing more.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Var {
    /// Device PA, [`PA_UNSTAGED`] until placed.
    pub(crate) pa: u64,
    /// Bytes the variable spans.
    pub(crate) size: u64,
    /// Kind.
    pub(crate) mr_type: MrType,
}

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
}

impl Plan {
    /// Resolves (`var_id`, `offset`, `size`) to a device PA: a lookup, a bounds
    /// check and an add. `ENOENT` unknown variable, `EINVAL` out of bounds or a
    /// non-zero offset into a pointer.
    pub(crate) fn resolve(&self, var_id: u32, offset: u64, size: u64) -> Result<u64> {
        let v = &self.vars[self.index.get(var_id).ok_or(ENOENT)?];
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

    /// The variable `var_id`.
    pub(crate) fn var(&self, var_id: u32) -> Result<&Var> {
        Ok(&self.vars[self.index.get(var_id).ok_or(ENOENT)?])
    }

    /// Variables in record order.
    pub(crate) fn vars(&self) -> &[Var] {
        &self.vars
    }

    /// Live HBM chunks this plan holds (scratchpads included).
    pub(crate) fn chunk_count(&self) -> usize {
        self.chunks.len() + self.scratch.len()
    }

    fn alloc(&mut self, channel: usize, size: u64, align: u64) -> Result<u64> {
        let grid = &self.dev.grid;
        let regions = grid.geometry().regions;
        let mut last = ENOMEM;
        for r in 0..regions {
            match grid.alloc(channel, r, size, align) {
                Ok(c) => {
                    let pa = c.pa();
                    self.bytes += c.size();
                    // Cannot fail: `chunks` was sized for every allocating record.
                    let _ = self.chunks.push(c, GFP_KERNEL);
                    return Ok(pa);
                }
                Err(e) if e == ENOMEM => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    fn alloc_scratch(&mut self, channel: usize, size: u64) -> Result<u64> {
        let grid = &self.dev.grid;
        let regions = grid.geometry().regions;
        for r in (0..regions).rev() {
            match grid.alloc_scratch(channel, r, size) {
                Ok(c) => {
                    let (pa, size) = (c.pa(), c.size());
                    self.bytes += size;
                    // Cannot fail: `scratch` has room for both scratchpads.
                    let _ = self.scratch.push(c, GFP_KERNEL);
                    // On failure the plan's destructor gives the chunk back.
                    self.dev.zero(pa, size)?;
                    return Ok(pa);
                }
                Err(e) if e == ENOMEM => {}
                Err(e) => return Err(e),
            }
        }
        Err(ENOMEM)
    }
}

impl Drop for Plan {
    fn drop(&mut self) {
        let grid = &self.dev.grid;
        for c in self.chunks.drain_all() {
            if let Err((e, c)) = grid.free(c) {
                pr_err!("chunk at {:#x} not freed: {:?}\n", c.pa(), e);
                grid.retire(c);
            }
        }
        // Newest first, so the stack usually pops at once; otherwise parked.
        while let Some(c) = self.scratch.pop() {
            grid.retire(c);
        }
    }
}

/// Places every record of `parsed` on `dev` in HBM `channel`, uploading
/// payloads from `src`. `remotes` gives the targets of the REMOTE records.
pub(crate) fn stage(
    dev: &Arc<Device>,
    parsed: ParsedPlan,
    src: &(impl BlobSource + ?Sized),
    channel: usize,
    remotes: &[(u64, u64)],
) -> Result<Plan> {
    let n = parsed.records.len();
    let mut vars = KVVec::with_capacity(n, GFP_KERNEL)?;
    let allocs = parsed
        .records
        .iter()
        .filter(|r| r.mr_type.allocates())
        .count();
    let mut plan = Plan {
        dev: dev.clone(),
        vars: KVVec::new(),
        index: parsed.index,
        chunks: KVVec::with_capacity(allocs, GFP_KERNEL)?,
        scratch: KVec::with_capacity(2, GFP_KERNEL)?,
        local_scratch_pa: PA_UNSTAGED,
        shared_scratch_pa: PA_UNSTAGED,
        bytes: 0,
    };
    if parsed.local_scratch > 0 {
        plan.local_scratch_pa = plan.alloc_scratch(channel, parsed.local_scratch)?;
    }
    if parsed.shared_scratch > 0 {
        plan.shared_scratch_pa = plan.alloc_scratch(channel, parsed.shared_scratch)?;
    }

    let mut remote = remotes.iter();
    for rec in parsed.records.iter() {
        let (pa, size) = match rec.placement {
            Placement::Alloc | Placement::List { .. } => {
                let pa = plan.alloc(channel, rec.size, rec.alignment)?;
                let fresh = plan.chunks.last().map_or(rec.size, |c| c.size());
                if rec.data_len > 0 {
                    src.upload(dev, pa, rec.data_off, rec.data_len)?;
                }
                dev.zero(pa + rec.data_len, fresh - rec.data_len)?;
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
            Placement::Remote { .. } => {
                let &(pa, size) = remote.next().ok_or(EINVAL)?;
                (pa, alias_size(rec.size, size)?)
            }
            Placement::Ptr { .. } => (PA_UNSTAGED, rec.size),
        };
        vars.push(
            Var {
                pa,
                size,
                mr_type: rec.mr_type,
            },
            GFP_KERNEL,
        )?;
    }

    // Pointers alias their (non-pointer) targets.
    for (i, rec) in parsed.records.iter().enumerate() {
        if let Placement::Ptr { target } = rec.placement {
            let t = vars[target as usize];
            vars[i].pa = t.pa;
            vars[i].size = alias_size(rec.size, t.size)?;
        }
    }

    // List tables: the PAs of what they list, written through BAR4.
    let mut table = KVec::from_elem(0u8, 512 * 8, GFP_KERNEL)?;
    for (i, rec) in parsed.records.iter().enumerate() {
        if let Placement::List { first, count } = rec.placement {
            let targets = &parsed.list_targets[first as usize..(first + count) as usize];
            for (k, piece) in targets.chunks(512).enumerate() {
                for (j, &t) in piece.iter().enumerate() {
                    table[j * 8..j * 8 + 8].copy_from_slice(&vars[t as usize].pa.to_le_bytes());
                }
                dev.write(vars[i].pa + (k * 512 * 8) as u64, &table[..piece.len() * 8])?;
            }
        }
    }

    plan.vars = vars;
    Ok(plan)
}

/// Size of an alias: its own if given (and within its target), else the target's.
fn alias_size(own: u64, target: u64) -> Result<u64> {
    match own {
        0 => Ok(target),
        s if s <= target => Ok(s),
        _ => Err(EINVAL),
    }
}
