//! In-process resolve: (variable, offset, size) to a device PA without a
//! system call, from the plan and the address table PLAN_LOAD filled in.
//!
//! The rules are the kernel's (`Plan::resolve` in rust/plan/stage.rs): an
//! unknown variable is `ENOENT`; `offset + size` beyond the variable (or
//! overflowing), a non-zero offset into an MR_PTR, a variable still at
//! [`PA_UNSTAGED`] and a PA that would overflow are `EINVAL`. A pointer
//! spans its own size if it has one, else its target's; an MR_REMOTE likewise
//! spans its own size or the remote variable's.

use std::collections::HashMap;
use std::io;

use crate::device::LoadedPlan;
use crate::plan::{Kind, Plan};
use crate::uapi::PA_UNSTAGED;

/// What resolving one variable needs.
#[derive(Clone, Copy, Debug)]
struct Entry {
    pa: u64,
    size: u64,
    /// The largest offset allowed: 0 for an MR_PTR, `u64::MAX` otherwise;
    /// [`ABSENT`] marks a slot of the direct table without a variable.
    max_offset: u64,
}

const ABSENT: u64 = 1;

impl Default for Entry {
    fn default() -> Self {
        Entry {
            pa: PA_UNSTAGED,
            size: 0,
            max_offset: ABSENT,
        }
    }
}

/// Resolves the variables of one loaded plan in process.
///
/// Dense var ids index `direct` (entry `id - base`); otherwise `direct` is
/// empty and `ids` (sorted) is searched by bisection for an index into
/// `sorted`.
#[derive(Clone, Debug)]
pub struct Resolver {
    base: u32,
    direct: Vec<Entry>,
    ids: Vec<u32>,
    sorted: Vec<Entry>,
}

/// Why `e` refused a query that failed the combined test.
#[cold]
fn refusal(e: &Entry) -> i32 {
    if e.max_offset == ABSENT {
        libc::ENOENT
    } else {
        libc::EINVAL
    }
}

#[cold]
fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

/// Size of an alias: its own if given, else its target's.
fn alias_size(own: u64, target: u64) -> u64 {
    if own == 0 {
        target
    } else {
        own
    }
}

impl Resolver {
    /// A resolver for `plan` as loaded (`loaded.addrs` holds one PA per
    /// record). `remote_size(plan_id, var_id)` gives the size the remote
    /// variable of an MR_REMOTE spans (for example another resolver's
    /// [`Resolver::var_size`]); it is asked only for MR_REMOTE records of
    /// size 0. `EINVAL` if the table does not match the plan, `ENOENT` if a
    /// remote variable is unknown.
    pub fn new(
        plan: &Plan,
        loaded: &LoadedPlan,
        remote_size: impl Fn(u32, u32) -> Option<u64>,
    ) -> io::Result<Resolver> {
        let recs = &plan.records;
        if loaded.addrs.len() != recs.len() {
            return Err(errno(libc::EINVAL));
        }
        let at: HashMap<u32, usize> = recs
            .iter()
            .enumerate()
            .map(|(i, r)| (r.var_id, i))
            .collect();
        let pos = |id: u32| at.get(&id).copied();
        // Sizes of non-pointers first, then pointers, which follow their chain
        // to a non-pointer (the kernel refused cycles at load).
        let mut sizes = Vec::with_capacity(recs.len());
        for r in recs {
            sizes.push(match r.kind {
                Kind::Remote {
                    remote_var_id,
                    remote_plan_id,
                } if r.size == 0 => {
                    remote_size(remote_plan_id, remote_var_id).ok_or(errno(libc::ENOENT))?
                }
                _ => r.size,
            });
        }
        let mut entries = Vec::with_capacity(recs.len());
        for (i, r) in recs.iter().enumerate() {
            let (size, max_offset) = match r.kind {
                Kind::Ptr { .. } => {
                    let mut cur = i;
                    for _ in 0..recs.len() {
                        match recs[cur].kind {
                            Kind::Ptr { target } => {
                                cur = pos(target).ok_or(errno(libc::EINVAL))?;
                            }
                            _ => break,
                        }
                    }
                    (alias_size(r.size, sizes[cur]), 0)
                }
                _ => (sizes[i], u64::MAX),
            };
            entries.push(Entry {
                pa: loaded.addrs[i],
                size,
                max_offset,
            });
        }
        Ok(Self::index(
            recs.iter().map(|r| r.var_id).collect(),
            entries,
        ))
    }

