// SPDX-License-Identifier: GPL-2.0-only

//! The order in which the resets of one device start: first come, first
//! served. A caller that gives its place up (interrupted) and comes back
//! goes to the back, so a caller waits at most for those ahead of it: many
//! tenants starting and interrupting resets cannot keep another's reset
//! from its turn.
//!
//! Places given up before their turn are kept as ranges of tickets: a run
//! of them between two callers still waiting is one range, so the line
//! holds at most one range per waiting caller, however often others give
//! up, and passing a range is one step.

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
    /// Tickets given up before their turn, skipped when it comes: the
    /// ranges `start..end`, by start, never touching one another.
    gone: RBTree<u64, u64>,
}

/// A place in a [`ResetLine`], with the room to give it up without
/// allocating.
pub(crate) struct Ticket {
    n: u64,
    node: RBTreeNodeReservation<u64, u64>,
}

/// Room for one given-up ticket, charged to the caller's memory cgroup.
pub(crate) fn room() -> Result<RBTreeNodeReservation<u64, u64>> {
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
    pub(crate) fn take(&mut self, node: RBTreeNodeReservation<u64, u64>) -> Ticket {
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
        let n = t.n;
        if n == self.serving {
            self.pass(n);
            return;
        }
        // The range ending just before `n`, and the one starting after it.
        let before = match self.gone.cursor_lower_bound(&n) {
            Some(c) => c.peek_prev().map(|(&s, &e)| (s, e)),
            None => self
                .gone
                .cursor_back()
                .map(|c| (*c.current().0, *c.current().1)),
        }
        .filter(|&(_, end)| end == n);
        let after = self.gone.remove(&(n + 1));
        match (before, after) {
            (Some((start, _)), end) => {
                if let Some(e) = self.gone.get_mut(&start) {
                    *e = end.unwrap_or(n + 1);
                }
            }
            (None, end) => {
                self.gone.insert(t.node.into_node(n, end.unwrap_or(n + 1)));
            }
        }
    }

    /// The turn moves on from `n`, past the tickets given up after it.
    fn pass(&mut self, n: u64) {
        self.serving = n + 1;
        if let Some(end) = self.gone.remove(&self.serving) {
            self.serving = end;
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
        assert!(line.gone.is_empty());
        Ok(())
    }

    #[test]
    fn places_given_up_in_a_row_are_one_range() -> Result {
        let mut line = ResetLine::new();
        let first = line.take(room()?);
        let waiting = line.take(room()?);
        // A hundred callers give up behind the two, in no order: one range.
        let mut quitters = KVec::new();
        for _ in 0..100 {
            quitters.push(Some(line.take(room()?)), GFP_KERNEL)?;
        }
        let last = line.take(room()?);
        for i in Iterator::chain((0..100).step_by(2), (1..100).step_by(2)) {
            let t = quitters[i].take().ok_or(EINVAL)?;
            line.give_up(t);
        }
        assert_eq!(line.gone.iter().count(), 1);
        line.start(first);
        line.start(waiting);
        // The whole range is passed at once: the caller behind it is next.
        assert!(line.is_first(&last));
        line.start(last);
        assert!(line.gone.is_empty());
        Ok(())
    }
}
