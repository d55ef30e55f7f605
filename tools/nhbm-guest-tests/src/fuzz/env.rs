//! The fuzzer's open files, the plans other cases reference, faulting memory,
//! and PLAN_LOAD with every user buffer placed against a guard page.

use std::io;

use nhbm::uapi::*;
use nhbm::{Device, LoadedPlan, Plan, RawPlan, Record};

use crate::fixtures::{Usage, KIB};
use crate::fuzz::gen::{GenCtx, RemoteTarget};
use crate::loaded::check_loaded;
use crate::mem::Guarded;
use crate::sys::{errno_of, Hole, ReadOnly};

/// Variables of the anchor plans (held by file A all run long).
pub const ANCHOR_VARS: [(u32, u64); 3] = [(1, 64 * KIB), (2, 4 * KIB), (7, 256 * KIB)];

pub struct Env {
    /// File A: the anchors and every fuzzed load.
    pub dev: Device,
    /// File B: plans whose ids A must not reach; only held open, so that
    /// `other_ids` stay live until teardown.
    _other: Device,
    /// File C: no plans; random ioctl numbers go here.
    pub spare: Device,
    pub index: u32,
    pub info: DeviceInfo,
    pub limits: nhbm::Limits,
    pub gen: GenCtx,
    /// Plan ids of the anchors in A.
    pub anchors: Vec<u32>,
    /// Plan ids live in B and never live in A while cases run.
    pub other_ids: Vec<u32>,
    /// A's usage with only the anchors loaded.
    pub baseline: Usage,
    /// Device usage before the fuzzer opened anything.
    pub initial: (u64, u64),
    hole: Option<Hole>,
    pub ro: ReadOnly,
    blob_mem: Guarded,
    addrs_mem: Guarded,
    pub scratch: Guarded,
    /// PLAN_LOADs issued on A (bounds the plan ids it may return).
    pub loads: u64,
}

/// What a PLAN_LOAD answered.
pub type LoadResult = Result<LoadedPlan, i32>;

impl Env {
    pub fn open(index: u32) -> io::Result<Env> {
        let dev = Device::open(index)?;
        let info = dev.device_info()?;
        let initial = Usage::of(&dev)?.device();
        let other = Device::open(index)?;
        let spare = Device::open(index)?;
        let limits = nhbm::Limits::from_device_info(&info);

        let (anchors, remotes) = load_anchors(&dev)?;
        // One PLAN_LOAD per anchor.
        let loads = anchors.len() as u64;
        let other_ids = load_other_plans(&other, &anchors)?;
        let baseline = Usage::of(&dev)?;
        Ok(Env {
            gen: GenCtx {
                nr_cores: info.nr_cores,
                sbuf_size: info.sbuf_size,
                remotes,
            },
            dev,
            _other: other,
            spare,
            index,
            info,
            limits,
            anchors,
            other_ids,
            baseline,
            initial,
            hole: Some(Hole::new()?),
            ro: ReadOnly::new()?,
            blob_mem: Guarded::new(256 * KIB as usize)?,
            addrs_mem: Guarded::new(256 * KIB as usize)?,
            scratch: Guarded::new(1 << 20)?,
            loads,
        })
    }

    /// An address that is not mapped in this process right now (checked;
    /// nothing may mmap between this call and its use).
    pub fn unmapped(&mut self) -> u64 {
        match self.hole.take() {
            Some(h) if h.still_unmapped() => {
                let a = h.addr();
                self.hole = Some(h);
                a
            }
            old => {
                // Something was mapped into the hole: leave it be.
                if let Some(h) = old {
                    h.leak();
                }
                let h = Hole::new().expect("mmap for a new hole");
                let a = h.addr();
                self.hole = Some(h);
                a
            }
        }
    }

    /// An address inside an inaccessible (PROT_NONE) page.
    pub fn prot_none(&mut self) -> u64 {
        self.unmapped();
        self.hole.as_ref().unwrap().prot_none_addr()
    }

    /// PLAN_LOAD of `blob` claiming `blob_len` bytes: the blob ends right
    /// before a guard page (a read past its real end faults), and so does
    /// the addrs array, sized for the nmem the claimed length can hold.
    pub fn load(&mut self, blob: &[u8], blob_len: u64, channel: u32) -> LoadResult {
        let blob_addr = self.place_blob(blob);
        self.load_at(blob_addr, blob, blob_len, channel)
    }

    /// Copies `blob` to end right before a guard page; returns its address.
    pub fn place_blob(&mut self, blob: &[u8]) -> u64 {
        if blob.len() > self.blob_mem.usable() {
            if let Ok(g) = Guarded::new(blob.len()) {
                self.blob_mem = g;
            }
        }
        self.blob_mem.place_before_guard(blob, 0)
    }