    /// Lays the entries out by id: a direct table when the ids are dense
    /// enough, else sorted ids searched by bisection.
    fn index(ids: Vec<u32>, entries: Vec<Entry>) -> Resolver {
        let mut r = Resolver {
            base: 0,
            direct: Vec::new(),
            ids: Vec::new(),
            sorted: Vec::new(),
        };
        let (Some(&lo), Some(&hi)) = (ids.iter().min(), ids.iter().max()) else {
            return r;
        };
        let span = (hi - lo) as usize + 1;
        if span <= 2 * ids.len() + 64 {
            r.base = lo;
            r.direct = vec![Entry::default(); span];
            for (id, e) in ids.iter().zip(entries) {
                r.direct[(id - lo) as usize] = e;
            }
            return r;
        }
        let mut order: Vec<(u32, Entry)> = ids.into_iter().zip(entries).collect();
        order.sort_by_key(|&(id, _)| id);
        (r.ids, r.sorted) = order.into_iter().unzip();
        r
    }

    /// The slot of `var_id`: an absent slot of the direct table has
    /// `max_offset` [`ABSENT`] and the unstaged sentinel as its PA.
    #[inline(always)]
    fn entry(&self, var_id: u32) -> Option<&Entry> {
        match self.direct.get(var_id.wrapping_sub(self.base) as usize) {
            Some(e) => Some(e),
            None => self.sorted_entry(var_id),
        }
    }

    /// Sparse ids. Inlined: with a call on the cold path, even one never
    /// taken, a caller's loop must keep what lives across it in callee-saved
    /// registers, runs out of them, and reloads the table's address and
    /// length from its stack on every resolve.
    #[inline(always)]
    fn sorted_entry(&self, var_id: u32) -> Option<&Entry> {
        self.ids
            .binary_search(&var_id)
            .ok()
            .map(|i| &self.sorted[i])
    }

    /// The device PA of `[offset, offset + size)` of variable `var_id`, as
    /// NHBM_IOC_RESOLVE answers it, errors included.
    #[inline]
    pub fn resolve(&self, var_id: u32, offset: u64, size: u64) -> io::Result<u64> {
        // The error is built only on the error path: an io::Error made and
        // dropped on every call costs more than the lookup itself.
        self.lookup(var_id, offset, size).map_err(errno)
    }

    #[inline(always)]
    fn lookup(&self, var_id: u32, offset: u64, size: u64) -> Result<u64, i32> {
        let Some(e) = self.entry(var_id) else {
            return Err(libc::ENOENT);
        };
        // Every refusal but an absent slot is EINVAL, and an absent slot
        // fails the sentinel test too: one combined test, one branch.
        let (end, past_end) = offset.overflowing_add(size);
        let (pa, wraps) = e.pa.overflowing_add(offset);
        let ok =
            !past_end & !wraps & (end <= e.size) & (offset <= e.max_offset) & (e.pa != PA_UNSTAGED);
        if ok {
            Ok(pa)
        } else {
            Err(refusal(e))
        }
    }

