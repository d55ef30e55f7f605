//! The UDMA engines of one function, as the reference driver drives its
//! host-to-device queues (aws-neuron-driver 2.24.7.0: `udma/udma_main.c`,
//! `udma/udma_m2m.c`, `neuron_dma.c`): M2S queue `i` reads what S2M queue
//! `i` writes, descriptor by descriptor at the same index, from the moment
//! a doorbell (`drtp_inc`) posts them on an enabled queue; no completion
//! ring and no interrupt, so software learns of completion from the last
//! descriptor's own write (the reference's 0xabcdef01 marker,
//! neuron_dma.c:146-147, 194-277).
//!
//! The engines run on a thread of their own, as hardware runs beside the
//! CPU: a doorbell returns at once and the guest polls. A queue stops on a
//! fault (a ring outside the rules, an address outside every mapped
//! region or outside HBM, a descriptor of the wrong phase) until `RST_Q`;
//! a device reset drops what is in flight and returns every queue to its
//! reset state; the control port can stall every engine.

pub mod copy;
pub mod desc;
pub mod mover;
pub mod queue;
pub mod regs;

use crate::arch::Arch;
use crate::guest_mem::GuestMemory;
use mover::Mover;
use queue::{Fault, Queue};
use regs::{NR_QUEUES, QUEUES, QUEUE_STRIDE, S2M, STATE, UNIT_SIZE};
use std::collections::HashMap;
use std::fs::File;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;

/// Counters of what the engines did since the model started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Descriptor pairs completed.
    pub pairs: u32,
    /// Bytes they moved.
    pub bytes: u64,
    /// Queues stopped on a fault.
    pub faults: u32,
    /// Pairs in flight when a reset dropped them.
    pub dropped: u32,
    /// The most descriptors one queue held posted and not done, at a
    /// doorbell, since it was last cleared: batches posted behind one
    /// another show up here.
    pub most_pending: u32,
    /// Doorbells (`drtp_inc` writes) taken, on any queue.
    pub doorbells: u32,
}

/// One unit: sixteen queues each way and its other registers as storage.
#[derive(Default)]
struct Unit {
    m2s: [Queue; NR_QUEUES],
    s2m: [Queue; NR_QUEUES],
    regs: HashMap<u64, u32>,
}

impl Unit {
    /// `state` of one half: abort if a queue stopped, normal while one
    /// has work, else idle.
    fn state(&self, s2m: bool) -> u32 {
        let qs = if s2m { &self.s2m } else { &self.m2s };
        let field = if qs.iter().any(|q| q.fault().is_some()) {
            regs::STATE_ABORT
        } else if qs.iter().any(Queue::ready) {
            regs::STATE_NORMAL
        } else {
            0
        };
        regs::state_fields(field)
    }
}

/// One descriptor pair taken by the engine thread.
#[derive(Clone, Copy, Debug)]
struct Job {
    unit: usize,
    queue: usize,
    generations: (u64, u64),
    m2s: (u64, u32),
    s2m: (u64, u32),
    fail: bool,
}

impl Job {
    /// Moves the pair's bytes; how many, or why the queues stop.
    fn run(&self, mover: &Mover) -> Result<u32, Fault> {
        let src = mover.read_desc(self.m2s.0)?;
        let dst = mover.read_desc(self.s2m.0)?;
        if src.ring_id != self.m2s.1 || dst.ring_id != self.s2m.1 {
            return Err(Fault::Phase);
        }
        if dst.len < src.len {
            return Err(Fault::Length);
        }
        if self.fail {
            return Err(Fault::Address);
        }
        mover.copy(src.addr, dst.addr, src.len)?;
        Ok(src.len)
    }
}

struct State {
    units: Vec<Unit>,
    stalled: bool,
    shutdown: bool,
    /// Round-robin start of the next scan.
    next: usize,
    /// Pairs still to complete before the control port's injected fault.
    fail_in: Option<u32>,
    stats: Stats,
}

impl State {
    fn queues(&mut self, unit: usize, queue: usize) -> (&mut Queue, &mut Queue) {
        let u = &mut self.units[unit];
        (&mut u.m2s[queue], &mut u.s2m[queue])
    }