    /// Like [`Env::load`] with the blob already at `blob_addr` (`blob` is a
    /// copy of what is readable there, for sizing addrs).
    pub fn load_at(
        &mut self,
        blob_addr: u64,
        blob: &[u8],
        blob_len: u64,
        channel: u32,
    ) -> LoadResult {
        let nmem = PlanHeader::decode(blob).map_or(0, |h| u64::from(h.nmem));
        let fit = blob_len.saturating_sub(PLAN_HEADER_SIZE as u64) / MEM_REF_SIZE as u64;
        let n = nmem.min(fit).min(u64::from(MAX_PLAN_RECORDS)) as usize;
        if n * 8 > self.addrs_mem.usable() {
            match Guarded::new(n * 8) {
                Ok(g) => self.addrs_mem = g,
                Err(e) => return Err(errno_of(&e)),
            }
        }
        let addrs = self.addrs_mem.addr_before_guard(n * 8);
        let mut arg = PlanLoad {
            blob: blob_addr,
            blob_len,
            addrs,
            channel,
            ..Default::default()
        };
        self.loads += 1;
        // SAFETY: the blob and addrs regions are our own mappings, each
        // followed by an inaccessible page: whatever the kernel reads or
        // writes beyond them faults instead of touching other memory.
        let r = unsafe { self.dev.plan_load_raw(&mut arg) };
        match r {
            Ok(()) => {
                let raw = self.addrs_mem.read_before_guard(n * 8);
                Ok(LoadedPlan {
                    plan_id: arg.plan_id,
                    local_scratchpad_pa: arg.local_scratchpad_pa,
                    shared_scratchpad_pa: arg.shared_scratchpad_pa,
                    bytes_allocated: arg.bytes_allocated,
                    addrs: raw
                        .chunks(8)
                        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                        .collect(),
                })
            }
            Err(e) => Err(errno_of(&e)),
        }
    }

    /// After a load the kernel accepted: checks what it returned against
    /// the blob and unloads the plan. Returns what is wrong.
    pub fn settle(&mut self, blob: &[u8], p: &LoadedPlan, failures: &mut Vec<String>) {
        match RawPlan::from_bytes(blob) {
            Ok(raw) => {
                if let Err(e) = check_loaded(&self.dev, &self.info, &raw, p, self.loads + 8) {
                    failures.push(e);
                }
            }
            Err(e) => failures.push(format!(
                "the kernel accepted a blob that does not parse: {e}"
            )),
        }
        if let Err(e) = self.dev.plan_unload(p.plan_id) {
            failures.push(format!(
                "PLAN_UNLOAD {} of a fuzzed plan: {}",
                p.plan_id,
                nhbm::io_errno_name(&e)
            ));
        }
    }

    /// After a case that left a plan behind (a failure already reported):
    /// unloads what the recent loads may have left, so later cases start
    /// from the baseline again.
    pub fn recover(&mut self) {
        let hi = self.loads + 8;
        for id in hi.saturating_sub(64).max(1)..=hi {
            let id = id as u32;
            if !self.anchors.contains(&id) {
                let _ = self.dev.plan_unload(id);
            }
        }
    }

    /// Checks that A's usage is the baseline again.
    pub fn check_baseline(&self, failures: &mut Vec<String>) {
        match Usage::of(&self.dev) {
            Ok(u) if u == self.baseline => {}
            Ok(u) => failures.push(format!(
                "usage not at baseline: used {:#x} (want {:#x}), chunks {} (want {}), own plans {} bytes {:#x} (want {} {:#x})",
                u.used,
                self.baseline.used,
                u.chunks,
                self.baseline.chunks,
                u.own_plans,
                u.own_bytes,
                self.baseline.own_plans,
                self.baseline.own_bytes
            )),
            Err(e) => failures.push(format!("MEM_STATS: {}", nhbm::io_errno_name(&e))),
        }
    }
}

/// Anchors in A: two plans, each with the vars of ANCHOR_VARS and a list of
/// them. Returns their plan ids and the variables REMOTE records may name.
fn load_anchors(dev: &Device) -> io::Result<(Vec<u32>, Vec<RemoteTarget>)> {
    let mut anchors = Vec::new();
    let mut remotes = Vec::new();
    for k in 0..2u32 {
        let mut plan = Plan::new(0, 0);
        for &(v, size) in &ANCHOR_VARS {
            plan.push(Record::buffer(v, size).name(format!("anchor{k}_{v}")));
        }
        plan.push(Record::list(9, vec![1, 2, 7]));
        let p = dev.plan_load(&plan.to_blob().map_err(io::Error::from)?, CHANNEL_ANY)?;
        for &(v, size) in &ANCHOR_VARS {
            remotes.push(RemoteTarget {
                plan_id: p.plan_id,
                var_id: v,
                size,
            });
        }
        anchors.push(p.plan_id);
    }
    Ok((anchors, remotes))
}

/// B gets more plans than A holds, so some of its ids are free in A:
/// returns those.
fn load_other_plans(other: &Device, anchors: &[u32]) -> io::Result<Vec<u32>> {
    let mut other_ids = Vec::new();
    for _ in 0..(anchors.len() + 4) {
        let plan = Plan::new(0, 0)
            .with(Record::buffer(1, 4 * KIB))
            .with(Record::buffer(2, 4 * KIB));
        let p = other.plan_load(&plan.to_blob().map_err(io::Error::from)?, CHANNEL_ANY)?;
        if !anchors.contains(&p.plan_id) {
            other_ids.push(p.plan_id);
        }
    }
    Ok(other_ids)
}