    /// The bytes variable `var_id` spans, `None` if the plan has no such variable.
    pub fn var_size(&self, var_id: u32) -> Option<u64> {
        self.entry(var_id)
            .filter(|e| e.max_offset != ABSENT)
            .map(|e| e.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Backing, Record};

    fn loaded(addrs: Vec<u64>) -> LoadedPlan {
        LoadedPlan {
            plan_id: 1,
            addrs,
            ..Default::default()
        }
    }

    fn errno_of(r: io::Result<u64>) -> Option<i32> {
        r.err().and_then(|e| e.raw_os_error())
    }

    #[test]
    fn bounds_pointers_and_unknown_ids() {
        let plan = Plan::new(0, 0)
            .with(Record::buffer(1, 4096))
            .with(Record::ptr(2, 1, 0))
            .with(Record::ptr(4, 2, 16))
            .with(Record::virtual_tmp_buf(5, 64, Backing::Local, 0));
        let r = Resolver::new(
            &plan,
            &loaded(vec![0x1000, 0x1000, 0x1000, 0x9000]),
            |_, _| None,
        )
        .unwrap();
        assert_eq!(r.resolve(1, 4095, 1).unwrap(), 0x1fff);
        assert_eq!(r.resolve(1, 4096, 0).unwrap(), 0x2000);
        assert_eq!(errno_of(r.resolve(1, 4095, 2)), Some(libc::EINVAL));
        assert_eq!(errno_of(r.resolve(1, u64::MAX, 2)), Some(libc::EINVAL));
        assert_eq!(errno_of(r.resolve(1, 1, u64::MAX)), Some(libc::EINVAL));
        // A pointer spans its target (through a chain) or its own size.
        assert_eq!(r.resolve(2, 0, 4096).unwrap(), 0x1000);
        assert_eq!(errno_of(r.resolve(2, 8, 8)), Some(libc::EINVAL));
        assert_eq!(r.var_size(4), Some(16));
        assert_eq!(errno_of(r.resolve(4, 0, 17)), Some(libc::EINVAL));
        assert_eq!(r.resolve(5, 63, 1).unwrap(), 0x903f);
        for id in [0, 3, 6, u32::MAX] {
            assert_eq!(errno_of(r.resolve(id, 0, 0)), Some(libc::ENOENT), "id {id}");
        }
    }

    #[test]
    fn sentinel_and_overflow_are_einval() {
        let plan = Plan::new(0, 0)
            .with(Record::buffer(1, 4096))
            .with(Record::buffer(2, 4096));
        let r =
            Resolver::new(&plan, &loaded(vec![PA_UNSTAGED, u64::MAX - 8]), |_, _| None).unwrap();
        assert_eq!(errno_of(r.resolve(1, 0, 0)), Some(libc::EINVAL));
        assert_eq!(r.resolve(2, 8, 0).unwrap(), u64::MAX);
        assert_eq!(errno_of(r.resolve(2, 9, 0)), Some(libc::EINVAL));
    }

    #[test]
    fn sparse_ids_and_remote_sizes() {
        let plan = Plan::new(0, 0)
            .with(Record::buffer(1_000_000, 4096))
            .with(Record::remote(7, 0, 3, 9))
            .with(Record::remote(8, 32, 3, 9))
            .with(Record::buffer(2, 8192));
        let addrs = vec![0x10000, 0x50000, 0x50000, 0x20000];
        let r = Resolver::new(&plan, &loaded(addrs.clone()), |p, v| {
            (p, v).eq(&(3, 9)).then_some(512)
        })
        .unwrap();
        assert!(r.direct.is_empty() && r.ids.len() == 4);
        assert_eq!(r.resolve(1_000_000, 4095, 1).unwrap(), 0x10fff);
        assert_eq!(r.var_size(7), Some(512));
        assert_eq!(r.var_size(8), Some(32));
        assert_eq!(r.resolve(2, 0, 8192).unwrap(), 0x20000);
        assert_eq!(errno_of(r.resolve(3, 0, 0)), Some(libc::ENOENT));
        // A remote variable nobody knows, and a table of the wrong length.
        let e = Resolver::new(&plan, &loaded(addrs), |_, _| None).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        let e = Resolver::new(&plan, &loaded(vec![0]), |_, _| Some(1)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }
}
