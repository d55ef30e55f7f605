// SPDX-License-Identifier: GPL-2.0-only

//! One open file's mappings of its own plans' variables (`mmap(2)` on the
//! device node): the offsets MAP_OFFSET hands out, the mmap check, the
//! pages a fault fills, and their revocation when a plan is unloaded.
//!
//! A variable's offset is its first page's device PA: unique on the device
//! among live chunks, so taking one plan's range away from the file's
//! address space (its own, [`Space`]) touches no other plan's mapping. A
//! variable of a plan the file imported maps read-only. A fault finds its variable in the faulting
//! file's own table, never anyone else's, and fills it through the reset
//! gate ([`Device::map_page`]), so a device reset or removal can wait out
//! faults in flight and take every page away after them
//! ([`Device::revoke_mappings`]).

use crate::{
    abstractions::resched,
    abstractions::trace,
    abstractions::vma::{Backing, Fault, NewMapping, Space},
    device::Device,
    plan::{mr_type::MrType, Plan},
};
use kernel::{
    new_mutex,
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, Mutex},
};

/// Pages one fault of a BAR mapping fills (the faulting one and those after
/// it in the variable): a copy through a fresh mapping then takes a fault
/// per 64 KiB, not per page.
const PREFAULT: u64 = 16;

/// A mappable variable: pages `first..=` its key of the file's offsets.
pub(crate) struct Entry {
    /// The plan it belongs to, held while the variable is listed.
    plan: Arc<Plan>,
    /// First page of the file offset (its device PA's page).
    first: u64,
    /// Device PA of that page.
    pa: u64,
    /// Whether the file may only read it (its plan is an import).
    read_only: bool,
}

/// The mappable variables of one open file, by last page.
type Table = RBTree<u64, Entry>;

/// Room for one more listed variable, taken before any lock.
pub(crate) type Slot = RBTreeNodeReservation<u64, Entry>;

/// The entry whose pages include `pgoff`: `(last page, entry)`.
fn find(t: &Table, pgoff: u64) -> Result<(u64, &Entry)> {
    let last = *t.cursor_lower_bound(&pgoff).ok_or(EINVAL)?.current().0;
    let e = t.get(&last).ok_or(EINVAL)?;
    if e.first <= pgoff {
        Ok((last, e))
    } else {
        Err(EINVAL)
    }
}

/// One open file's mappable variables and its address space.
#[pin_data(PinnedDrop)]
pub(crate) struct FileMaps {
    space: Arc<Space>,
    #[pin]
    table: Mutex<Table>,
}

impl FileMaps {
    /// No variable mappable yet, in the file's address space `space`.
    pub(crate) fn new(space: Arc<Space>) -> impl PinInit<Self> {
        pin_init!(Self {
            space,
            table <- new_mutex!(RBTree::new()),
        })
    }

