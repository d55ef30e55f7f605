// SPDX-License-Identifier: GPL-2.0-only

//! Which open file owns which NeuronCores (`NHBM_IOC_CORES`): a core has
//! at most one owner, a file claims and releases its own, and closing it
//! releases them all. Ownership is what lets a runtime reset its own cores
//! beside other tenants (`Device::reset`), and keeps every other tenant
//! from resetting them. The reference tracks which process uses which
//! cores with its core read/write lock (`neuron_crwl.c`, 2.24.7.0) but
//! lets any opener reset any core (`neuron_cdev.c:1396-1412`).

use crate::{abstractions::current::Process, arch::MAX_CORES};
use kernel::prelude::*;

/// The owner of one core: the open file (its client id) and the process
/// that claimed it through that file.
struct Owner {
    client: u64,
    process: Process,
}

/// The owner of every core of a device; kept in the device's reset gate,
/// so that a reset's permission and a claim are decided under one lock.
pub(super) struct CoreOwners([Option<Owner>; MAX_CORES]);

impl CoreOwners {
    /// No core owned.
    pub(super) const fn new() -> Self {
        CoreOwners([const { None }; MAX_CORES])
    }

    /// The map of the cores whose owner `owns` says yes to.
    fn map(&self, owns: impl Fn(&Owner) -> bool) -> u32 {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, o)| o.as_ref().is_some_and(&owns))
            .fold(0, |m, (c, _)| m | 1 << c)
    }

    /// The cores the file `client` owns.
    pub(super) fn of(&self, client: u64) -> u32 {
        self.map(|o| o.client == client)
    }

    /// The cores files other than `client` own.
    pub(super) fn of_others(&self, client: u64) -> u32 {
        self.map(|o| o.client != client)
    }

    /// Releases every core the file `client` owns.
    pub(super) fn release_all(&mut self, client: u64) {
        for o in &mut self.0 {
            if o.as_ref().is_some_and(|o| o.client == client) {
                *o = None;
            }
        }
    }
}

/// What one file sees of the cores' ownership.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct CoreView {
    /// The cores this file owns.
    pub(crate) owned: u32,
    /// The cores other files own.
    pub(crate) taken: u32,
    /// Per core, its owner's process as the caller's pid namespace numbers
    /// it (0: none, or not visible there).
    pub(crate) pids: [u32; MAX_CORES],
}

/// The processes claiming the cores of `claim`, one counted reference per
/// core, taken before the gate's lock so that nothing fails under it.
pub(super) fn claimants(claim: u32) -> Result<[Option<Process>; MAX_CORES]> {
    let mut procs = [const { None }; MAX_CORES];
    for (c, slot) in procs.iter_mut().enumerate() {
        if claim & 1 << c != 0 {
            *slot = Some(Process::current()?);
        }
    }
    Ok(procs)
}

impl CoreOwners {
    /// For the open file `client`: releases the cores of `release`, then
    /// claims those of `claim` for the processes `procs` ([`claimants`]),
    /// all or nothing, and says who owns what. `EINVAL` for a released
    /// core the file does not own, `EBUSY` for a claimed core another
    /// file owns.
    pub(super) fn change(
        &mut self,
        client: u64,
        (claim, release): (u32, u32),
        mut procs: [Option<Process>; MAX_CORES],
    ) -> Result<CoreView> {
        if release & !self.of(client) != 0 {
            return Err(EINVAL);
        }
        if claim & self.of_others(client) != 0 {
            return Err(EBUSY);
        }
        for (c, slot) in self.0.iter_mut().enumerate() {
            if release & 1 << c != 0 {
                *slot = None;
            }
            if let Some(process) = procs[c].take() {
                if slot.is_none() {
                    *slot = Some(Owner { client, process });
                }
            }
        }
        let mut view = CoreView {
            owned: self.of(client),
            taken: self.of_others(client),
            pids: [0; MAX_CORES],
        };
        for (pid, o) in view.pids.iter_mut().zip(&self.0) {
            *pid = o.as_ref().map_or(0, |o| o.process.number_seen_by_caller());
        }
        Ok(view)
    }
}

#[kunit_tests(neuron_hbm_cores)]
mod tests {
    use super::*;
    use crate::abstractions::current::tgid;

    /// `change` for `client`, its processes taken here.
    fn change(t: &mut CoreOwners, client: u64, claim: u32, release: u32) -> Result<CoreView> {
        t.change(client, (claim, release), claimants(claim)?)
    }

    #[test]
    fn a_core_has_one_owner_and_a_refusal_changes_nothing() -> Result {
        let mut t = CoreOwners::new();
        let (a, b) = (1, 2);
        let v = change(&mut t, a, 0b01, 0)?;
        assert_eq!((v.owned, v.taken), (0b01, 0));
        assert_eq!(v.pids[0], tgid() as u32);
        assert_eq!(v.pids[1], 0);
        // Another file's core, as a claim or as part of one: EBUSY, and b
        // gets none of it (not even the free core 1).
        assert_eq!(change(&mut t, b, 0b11, 0).err(), Some(EBUSY));
        let v = change(&mut t, b, 0, 0)?;
        assert_eq!((v.owned, v.taken), (0, 0b01));
        // Releasing a core one does not own: EINVAL, and the claim beside
        // it is not made.
        assert_eq!(change(&mut t, b, 0b10, 0b01).err(), Some(EINVAL));
        assert_eq!(change(&mut t, b, 0, 0)?.owned, 0);
        // Claiming one's own core again is no change.
        assert_eq!(change(&mut t, a, 0b01, 0)?.owned, 0b01);
        // Released, it is free for the other file.
        assert_eq!(change(&mut t, a, 0, 0b01)?.owned, 0);
        assert_eq!(change(&mut t, b, 0b11, 0)?.owned, 0b11);
        // Every core of a file goes at once.
        t.release_all(b);
        assert_eq!(change(&mut t, a, 0, 0)?.taken, 0);
        Ok(())
    }
}
