// SPDX-License-Identifier: GPL-2.0-only

//! Requests for a reset, and the batches one handshake carries out: every
//! request made while a handshake runs joins the next batch, whose
//! handshake resets the cores of all of them at once (a device reset
//! covering them all), as the reference's reset thread ORs the pending
//! requests' core maps into one (`neuron_reset.c:93-101`, 2.24.7.0). A
//! device so has at most one batch under way and one waiting, however many
//! requests there are.

use crate::hw::fw::{ResetKind, WaitReport};
use kernel::{
    new_mutex, new_spinlock,
    prelude::*,
    sync::{Arc, Mutex, SpinLock},
};

/// Who asks for a reset through an open file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Requester {
    /// The client id of the open file.
    pub(crate) client: u64,
    /// The caller has `CAP_SYS_ADMIN`.
    pub(crate) admin: bool,
}

/// An administrator's file, for the tests.
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) const ADMIN_FOR_TESTS: Requester = Requester {
    client: 0,
    admin: true,
};

/// How a request stands.
struct RequestState {
    /// How it ended, once it has.
    outcome: Option<Result<WaitReport>>,
    /// Its file closed before it ended: the file's cores are released once
    /// it has.
    orphaned: bool,
}

/// One reset asked for: what, by whom, and how it ended.
#[pin_data]
pub(crate) struct Request {
    /// The reset asked for.
    pub(super) kind: ResetKind,
    /// The cores of a TPB reset (0 for a device reset).
    pub(super) cores: u32,
    /// Who asked; `None` for the kernel (the probe's reset).
    pub(super) who: Option<Requester>,
    #[pin]
    state: SpinLock<RequestState>,
}

impl Request {
    /// A request not yet ended, charged to the caller's memory cgroup.
    pub(super) fn new(kind: ResetKind, cores: u32, who: Option<Requester>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Request {
                kind,
                cores,
                who,
                state <- new_spinlock!(RequestState {
                    outcome: None,
                    orphaned: false,
                }),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// The reset asked for and the cores it names.
    pub(crate) fn asked(&self) -> (ResetKind, u32) {
        (self.kind, self.cores)
    }

    /// How it ended; `None` while it has not.
    pub(crate) fn outcome(&self) -> Option<Result<WaitReport>> {
        self.state.lock().outcome
    }

    /// Ends it with `res` (its waiters are woken by the gate).
    pub(super) fn finish(&self, res: Result<WaitReport>) {
        self.state.lock().outcome = Some(res);
    }

    /// Whether it was asked through the file `client` and has not ended.
    pub(super) fn is_unfinished_of(&self, client: u64) -> bool {
        self.who.is_some_and(|w| w.client == client) && self.outcome().is_none()
    }

    /// Marks it as outliving its file.
    pub(super) fn orphan(&self) {
        self.state.lock().orphaned = true;
    }

    /// The client id of its file, if that file closed before it ended.
    pub(super) fn orphaned_client(&self) -> Option<u64> {
        let orphaned = self.state.lock().orphaned;
        self.who.filter(|_| orphaned).map(|w| w.client)
    }
}

/// The requests one handshake carries out.
#[pin_data]
pub(crate) struct ResetBatch {
    #[pin]
    requests: Mutex<KVec<Arc<Request>>>,
}

impl ResetBatch {
    /// An empty batch.
    pub(super) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(ResetBatch {
                requests <- new_mutex!(KVec::new()),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// Adds `req` (the room for it charged to the caller's memory cgroup).
    pub(super) fn join(&self, req: Arc<Request>) -> Result {
        self.requests.lock().push(req, GFP_KERNEL_ACCOUNT)?;
        Ok(())
    }

    /// Calls `f` on every request of the batch, in the order they came.
    pub(super) fn each(&self, mut f: impl FnMut(&Request)) {
        for r in self.requests.lock().iter() {
            f(r);
        }
    }

    /// Ends every request of the batch not ended yet with `res`.
    pub(super) fn finish_rest(&self, res: Result<WaitReport>) {
        self.each(|r| {
            if r.outcome().is_none() {
                r.finish(res);
            }
        });
    }

    /// Whether a request of the file `client` in it has not ended.
    pub(super) fn has_unfinished_of(&self, client: u64) -> bool {
        self.requests
            .lock()
            .iter()
            .any(|r| r.is_unfinished_of(client))
    }
}