    /// Room for one more listed variable, charged to the caller.
    pub(crate) fn slot() -> Result<Slot> {
        RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)
    }

    /// The mmap offset and mappable size of variable `var_id` of `plan`, a
    /// live plan of this file (the caller holds the file's plan table, so
    /// the plan cannot be unloaded meanwhile), listed for mmap if it was
    /// not. `EINVAL` unless the variable is of non-zero size and either
    /// one the plan allocates, starting on a page, whose last page lies in
    /// the same chunk, or a VIRTUAL_TMP_BUF, whose plan's scratchpad is
    /// listed whole (its variables overlap one another, and every page of
    /// it is the plan's own) and which is mapped from the page its first
    /// byte is in. A mapping never reaches another plan's memory or free
    /// space. A variable listed `read_only` (of a plan the file imported)
    /// maps only without write access, unless the file also lists it as
    /// its own.
    pub(crate) fn offset(
        &self,
        plan: &Arc<Plan>,
        var_id: u32,
        node: Slot,
        read_only: bool,
    ) -> Result<(u64, u64)> {
        plan.check_live()?;
        let var = plan.var(var_id)?;
        let page = PAGE_SIZE as u64;
        if var.size == 0 {
            return Err(EINVAL);
        }
        let end = var
            .pa
            .checked_add(var.size)
            .and_then(|e| e.checked_next_multiple_of(page))
            .ok_or(EINVAL)?;
        // What is listed: the variable's own pages (in its chunk), or the
        // scratchpad of a scratch variable without one.
        let (pa, listed_end) = match plan.chunk_of(var) {
            Some((start, size)) => {
                if var.pa % page != 0 || end > start + size {
                    return Err(EINVAL);
                }
                (var.pa, end)
            }
            None if var.mr_type == MrType::VirtualTmpBuf => {
                let (start, size) = plan.scratch_of(var).ok_or(EINVAL)?;
                let stop = start + size;
                if start % page != 0 || stop % page != 0 {
                    return Err(EINVAL);
                }
                (start, stop)
            }
            None => return Err(EINVAL),
        };
        let (first, last) = (pa >> PAGE_SHIFT, (listed_end >> PAGE_SHIFT) - 1);
        let mut t = self.table.lock();
        let next = t.cursor_lower_bound_mut(&first);
        match next {
            // Listed already, by an earlier call: writable if either is.
            Some(mut c) if *c.current().0 == last && c.current().1.first == first => {
                c.current_mut().1.read_only &= read_only;
            }
            // Variables placed in the same pages: a page is listed once.
            Some(c) if c.current().1.first <= last => return Err(EINVAL),
            _ => {
                let entry = Entry {
                    plan: plan.clone(),
                    first,
                    pa,
                    read_only,
                };
                t.insert(node.into_node(last, entry));
            }
        }
        let at = var.pa >> PAGE_SHIFT;
        Ok((at << PAGE_SHIFT, ((end >> PAGE_SHIFT) - at) << PAGE_SHIFT))
    }

    /// Accepts `mmap(2)` of `map` if it is shared and lies inside one listed
    /// variable of a live plan (`EINVAL`, `EIO` after a device reset,
    /// `ENODEV` once the device is gone), without write access to one the
    /// file may only read (`EACCES`; nor can `mprotect` add it); says what
    /// backs its pages.
    pub(crate) fn check_map(&self, dev: &Device, map: &NewMapping<'_>) -> Result<Backing> {
        if !map.shared() {
            return Err(EINVAL);
        }
        let first = map.pgoff();
        let last = first
            .checked_add(map.pages().checked_sub(1).ok_or(EINVAL)?)
            .ok_or(EINVAL)?;
        let t = self.table.lock();
        let (end, e) = find(&t, first)?;
        if last > end {
            return Err(EINVAL);
        }
        if e.read_only {
            map.forbid_writes()?;
        }
        e.plan.check_live()?;
        dev.check_present()?;
        Ok(dev.io().bar4_backing())
    }

    /// Fills page `pgoff` of a mapping of this file (and, on a BAR, up to
    /// [`PREFAULT`] pages after it in the same variable): `EINVAL` when no
    /// listed variable holds it any more (unloaded), `EIO` after a device
    /// reset, `ENODEV` once the device is gone. Runs under the table's
    /// lock, which [`FileMaps::revoke_plan`] takes before it unmaps.
    pub(crate) fn fault(&self, dev: &Device, pgoff: u64, fault: &Fault<'_>) -> Result {
        let mut pages = 0;
        let res = self.fill(dev, pgoff, fault, &mut pages);
        trace::map_fault(dev.index, pgoff, pages, &res);
        res
    }

    /// [`FileMaps::fault`], counting the pages it mapped in `pages`.
    fn fill(&self, dev: &Device, pgoff: u64, fault: &Fault<'_>, pages: &mut u32) -> Result {
        let t = self.table.lock();
        let (last, e) = find(&t, pgoff)?;
        let count = match dev.io().bar4_backing() {
            Backing::Io => PREFAULT.min(last - pgoff + 1),
            Backing::Pages => 1,
        };
        for p in pgoff..pgoff + count {
            let pa = e.pa + ((p - e.first) << PAGE_SHIFT);
            let res = dev.map_page(e.plan.reset_epoch(), pa, &mut |pfn| fault.insert(p, pfn));
            match res {
                Err(err) if p == pgoff => return Err(err),
                // The mapping ends there, or the device stopped: the
                // faulting page is in.
                Err(_) => break,
                Ok(()) => *pages += 1,
            }
        }
        Ok(())
    }

    /// Takes every mapping of `plan`'s variables away (their processes get
    /// `SIGBUS` at their next access) and unlists them: called when the
    /// plan is unloaded, before its memory is freed. Costs the plan's
    /// chunks, and nothing for a file that never listed a variable.
    pub(crate) fn revoke_plan(&self, plan: &Plan) {
        let page = PAGE_SIZE as u64;
        let mut t = self.table.lock();
        if t.iter().next().is_none() {
            return;
        }
        // Chunks and entries looked at: one chunk may hold a million.
        let mut steps = 0usize;
        let mut step = || {
            steps += 1;
            if steps % resched::EVERY == 0 {
                resched::yield_now();
            }
        };
        for (pa, size) in plan.var_chunks() {
            step();
            let (first, end) = (pa / page, (pa + size).div_ceil(page));
            let mut any = false;
            let mut cursor = t.cursor_lower_bound_mut(&first);
            while let Some(c) = cursor {
                step();
                let e = c.current().1;
                if e.first >= end {
                    break;
                }
                if core::ptr::eq(&*e.plan, plan) {
                    any = true;
                    cursor = c.remove_current().0;
                } else {
                    cursor = c.move_next();
                }
            }
            if any {
                self.space.unmap(first * page, (end - first) * page);
            }
        }
    }
}

#[pinned_drop]
impl PinnedDrop for FileMaps {
    /// Unlists the variables one by one, offering to reschedule between
    /// them: a file may hold a million, each the last hold on its plan.
    fn drop(self: Pin<&mut Self>) {
        let mut t = self.table.lock();
        let mut n = 0usize;
        while let Some(c) = t.cursor_front_mut() {
            drop(c.remove_current());
            n += 1;
            if n % resched::EVERY == 0 {
                resched::yield_now();
            }
        }
    }
}
