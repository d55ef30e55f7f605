// SPDX-License-Identifier: GPL-2.0

//! The order in which the resets of one device start: first come, first
//! served. A caller that gives its place up (interrupted, or refused) and
//! comes back goes to the back, so a caller waits at most for those ahead of
//! it: many tenants starting and interrupting resets cannot keep another's
//! reset from its turn.

use kernel::{
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
};

/// The line of one device's resets (kept under its reset gate's lock).
pub(crate) struct ResetLine {
    /// The ticket the next caller takes.
    next: u64,
    /// The ticket whose turn it is.
    serving: u64,
    /// Tickets given up before their turn, skipped when it comes.
    gone: RBTree<u64, ()>,
}

/// A place in a [`ResetLine`], with the room to give it up without
/// allocating.
pub(crate) struct Ticket {
    n: u64,
    node: RBTreeNodeReservation<u64, ()>,
}

/// Room for one given-up ticket, charged to the caller's memory cgroup.
pub(crate) fn room() -> Result<RBTreeNodeReservation<u64, ()>> {
    RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)
}

impl ResetLine {
    /// An empty line.
    pub(crate) fn new() -> Self {
        Self {
            next: 0,
            serving: 0,
            gone: RBTree::new(),
        }
    }

    /// Takes the place at the back; `node` is the room to give it up.
    pub(crate) fn take(&mut self, node: RBTreeNodeReservation<u64, ()>) -> Ticket {
        let n = self.next;
        self.next += 1;
        Ticket { n, node }
    }

    /// Whether it is `t`'s turn.
    pub(crate) fn is_first(&self, t: &Ticket) -> bool {
        self.serving == t.n
    }

    /// `t`, whose turn it is, leaves the line to start its reset.
    pub(crate) fn start(&mut self, t: Ticket) {
        self.pass(t.n);
    }

    /// `t` gives its place up: its turn is skipped when it comes.
    pub(crate) fn give_up(&mut self, t: Ticket) {
        if t.n == self.serving {
            self.pass(t.n);
        } else {
            self.gone.insert(t.node.into_node(t.n, ()));
        }
    }

    /// The turn moves on from `n`, past every ticket given up.
    fn pass(&mut self, n: u64) {
        self.serving = n + 1;
        while self.gone.remove(&self.serving).is_some() {
            self.serving += 1;
        }
    }
}

#[kunit_tests(neuron_hbm_reset_line)]
mod tests {
    use super::*;

    #[test]
    fn first_come_first_served_and_the_gone_are_skipped() -> Result {
        let mut line = ResetLine::new();
        let a = line.take(room()?);
        let b = line.take(room()?);
        let c = line.take(room()?);
        let d = line.take(room()?);
        assert!(line.is_first(&a) && !line.is_first(&b));
        // Given up before its turn: remembered, and skipped later.
        line.give_up(c);
        line.start(a);
        assert!(line.is_first(&b));
        // Given up on its turn: the next one still waiting is first.
        line.give_up(b);
        assert!(line.is_first(&d));
        // One who comes back queues behind those already waiting.
        let e = line.take(room()?);
        assert!(!line.is_first(&e));
        line.start(d);
        assert!(line.is_first(&e));
        line.start(e);
        assert!(line.gone.iter().next().is_none());
        Ok(())
    }
}