    /// The next pair to move, stopping on the way every queue whose ring
    /// cannot be read.
    fn take(&mut self) -> Option<Job> {
        let n = self.units.len() * NR_QUEUES;
        for k in 0..n {
            let i = (self.next + k) % n;
            let (unit, queue) = (i / NR_QUEUES, i % NR_QUEUES);
            let (m2s, s2m) = self.queues(unit, queue);
            if !(m2s.ready() && s2m.ready()) {
                continue;
            }
            let (a, b) = match (m2s.head_desc(), s2m.head_desc()) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(f), _) | (_, Err(f)) => {
                    m2s.stop(f);
                    s2m.stop(f);
                    self.stats.faults += 1;
                    continue;
                }
            };
            let generations = (m2s.generation(), s2m.generation());
            self.next = i + 1;
            let fail = self.fail_in == Some(0);
            self.fail_in = self.fail_in.map(|n| n.saturating_sub(1)).filter(|_| !fail);
            return Some(Job {
                unit,
                queue,
                generations,
                m2s: a,
                s2m: b,
                fail,
            });
        }
        None
    }

    /// Ends `job` with `outcome`, unless a reset dropped it meanwhile.
    fn finish(&mut self, job: Job, outcome: Result<u32, Fault>) {
        let (m2s, s2m) = self.queues(job.unit, job.queue);
        if (m2s.generation(), s2m.generation()) != job.generations {
            self.stats.dropped += 1;
            return;
        }
        match outcome {
            Ok(len) => {
                m2s.advance();
                s2m.advance();
                self.stats.pairs += 1;
                self.stats.bytes += u64::from(len);
            }
            Err(f) => {
                m2s.stop(f);
                s2m.stop(f);
                self.stats.faults += 1;
            }
        }
    }
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The engines of a function, where its arch puts them in BAR0.
pub struct Udma {
    units: &'static [u64],
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Udma {
    /// The engines of `arch`, moving bytes between `guest` and the HBM in
    /// `bar4`, their thread started.
    pub fn new(
        arch: &'static Arch,
        bar4: &File,
        guest: Arc<RwLock<GuestMemory>>,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                units: arch.udma_units.iter().map(|_| Unit::default()).collect(),
                stalled: false,
                shutdown: false,
                next: 0,
                fail_in: None,
                stats: Stats::default(),
            }),
            work: Condvar::new(),
        });
        let mover = Mover::new(arch, bar4, guest)?;
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("udma".into())
            .spawn(move || {
                yield_to_wakers();
                engine(&s, &mover)
            })
            .ok();
        Ok(Udma {
            units: arch.udma_units,
            shared,
            thread,
        })
    }

    /// The unit BAR0 offset `off` falls in, and the offset inside it.
    fn unit_of(&self, off: u64) -> Option<(usize, u64)> {
        self.units
            .iter()
            .position(|&b| (b..b + UNIT_SIZE).contains(&off))
            .map(|u| (u, off - self.units[u]))
    }

    /// Reads the engine register at BAR0 offset `off`; `None` outside
    /// every unit.
    pub fn read(&self, off: u64) -> Option<u32> {
        let (u, rel) = self.unit_of(off)?;
        let st = self.shared.lock();
        let unit = &st.units[u];
        let (s2m, half) = if rel >= S2M {
            (true, rel - S2M)
        } else {
            (false, rel)
        };
        let plain = || unit.regs.get(&rel).copied().unwrap_or(0);
        Some(match queue_reg(half) {
            Some((i, reg)) => {
                let q = if s2m { &unit.s2m[i] } else { &unit.m2s[i] };
                q.read(reg).unwrap_or_else(plain)
            }
            None if half == STATE => unit.state(s2m),
            None => plain(),
        })
    }

    /// Writes the engine register at BAR0 offset `off`; false outside
    /// every unit.
    pub fn write(&self, off: u64, value: u32) -> bool {
        let Some((u, rel)) = self.unit_of(off) else {
            return false;
        };
        let mut st = self.shared.lock();
        let unit = &mut st.units[u];
        let (s2m, half) = if rel >= S2M {
            (true, rel - S2M)
        } else {
            (false, rel)
        };
        let doorbell = queue_reg(half).is_some_and(|(_, reg)| reg == regs::q::DRTP_INC);
        let handled = queue_reg(half).and_then(|(i, reg)| {
            if s2m {
                unit.s2m[i].write(reg, value, regs::q::S2M_SW_CTRL)
            } else {
                unit.m2s[i].write(reg, value, regs::q::M2S_SW_CTRL)
            }
        });
        match handled {
            Some(true) => {
                let queues = unit.m2s.iter().chain(unit.s2m.iter());
                let most = queues.map(Queue::pending).max().unwrap_or(0);
                st.stats.most_pending = st.stats.most_pending.max(most);
                st.stats.doorbells += u32::from(doorbell);
                self.shared.work.notify_all()
            }
            Some(false) => {}
            None => {
                unit.regs.insert(rel, value);
            }
        }
        true
    }

    /// A device reset: every queue back to its reset state, what is in
    /// flight dropped (its bytes may have landed in part, as on hardware).
    pub fn reset(&self) {
        let mut st = self.shared.lock();
        for u in &mut st.units {
            u.m2s
                .iter_mut()
                .chain(u.s2m.iter_mut())
                .for_each(Queue::reset);
            u.regs.clear();
        }
    }

    /// Stops (or lets go) every engine: doorbells are taken, nothing moves.
    pub fn set_stalled(&self, stalled: bool) {
        self.shared.lock().stalled = stalled;
        self.shared.work.notify_all();
    }

    /// Whether the engines are stalled.
    pub fn stalled(&self) -> bool {
        self.shared.lock().stalled
    }

    /// Makes the pair after the next `n` fail as a bad address would.
    pub fn fail_after(&self, n: u32) {
        self.shared.lock().fail_in = Some(n);
    }

    /// Clears [`Stats::most_pending`].
    pub fn clear_most_pending(&self) {
        self.shared.lock().stats.most_pending = 0;
    }

    /// What the engines did so far.
    pub fn stats(&self) -> Stats {
        self.shared.lock().stats
    }

    /// Waits until no queue has a pair the engines can move (a test's
    /// barrier: the guest polls memory instead).
    pub fn wait_idle(&self) {
        let mut st = self.shared.lock();
        while !st.stalled
            && st
                .units
                .iter()
                .any(|u| (0..NR_QUEUES).any(|i| u.m2s[i].ready() && u.s2m[i].ready()))
        {
            st = self.shared.work.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// The queue and register a half's offset names, if it names one.
fn queue_reg(half: u64) -> Option<(usize, u64)> {
    let rel = half.checked_sub(QUEUES)?;
    let i = usize::try_from(rel / QUEUE_STRIDE).ok()?;
    (i < NR_QUEUES).then_some((i, rel % QUEUE_STRIDE))
}

impl Drop for Udma {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.work.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Makes the calling thread `SCHED_BATCH`: waking it never preempts the
/// thread that woke it. The thread that takes a doorbell wakes the engine
/// and must still answer the client, whose CPU waits for that answer (a
/// BAR0 write is not posted); preempted by the engine on a busy host, it
/// answered only once the batch was done (measured: the second doorbell of
/// a 4 MiB batch took ~500 us, the first ~90 us). Hardware engines run
/// beside the CPU and never delay a register write's completion.
fn yield_to_wakers() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid
    // `sched_param` (priority 0, the only one SCHED_BATCH takes) that the
    // call only reads. A refusal leaves the thread as it was.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        eprintln!("nhbm-devmodel: the engine thread stays SCHED_OTHER: {e}");
    }
}

/// The engine thread: takes a pair, moves it with no lock held, ends it.
fn engine(shared: &Shared, mover: &Mover) {
    loop {
        let job = {
            let mut st = shared.lock();
            loop {
                if st.shutdown {
                    return;
                }
                if let Some(job) = (!st.stalled).then(|| st.take()).flatten() {
                    break job;
                }
                // Wakes `wait_idle` too: nothing is left to move.
                shared.work.notify_all();
                st = shared.work.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        };
        let outcome = job.run(mover);
        shared.lock().finish(job, outcome);
    }
}
