//! One fuzz case per call: what it sends, what the kernel must answer.

use std::collections::{HashMap, HashSet};

use nhbm::uapi::*;
use nhbm::{validate, Kind, LoadedPlan, Plan, RawPlan, Record};

use crate::fixtures::{GIB, KIB, MIB};
use crate::fuzz::env::{Env, LoadResult, ANCHOR_VARS};
use crate::fuzz::gen::valid_plan;
use crate::fuzz::mutate::{blob_len, cut_point, flip_bits, mutate_field, smash_bytes};
use crate::rng::Rng;
use crate::sys::{errno_of, KERNEL_ADDRS};
use zerocopy::{FromBytes, IntoBytes};

/// What the request under test must answer.
#[derive(Clone, Copy, Debug)]
pub enum Expect {
    /// Success.
    Ok,
    /// Success or one of these errnos.
    OkOr(&'static [i32]),
    /// Exactly this errno.
    Err(i32),
    /// One of these errnos.
    ErrIn(&'static [i32]),
}

impl Expect {
    fn check(self, got: Option<i32>) -> Option<String> {
        let name = |e: Option<i32>| e.map_or("success".to_string(), nhbm::errno_name);
        let names = |l: &[i32]| {
            l.iter()
                .map(|&e| nhbm::errno_name(e))
                .collect::<Vec<_>>()
                .join("|")
        };
        let ok = match (self, got) {
            (Expect::Ok, None) => true,
            (Expect::Ok, Some(_)) => false,
            (Expect::OkOr(_), None) => true,
            (Expect::OkOr(l), Some(e)) => l.contains(&e),
            (Expect::Err(w), Some(e)) => w == e,
            (Expect::ErrIn(l), Some(e)) => l.contains(&e),
            (Expect::Err(_) | Expect::ErrIn(_), None) => false,
        };
        if ok {
            return None;
        }
        let want = match self {
            Expect::Ok => "success".to_string(),
            Expect::OkOr(l) => format!("success|{}", names(l)),
            Expect::Err(e) => nhbm::errno_name(e),
            Expect::ErrIn(l) => names(l),
        };
        Some(format!("got {}, want {want}", name(got)))
    }
}

/// How the kernel's answer compares with the library's validator.
#[derive(Clone, Debug, Default)]
pub enum Oracle {
    /// Not compared (the blob was not the only thing under test).
    #[default]
    None,
    Agree,
    /// The kernel accepted a blob the format rejects.
    KernelAccepts(String),
    /// The kernel refused a blob the validator accepts (EINVAL, E2BIG or
    /// EOPNOTSUPP; a REMOTE's target or an alias's size are rules only the
    /// kernel can check).
    KernelRefuses(String),
    /// Both refused, with different errnos (several rules broken at once
    /// may be found in a different order).
    ErrnoDiffers(String),
}

/// The result of one case.
#[derive(Debug, Default)]
pub struct CaseOut {
    /// The answer to the request under test (None: success).
    pub errno: Option<i32>,
    /// Whether the request under test was a PLAN_LOAD that succeeded.
    pub loaded: bool,
    pub what: String,
    pub failures: Vec<String>,
    pub oracle: Oracle,
}

impl CaseOut {
    fn new(what: impl Into<String>) -> Self {
        CaseOut {
            what: what.into(),
            ..Default::default()
        }
    }
    fn expect(&mut self, e: Expect) {
        if let Some(f) = e.check(self.errno) {
            self.failures.push(f);
        }
    }
}

const ENOMEM_ONLY: &[i32] = &[libc::ENOMEM];
const TOO_BIG: &[i32] = &[libc::ENOMEM, libc::EINVAL, libc::E2BIG];

/// Loads `blob` (all of it) and settles the result: a plan the kernel
/// accepted is checked and unloaded.
fn load_blob(env: &mut Env, blob: &[u8], channel: u32, out: &mut CaseOut) -> Option<LoadedPlan> {
    match env.load(blob, blob.len() as u64, channel) {
        Ok(p) => {
            out.errno = None;
            out.loaded = true;
            Some(p)
        }
        Err(e) => {
            out.errno = Some(e);
            None
        }
    }
}

/// Compares the kernel's answer for `blob` with the library's validator.
fn judge(env: &Env, blob: &[u8], out: &mut CaseOut) {
    let pred = validate(blob, &env.limits);
    let has_alias = RawPlan::from_bytes(blob).is_ok_and(|r| {
        r.records
            .iter()
            .any(|m| m.mr_type == MR_REMOTE || (m.mr_type == MR_PTR && m.size != 0))
    });
    out.oracle = match (pred, out.errno) {
        (Ok(_), None) => Oracle::Agree,
        (Err(e), None) => Oracle::KernelAccepts(e.to_string()),
        (Ok(_), Some(libc::ENOMEM | libc::ENOENT)) => Oracle::Agree,
        (Ok(_), Some(k)) if has_alias && k == libc::EINVAL => Oracle::Agree,
        (Ok(_), Some(k)) => Oracle::KernelRefuses(nhbm::errno_name(k)),
        (Err(e), Some(k)) if e.errno == k => Oracle::Agree,
        (Err(e), Some(k)) => {
            Oracle::ErrnoDiffers(format!("kernel {}, library {e}", nhbm::errno_name(k)))
        }
    };
}

fn fresh_id(used: &mut HashSet<u32>, rng: &mut Rng) -> u32 {
    loop {
        let id = 0x4000_0000 | rng.next_u32() >> 2;
        if used.insert(id) {
            return id;
        }
    }
}

fn ids_of(plan: &Plan) -> HashSet<u32> {
    plan.records.iter().map(|r| r.var_id).collect()
}

fn random_channel(rng: &mut Rng, env: &Env) -> (u32, bool) {
    match rng.below(10) {
        0 => (0, true),
        1 => (env.info.nr_channels.saturating_sub(1), true),
        2 => (env.info.nr_channels + rng.below(3) as u32, false),
        3 => (CHANNEL_ANY - 1 - rng.below(3) as u32, false),
        _ => (CHANNEL_ANY, true),
    }
}

/// Reads `len` bytes of a variable of A.
fn read_var(env: &Env, plan: u32, var: u32, off: u64, len: u64) -> Result<Vec<u8>, String> {
    let mut buf = vec![0u8; len as usize];
    env.dev.mem_read(plan, var, off, &mut buf).map_err(|e| {
        format!(
            "MEM_READ var {var} [{off:#x}, +{len:#x}): {}",
            nhbm::io_errno_name(&e)
        )
    })?;
    Ok(buf)
}

/// What a freshly loaded valid plan must hold: payloads then zeros, list
/// tables of the listed addresses, zeroed scratchpad windows; a write reads
/// back; resolve bounds hold.
fn verify_contents(env: &Env, plan: &Plan, p: &LoadedPlan, rng: &mut Rng, f: &mut Vec<String>) {
    let Some(writable) = check_initial_contents(env, plan, p, f) else {
        return;
    };
    if !writable.is_empty() {
        write_and_read_back(env, p, &writable, rng, f);
    }
    check_sbuf_windows(env, plan, p, f);
    check_pointer_offsets(env, plan, p, f);
}

/// Whether a variable of this kind is allocated memory that may be written.
fn is_writable(kind: &Kind) -> bool {
    matches!(
        kind,
        Kind::Input | Kind::Output | Kind::Buffer | Kind::BufferStaged | Kind::TmpBuf
    )
}

/// What `r` must read right after the load, when the plan tells: its
/// payload then zeros, its table of the listed addresses `pa`, or zeros.
fn expected_contents(r: &Record, pa: &HashMap<u32, u64>) -> Option<Vec<u8>> {
    match &r.kind {
        kind if is_writable(kind) => {
            let mut w = r.data.clone();
            w.resize(r.size as usize, 0);
            Some(w)
        }
        Kind::List { ids } | Kind::PtrTable { ids } => {
            let mut w: Vec<u8> = ids
                .iter()
                .flat_map(|id| pa.get(id).copied().unwrap_or(PA_UNSTAGED).to_le_bytes())
                .collect();
            w.resize(r.size as usize, 0);
            Some(w)
        }
        Kind::VirtualTmpBuf { .. } => Some(vec![0u8; r.size as usize]),
        _ => None,
    }
}

/// Reads every variable whose contents the plan tells and checks its
/// RESOLVE bounds. Returns the writable variables, or None after the first
/// variable that does not read as it must (the failure is in `f`).
fn check_initial_contents<'p>(
    env: &Env,
    plan: &'p Plan,
    p: &LoadedPlan,
    f: &mut Vec<String>,
) -> Option<Vec<&'p Record>> {
    let pa: HashMap<u32, u64> = plan
        .records
        .iter()
        .zip(&p.addrs)
        .map(|(r, &a)| (r.var_id, a))
        .collect();
    let mut writable = Vec::new();
    for r in &plan.records {
        let Some(want) = expected_contents(r, &pa) else {
            continue;
        };
        if is_writable(&r.kind) {
            writable.push(r);
        }
        if let Err(e) = compare_contents(env, p, r, &want) {
            f.push(e);
            return None;
        }
        check_resolve_bounds(env, p, r, pa[&r.var_id], f);
    }
    Some(writable)
}

/// Reads `r` whole and compares it with `want`; the first byte that
/// differs, or the read's error, is the failure.
fn compare_contents(env: &Env, p: &LoadedPlan, r: &Record, want: &[u8]) -> Result<(), String> {
    let got = read_var(env, p.plan_id, r.var_id, 0, r.size)?;
    match got.iter().zip(want).position(|(a, b)| a != b) {
        Some(k) => Err(format!(
            "var {} ({:?}) byte {k:#x} reads {:#04x}, want {:#04x} (payload {} bytes)",
            r.var_id,
            r.kind,
            got[k],
            want[k],
            r.data.len()
        )),
        None => Ok(()),
    }
}

/// Bounds: the last byte of `r` (at `pa`) resolves, one past it does not.
fn check_resolve_bounds(env: &Env, p: &LoadedPlan, r: &Record, pa: u64, f: &mut Vec<String>) {
    let last = env.dev.resolve(p.plan_id, r.var_id, r.size - 1, 1).ok();
    if last != Some(pa + r.size - 1) {
        f.push(format!("RESOLVE var {} last byte: {last:?}", r.var_id));
    }
    match env.dev.resolve(p.plan_id, r.var_id, r.size, 1) {
        Err(e) if errno_of(&e) == libc::EINVAL => {}
        other => f.push(format!(
            "RESOLVE var {} one past its end: {other:?}, want EINVAL",
            r.var_id
        )),
    }
}

/// Writes random bytes to a random range of one of `writable` (not empty)
/// and reads them back.
fn write_and_read_back(
    env: &Env,
    p: &LoadedPlan,
    writable: &[&Record],
    rng: &mut Rng,
    f: &mut Vec<String>,
) {
    let r = writable[rng.index(writable.len())];
    let off = rng.below(r.size);
    let len = rng.range(1, r.size - off);
    let bytes = rng.bytes(len as usize);
    if let Err(e) = env.dev.mem_write(p.plan_id, r.var_id, off, &bytes) {
        f.push(format!(
            "MEM_WRITE var {}: {}",
            r.var_id,
            nhbm::io_errno_name(&e)
        ));
    } else {
        match read_var(env, p.plan_id, r.var_id, off, len) {
            Ok(b) if b == bytes => {}
            Ok(_) => f.push(format!(
                "var {} does not read back what was written",
                r.var_id
            )),
            Err(e) => f.push(e),
        }
    }
}

/// State Buffer windows are on-core SRAM: never in HBM, never moved
/// through BAR4, whatever names them.
fn check_sbuf_windows(env: &Env, plan: &Plan, p: &LoadedPlan, f: &mut Vec<String>) {
    for (r, &a) in plan.records.iter().zip(&p.addrs) {
        if in_sbuf(plan, r.var_id) != Some(true) {
            continue;
        }
        let i = &env.info;
        let size = r.size.max(1);
        for c in 0..(i.nr_channels as usize).min(MAX_CHANNELS) {
            let (b, e) = (i.channel_base[c], i.channel_base[c] + i.channel_size[c]);
            if a < e && b < a.saturating_add(size) {
                f.push(format!(
                    "SB var {} at {a:#x} lies in HBM channel {c}",
                    r.var_id
                ));
            }
        }
        let mut buf = [0u8; 8];
        match env.dev.mem_read(p.plan_id, r.var_id, 0, &mut buf) {
            Err(e) if errno_of(&e) == libc::EINVAL => {}
            other => f.push(format!(
                "MEM_READ SB var {}: {other:?}, want EINVAL",
                r.var_id
            )),
        }
        match env.dev.mem_write(p.plan_id, r.var_id, 0, &buf) {
            Err(e) if errno_of(&e) == libc::EINVAL => {}
            other => f.push(format!(
                "MEM_WRITE SB var {}: {other:?}, want EINVAL",
                r.var_id
            )),
        }
    }
}

/// A pointer resolves only at offset 0.
fn check_pointer_offsets(env: &Env, plan: &Plan, p: &LoadedPlan, f: &mut Vec<String>) {
    for r in &plan.records {
        if matches!(r.kind, Kind::Ptr { .. }) {
            match env.dev.resolve(p.plan_id, r.var_id, 1, 0) {
                Err(e) if errno_of(&e) == libc::EINVAL => {}
                other => f.push(format!(
                    "RESOLVE pointer var {} at offset 1: {other:?}, want EINVAL",
                    r.var_id
                )),
            }
        }
    }
}

/// Whether `var` of `plan` is a State Buffer window, itself or through
/// pointers; `None` for a REMOTE, whose target the plan does not show.
fn in_sbuf(plan: &Plan, var: u32) -> Option<bool> {
    let mut cur = plan.record(var)?;
    for _ in 0..=plan.records.len() {
        match cur.kind {
            Kind::Sb { .. } => return Some(true),
            Kind::Remote { .. } => return None,
            Kind::Ptr { target } => cur = plan.record(target)?,
            _ => return Some(false),
        }
    }
    Some(false)
}

/// The bytes a variable of `plan` spans, when the plan alone tells.
fn span_of(plan: &Plan, var: u32) -> Option<u64> {
    let r = plan.record(var)?;
    match r.kind {
        Kind::Ptr { .. } | Kind::Remote { .. } if r.size == 0 => None,
        _ => Some(r.size),
    }
}

/// RESOLVE and MEM_READ with offsets and sizes from the edges on a loaded
/// plan: whatever succeeds must be inside the variable and at its address
/// plus the offset; refusals are EINVAL (bounds) or ENOENT (unknown var).
fn probe_bounds(env: &mut Env, plan: &Plan, p: &LoadedPlan, rng: &mut Rng, f: &mut Vec<String>) {
    for _ in 0..6 {
        let probe = Probe::draw(plan, p, rng);
        let r = probe.send(env, p.plan_id);
        probe.check(r, env.scratch.usable(), f);
    }
}

/// One RESOLVE or MEM_READ of `probe_bounds`, and what is known of its
/// variable.
struct Probe {
    var: u32,
    /// The variable's address from PLAN_LOAD, when it is one of the plan's.
    pa: Option<u64>,
    /// Whether the plan has the variable.
    known: bool,
    is_ptr: bool,
    /// See [`span_of`].
    span: Option<u64>,
    /// See [`in_sbuf`].
    sbuf: Option<bool>,
    offset: u64,
    size: u64,
    /// MEM_READ rather than RESOLVE.
    read: bool,
}

impl Probe {
    /// A variable of `plan` (rarely a random id), and an offset and size
    /// from its edges.
    fn draw(plan: &Plan, p: &LoadedPlan, rng: &mut Rng) -> Probe {
        let (var, pa) = if rng.chance(7, 8) {
            let k = rng.index(plan.records.len());
            (plan.records[k].var_id, Some(p.addrs[k]))
        } else {
            (rng.next_u32(), None)
        };
        let span = span_of(plan, var);
        let offset = match rng.below(4) {
            0 => 0,
            1 => span.map_or(0, |s| rng.below(s + 2)),
            2 => span.unwrap_or(4096).wrapping_sub(rng.below(3)),
            _ => rng.edgy_u64(),
        };
        let size = match rng.below(4) {
            0 => 0,
            1 => span.map_or(1, |s| rng.below(s + 2)),
            2 => span
                .unwrap_or(4096)
                .saturating_sub(offset)
                .wrapping_add(rng.below(3)),
            _ => rng.edgy_u64(),
        };
        Probe {
            var,
            pa,
            known: plan.record(var).is_some(),
            is_ptr: plan
                .record(var)
                .is_some_and(|r| matches!(r.kind, Kind::Ptr { .. })),
            span,
            sbuf: in_sbuf(plan, var),
            offset,
            size,
            read: rng.chance(1, 3),
        }
    }

    /// Whether the range lies inside the variable (a pointer's only at
    /// offset 0).
    fn inside(&self) -> bool {
        self.span
            .is_none_or(|s| self.offset.checked_add(self.size).is_some_and(|e| e <= s))
            && (!self.is_ptr || self.offset == 0)
    }

    /// Sends the probe on plan `plan_id`: the address RESOLVE answered, or
    /// None for a MEM_READ.
    fn send(&self, env: &mut Env, plan_id: u32) -> std::io::Result<Option<u64>> {
        if self.read {
            let n = (self.size as usize).min(env.scratch.usable());
            let mut arg = MemXfer {
                plan_id,
                var_id: self.var,
                offset: self.offset,
                len: self.size,
                buf: env.scratch.addr_before_guard(n),
            };
            // SAFETY: the buffer ends at our guard page; longer lengths fault.
            unsafe { env.dev.mem_xfer_raw(false, &mut arg) }.map(|()| None)
        } else {
            env.dev
                .resolve(plan_id, self.var, self.offset, self.size)
                .map(Some)
        }
    }

    /// Checks the answer `r`; `usable` is the room before the guard page.
    fn check(&self, r: std::io::Result<Option<u64>>, usable: usize, f: &mut Vec<String>) {
        let (var, offset, size, span) = (self.var, self.offset, self.size, self.span);
        let what = format!(
            "{} var {var} offset {offset:#x} size {size:#x}",
            if self.read { "MEM_READ" } else { "RESOLVE" }
        );
        match r {
            Ok(addr) => {
                if !self.known {
                    f.push(format!("{what}: succeeded on a var the plan does not have"));
                } else if self.read && self.sbuf == Some(true) {
                    f.push(format!("{what}: moved State Buffer bytes through BAR4"));
                } else if !self.inside() {
                    f.push(format!(
                        "{what}: succeeded outside the variable (span {span:x?})"
                    ));
                } else if let (Some(a), Some(pa)) = (addr, self.pa) {
                    if !self.is_ptr && Some(a) != pa.checked_add(offset) {
                        f.push(format!("{what}: {a:#x}, want {pa:#x} + offset"));
                    }
                }
            }
            Err(e) => {
                let e = errno_of(&e);
                let ok = match e {
                    libc::ENOENT => !self.known,
                    libc::EINVAL => {
                        self.known
                            && (!(self.inside() && span.is_some() && !self.is_ptr)
                                || (self.read && self.sbuf != Some(false)))
                    }
                    libc::EFAULT => self.read && size as usize > usable,
                    _ => false,
                };
                if !ok {
                    f.push(format!("{what}: {} (span {span:x?})", nhbm::errno_name(e)));
                }
            }
        }
    }
}

/// Random valid plans on a random channel: they load (or ENOMEM), resolve
/// to what PLAN_LOAD said, hold their payloads and zeros, then unload.
pub fn valid_plans(env: &mut Env, rng: &mut Rng) -> CaseOut {
    let plan = valid_plan(rng, &env.gen, 12);
    let (channel, channel_ok) = random_channel(rng, env);
    let mut out = CaseOut::new(format!(
        "valid plan of {} records on channel {channel:#x}",
        plan.records.len()
    ));
    let blob = match plan.to_blob_for(&env.limits) {
        Ok(b) => b,
        Err(e) => {
            out.failures.push(format!("generated plan is invalid: {e}"));
            return out;
        }
    };
    if let Some(p) = load_blob(env, &blob, channel, &mut out) {
        verify_contents(env, &plan, &p, rng, &mut out.failures);
        probe_bounds(env, &plan, &p, rng, &mut out.failures);
        if rng.chance(1, 2) {
            check_sharing(env, &plan, &p, rng, &mut out.failures);
        }
        env.settle(&blob, &p, &mut out.failures);
    }
    out.expect(if channel_ok {
        Expect::OkOr(ENOMEM_ONLY)
    } else {
        Expect::Err(libc::EINVAL)
    });
    out
}

/// The loaded plan `p` exported and imported into the spare file: every
/// variable resolves there as in `p` (or is refused alike), MEM_WRITE of
/// one is refused (`EACCES`), and unloading the import leaves nothing of
/// it (the case's usage check follows).
fn check_sharing(env: &Env, plan: &Plan, p: &LoadedPlan, rng: &mut Rng, f: &mut Vec<String>) {
    use std::os::fd::AsFd;
    let fd = match env.dev.plan_export(p.plan_id) {
        Ok(fd) => fd,
        Err(e) => return f.push(format!("PLAN_EXPORT of a loaded plan: {e}")),
    };
    let imported = env.spare.plan_import(fd.as_fd());
    drop(fd);
    let id = match imported {
        Ok(i) if i.nr_vars as usize == plan.records.len() => i.plan_id,
        Ok(i) => return f.push(format!("PLAN_IMPORT: {} variables", i.nr_vars)),
        Err(e) => return f.push(format!("PLAN_IMPORT of an exported plan: {e}")),
    };
    let errno = |r: std::io::Result<u64>| r.map_err(|e| errno_of(&e));
    for r in &plan.records {
        let (off, size) = (rng.below(r.size.saturating_add(1)), 0);
        let mine = errno(env.dev.resolve(p.plan_id, r.var_id, off, size));
        let theirs = errno(env.spare.resolve(id, r.var_id, off, size));
        if mine != theirs {
            f.push(format!(
                "RESOLVE of var {} at {off}: {mine:?} in the plan, {theirs:?} in its import",
                r.var_id
            ));
        }
    }
    if let Some(r) = plan.records.get(rng.index(plan.records.len().max(1))) {
        match env.spare.mem_write(id, r.var_id, 0, &[0u8; 1]) {
            Err(e) if errno_of(&e) == libc::EACCES => {}
            other => f.push(format!("MEM_WRITE of import var {}: {other:?}", r.var_id)),
        }
    }
    if let Err(e) = env.spare.plan_unload(id) {
        f.push(format!("PLAN_UNLOAD of the import: {e}"));
    }
}

/// A valid plan with 1..=8 bits flipped or a word overwritten.
pub fn bit_flips(env: &mut Env, rng: &mut Rng) -> CaseOut {
    let plan = valid_plan(rng, &env.gen, 8);
    let mut blob = plan.to_raw().expect("generated plans lay out").to_bytes();
    let what = if rng.chance(2, 3) {
        flip_bits(rng, &mut blob)
    } else {
        smash_bytes(rng, &mut blob)
    };
    let mut out = CaseOut::new(what);
    if let Some(p) = load_blob(env, &blob, CHANNEL_ANY, &mut out) {
        env.settle(&blob, &p, &mut out.failures);
    }
    judge(env, &blob, &mut out);
    out
}

/// A valid plan with 1..=3 header or record fields set to edge values:
/// bad kinds, flags, offsets into the header or past the blob, overlapping
/// payloads, huge sizes, duplicate ids, list counts from the edges.
pub fn field_edges(env: &mut Env, rng: &mut Rng) -> CaseOut {
    let plan = valid_plan(rng, &env.gen, 8);
    let mut raw = plan.to_raw().expect("generated plans lay out");
    let n = rng.range(1, 3);
    let what: Vec<String> = (0..n).map(|_| mutate_field(rng, &mut raw)).collect();
    let blob = raw.to_bytes();
    let mut out = CaseOut::new(what.join("; "));
    if let Some(p) = load_blob(env, &blob, CHANNEL_ANY, &mut out) {
        env.settle(&blob, &p, &mut out.failures);
    }
    judge(env, &blob, &mut out);
    out
}

/// Short blobs, and blob_len claiming more than is readable.
pub fn truncation(env: &mut Env, rng: &mut Rng) -> CaseOut {
    let plan = valid_plan(rng, &env.gen, 8);
    let blob = plan.to_raw().expect("generated plans lay out").to_bytes();
    let nmem = plan.records.len();
    match rng.below(6) {
        0 | 1 => cut_short(env, rng, &blob, nmem),
        2 | 3 => readable_part_cut(env, rng, &blob, nmem),
        4 => tiny_or_null_blob(env, rng, &blob),
        _ => overlong_blob_len(env, rng, &blob),
    }
}

/// Records the answer of a PLAN_LOAD of `blob` in `out`; a plan the kernel
/// accepted is checked and unloaded.
fn settle_load(env: &mut Env, r: LoadResult, blob: &[u8], out: &mut CaseOut) {
    match r {
        Ok(p) => {
            out.errno = None;
            out.loaded = true;
            env.settle(blob, &p, &mut out.failures);
        }
        Err(e) => out.errno = Some(e),
    }
}

/// `blob` of `nmem` records cut short, blob_len telling the truth.
fn cut_short(env: &mut Env, rng: &mut Rng, blob: &[u8], nmem: usize) -> CaseOut {
    let cut = cut_point(rng, blob.len(), nmem);
    let mut out = CaseOut::new(format!("cut to {cut} of {} bytes", blob.len()));
    let b = &blob[..cut];
    if let Some(p) = load_blob(env, b, CHANNEL_ANY, &mut out) {
        env.settle(b, &p, &mut out.failures);
    }
    judge(env, b, &mut out);
    out.expect(Expect::ErrIn(&[libc::EINVAL, libc::ENOENT]));
    out
}

/// The readable bytes of `blob` end early; blob_len claims the whole plan.
fn readable_part_cut(env: &mut Env, rng: &mut Rng, blob: &[u8], nmem: usize) -> CaseOut {
    let cut = cut_point(rng, blob.len(), nmem);
    let mut out = CaseOut::new(format!(
        "{cut} readable bytes, blob_len {} (guard page after)",
        blob.len()
    ));
    let r = env.load(&blob[..cut], blob.len() as u64, CHANNEL_ANY);
    settle_load(env, r, blob, &mut out);
    out.expect(Expect::Err(libc::EFAULT));
    out
}

/// blob_len 0..24 on a readable blob, or a NULL blob.
fn tiny_or_null_blob(env: &mut Env, rng: &mut Rng, blob: &[u8]) -> CaseOut {
    let null = rng.chance(1, 2);
    let len = if null {
        blob.len() as u64
    } else {
        rng.below(PLAN_HEADER_SIZE as u64)
    };
    let mut out = CaseOut::new(format!("blob_len {len}, NULL blob: {null}"));
    let r = if null {
        env.load_at(0, blob, len, CHANNEL_ANY)
    } else {
        env.load(&blob[..len as usize], len, CHANNEL_ANY)
    };
    settle_load(env, r, blob, &mut out);
    out.expect(Expect::Err(if null { libc::EFAULT } else { libc::EINVAL }));
    out
}

/// blob_len far beyond the blob: either refused or the extra length is
/// never read.
fn overlong_blob_len(env: &mut Env, rng: &mut Rng, blob: &[u8]) -> CaseOut {
    let len = match rng.below(4) {
        0 => u64::MAX,
        1 => 1 << 40,
        2 => blob.len() as u64 + (1 << 32),
        _ => blob.len() as u64 + rng.range(1, 1 << 20),
    };
    let mut out = CaseOut::new(format!("blob_len {len:#x} for {} bytes", blob.len()));
    let r = env.load(blob, len, CHANNEL_ANY);
    settle_load(env, r, blob, &mut out);
    out.expect(Expect::OkOr(&[
        libc::EINVAL,
        libc::E2BIG,
        libc::EFAULT,
        libc::ENOMEM,
    ]));
    out
}

/// Pointer cycles, self references, missing targets, long chains, and
/// MR_REMOTE to this file's anchors, to another file's plans, to plans gone.
pub fn references(env: &mut Env, rng: &mut Rng) -> CaseOut {
    let mut c = RefCase::new(env, rng);
    let variant = rng.below(19);
    let (what, expect) = match variant {
        0..=3 | 6 | 11 => c.pointer_shapes(rng, variant),
        4 | 5 | 7 | 8 | 12 => c.missing_targets(env, rng, variant),
        13 => c.remote_to_unloaded_plan(env, rng),
        18 => c.remote_chain(env, rng),
        _ => c.anchor_references(rng, variant),
    };
    let RefCase {
        mut plan,
        anchor,
        avar,
        chain,
        ..
    } = c;
    // Shuffle the records: references may point forwards or backwards.
    for i in (1..plan.records.len()).rev() {
        let j = rng.index(i + 1);
        plan.records.swap(i, j);
    }
    let mut out = CaseOut::new(what);
    let blob = match plan.to_raw() {
        Ok(r) => r.to_bytes(),
        Err(e) => {
            out.failures.push(format!("cannot lay out: {e}"));
            return out;
        }
    };
    if let Some(p) = load_blob(env, &blob, CHANNEL_ANY, &mut out) {
        if matches!(variant, 9 | 16) {
            check_pinned_anchor(env, &plan, &p, (anchor, avar), &mut out.failures);
        }
        verify_contents(env, &plan, &p, rng, &mut out.failures);
        env.settle(&blob, &p, &mut out.failures);
    }
    for &id in chain.iter().rev() {
        if let Err(e) = env.dev.plan_unload(id) {
            out.failures.push(format!(
                "unloading link {id} of a remote chain: {}",
                nhbm::io_errno_name(&e)
            ));
        }
    }
    out.expect(expect);
    out
}

/// The plan a case of `references` builds: a valid plan and a buffer in
/// it, with an anchor variable to refer to.
struct RefCase {
    plan: Plan,
    /// The plan's ids.
    used: HashSet<u32>,
    /// The buffer's id.
    buf: u32,
    anchor: u32,
    avar: u32,
    asize: u64,
    /// Plans of a REMOTE chain, unloaded (newest first) at the end.
    chain: Vec<u32>,
}

impl RefCase {
    /// A valid plan with a buffer added, and a random anchor variable.
    fn new(env: &Env, rng: &mut Rng) -> RefCase {
        let mut plan = valid_plan(rng, &env.gen, 6);
        let mut used = ids_of(&plan);
        let buf = fresh_id(&mut used, rng);
        plan.push(Record::buffer(buf, rng.range(1, 16 * KIB)));
        let anchor = env.anchors[rng.index(env.anchors.len())];
        let (avar, asize) = ANCHOR_VARS[rng.index(ANCHOR_VARS.len())];
        RefCase {
            plan,
            used,
            buf,
            anchor,
            avar,
            asize,
            chain: Vec::new(),
        }
    }

    /// An id the plan does not use yet.
    fn fresh(&mut self, rng: &mut Rng) -> u32 {
        fresh_id(&mut self.used, rng)
    }

    /// Variants 0 to 3, 6 and 11: pointer cycles, references to
    /// themselves, a pointer table of a buffer, a long pointer chain, a
    /// pointer larger than its target.
    fn pointer_shapes(&mut self, rng: &mut Rng, variant: u64) -> (String, Expect) {
        let buf = self.buf;
        match variant {
            0 => {
                let len = rng.range(2, 6) as usize;
                let ids: Vec<u32> = (0..len).map(|_| self.fresh(rng)).collect();
                for k in 0..len {
                    self.plan.push(Record::ptr(ids[k], ids[(k + 1) % len], 0));
                }
                (format!("pointer cycle of {len}"), Expect::Err(libc::EINVAL))
            }
            1 => {
                let id = self.fresh(rng);
                self.plan.push(Record::ptr(id, id, 0));
                ("pointer to itself".into(), Expect::Err(libc::EINVAL))
            }
            2 => {
                let id = self.fresh(rng);
                self.plan.push(Record::list(id, vec![buf, id]));
                ("list of itself".into(), Expect::Err(libc::EINVAL))
            }
            3 => {
                let id = self.fresh(rng);
                self.plan.push(Record::ptr_table(id, vec![buf]));
                (
                    "pointer table of a buffer".into(),
                    Expect::Err(libc::EINVAL),
                )
            }
            6 => {
                let len = rng.range(2, 200) as usize;
                let ids: Vec<u32> = (0..len).map(|_| self.fresh(rng)).collect();
                for k in 0..len {
                    let target = if k + 1 < len { ids[k + 1] } else { buf };
                    self.plan.push(Record::ptr(ids[k], target, 0));
                }
                (format!("pointer chain of {len}"), Expect::OkOr(ENOMEM_ONLY))
            }
            _ => {
                let id = self.fresh(rng);
                let bsize = self.plan.record(buf).map_or(1, |r| r.size);
                self.plan
                    .push(Record::ptr(id, buf, bsize + rng.range(1, 4096)));
                (
                    "pointer larger than its target".into(),
                    Expect::Err(libc::EINVAL),
                )
            }
        }
    }

    /// Variants 4, 5, 7, 8 and 12: a pointer or a list of a missing var, a
    /// REMOTE to another file's plan, to a missing var of an anchor, to a
    /// plan id from the edges.
    fn missing_targets(&mut self, env: &Env, rng: &mut Rng, variant: u64) -> (String, Expect) {
        let id = self.fresh(rng);
        match variant {
            4 => {
                let missing = self.fresh(rng);
                self.plan.push(Record::ptr(id, missing, 0));
                ("pointer to a missing var".into(), Expect::Err(libc::ENOENT))
            }
            5 => {
                let missing = self.fresh(rng);
                self.plan.push(Record::list(id, vec![self.buf, missing]));
                ("list of a missing var".into(), Expect::Err(libc::ENOENT))
            }
            7 => {
                let other = env.other_ids[rng.index(env.other_ids.len())];
                self.plan.push(Record::remote(id, 0, other, 1));
                (
                    format!("remote to plan {other} of another file"),
                    Expect::Err(libc::ENOENT),
                )
            }
            8 => {
                self.plan.push(Record::remote(id, 0, self.anchor, 3));
                (
                    "remote to a missing var of an anchor".into(),
                    Expect::Err(libc::ENOENT),
                )
            }
            _ => {
                let pid = *rng.pick(&[0, u32::MAX, 0x8000_0000, 4097]);
                self.plan.push(Record::remote(id, 0, pid, self.avar));
                (
                    format!("remote to plan id {pid:#x}"),
                    Expect::Err(libc::ENOENT),
                )
            }
        }
    }

    /// Variant 13: a REMOTE to a plan of this file that is gone by the
    /// time of the load.
    fn remote_to_unloaded_plan(&mut self, env: &mut Env, rng: &mut Rng) -> (String, Expect) {
        let tmp = Plan::new(0, 0).with(Record::buffer(1, 4096));
        let b = tmp.to_blob().unwrap();
        let gone = match env.load(&b, b.len() as u64, CHANNEL_ANY) {
            Ok(p) => {
                let _ = env.dev.plan_unload(p.plan_id);
                p.plan_id
            }
            Err(_) => 0,
        };
        let id = self.fresh(rng);
        self.plan.push(Record::remote(id, 0, gone, 1));
        (
            format!("remote to unloaded plan {gone}"),
            Expect::Err(libc::ENOENT),
        )
    }

    /// Variant 18: a chain of plans, each REMOTE into the one before,
    /// starting at the anchor: deeper than NHBM_MAX_REMOTE_DEPTH is E2BIG.
    fn remote_chain(&mut self, env: &mut Env, rng: &mut Rng) -> (String, Expect) {
        let depth = rng.range(1, u64::from(MAX_REMOTE_DEPTH) + 3) as u32;
        let mut below = (self.anchor, self.avar);
        for _ in 1..depth {
            let link = Plan::new(0, 0).with(Record::remote(1, 0, below.0, below.1));
            let b = link.to_blob().unwrap();
            match env.load(&b, b.len() as u64, CHANNEL_ANY) {
                Ok(p) => {
                    self.chain.push(p.plan_id);
                    below = (p.plan_id, 1);
                }
                Err(_) => break,
            }
        }
        let id = self.fresh(rng);
        self.plan.push(Record::remote(id, 0, below.0, below.1));
        let depth = self.chain.len() as u32 + 1;
        let expect = if depth > MAX_REMOTE_DEPTH {
            Expect::Err(libc::E2BIG)
        } else {
            Expect::OkOr(ENOMEM_ONLY)
        };
        (format!("remote chain of depth {depth}"), expect)
    }

    /// Variants 9, 10 and 14 to 17: REMOTEs into the anchor (pinning it,
    /// larger than its target, to its list, behind a pointer) and lists of
    /// every kind.
    fn anchor_references(&mut self, rng: &mut Rng, variant: u64) -> (String, Expect) {
        let (anchor, avar) = (self.anchor, self.avar);
        match variant {
            9 => {
                let id = self.fresh(rng);
                self.plan.push(Record::remote(id, 0, anchor, avar));
                ("remote pinning an anchor".into(), Expect::OkOr(ENOMEM_ONLY))
            }
            10 => {
                let id = self.fresh(rng);
                let size = self.asize + rng.range(1, 4096);
                self.plan.push(Record::remote(id, size, anchor, avar));
                (
                    "remote larger than its target".into(),
                    Expect::Err(libc::EINVAL),
                )
            }
            14 | 15 => self.lists_of_every_kind(rng),
            16 => {
                let rid = self.fresh(rng);
                let pid = self.fresh(rng);
                self.plan.push(Record::remote(rid, 0, anchor, avar));
                self.plan.push(Record::ptr(pid, rid, 0));
                ("pointer to a remote".into(), Expect::OkOr(ENOMEM_ONLY))
            }
            _ => {
                let id = self.fresh(rng);
                self.plan.push(Record::remote(id, 0, anchor, 9));
                (
                    "remote to an anchor's list".into(),
                    Expect::OkOr(ENOMEM_ONLY),
                )
            }
        }
    }

    /// Variants 14 and 15: lists of every kind (a REMOTE among them), a
    /// list of lists, and a pointer table of lists.
    fn lists_of_every_kind(&mut self, rng: &mut Rng) -> (String, Expect) {
        let l1 = self.fresh(rng);
        let l2 = self.fresh(rng);
        let t = self.fresh(rng);
        let mut members: Vec<u32> = self.plan.records.iter().map(|r| r.var_id).collect();
        let rid = self.fresh(rng);
        self.plan
            .push(Record::remote(rid, 0, self.anchor, self.avar));
        members.push(rid);
        let n = members.len();
        let pick: Vec<u32> = (0..rng.range(1, 8))
            .map(|_| members[rng.index(n)])
            .collect();
        self.plan.push(Record::list(l1, pick));
        self.plan.push(Record::list(l2, vec![self.buf, rid, l1]));
        self.plan.push(Record::ptr_table(t, vec![l1, l2, l1]));
        (
            "lists of every kind and a pointer table".into(),
            Expect::OkOr(ENOMEM_ONLY),
        )
    }
}

/// The anchor `(anchor, avar)` is pinned while the loaded plan `p` points
/// into it, and every REMOTE to it resolves to the anchor's own address.
fn check_pinned_anchor(
    env: &Env,
    plan: &Plan,
    p: &LoadedPlan,
    (anchor, avar): (u32, u32),
    f: &mut Vec<String>,
) {
    match env.dev.plan_unload(anchor) {
        Err(e) if errno_of(&e) == libc::EBUSY => {}
        Err(e) => f.push(format!(
            "unloading the pinned anchor: {}, want EBUSY",
            nhbm::io_errno_name(&e)
        )),
        Ok(()) => f.push("the pinned anchor unloaded while a REMOTE pointed into it".into()),
    }
    // The remote resolves to the anchor's own address.
    let want = env.dev.resolve(anchor, avar, 0, 0).ok();
    for (r, &a) in plan.records.iter().zip(&p.addrs) {
        if matches!(r.kind, Kind::Remote { .. } | Kind::Ptr { .. })
            && plan.records.iter().any(|x| {
                x.var_id == r.var_id
                    && matches!(x.kind, Kind::Remote { remote_plan_id, remote_var_id }
                        if remote_plan_id == anchor && remote_var_id == avar)
            })
            && Some(a) != want
        {
            f.push(format!(
                "remote var {} at {a:#x}, the anchor's var at {want:x?}",
                r.var_id
            ));
        }
    }
}

/// Limits and sizes: nmem, list counts, alignment, sizes and scratchpads
/// past what the device has, big but legal plans, batch counts.
pub fn huge_counts(env: &mut Env, rng: &mut Rng) -> CaseOut {
    let plan = valid_plan(rng, &env.gen, 4);
    let raw = plan.to_raw().expect("generated plans lay out");
    let anchor = env.anchors[0];
    let variant = rng.below(14);
    let (what, expect, blob) = match variant {
        0 => nmem_past_limit(rng, raw),
        1 => nmem_past_blob(rng, raw),
        2 => list_count_past_limit(rng, &plan),
        3 => long_list(rng, &plan),
        4 => lists_past_total_limit(rng, &plan),
        5 => alignment_edge(rng, &plan),
        6 => huge_buffer(env, rng, &plan),
        7 => many_records(rng),
        8 => huge_scratchpad(env, rng, &plan),
        9 => large_buffer(env, rng, &plan),
        10 | 11 => return batch_limits(env, rng, anchor),
        _ => return xfer_limits(env, rng, anchor),
    };
    let mut out = CaseOut::new(what);
    if let Some(p) = load_blob(env, &blob, CHANNEL_ANY, &mut out) {
        if variant == 3 {
            check_long_list_ends(env, &blob, &p, &mut out.failures);
        }
        env.settle(&blob, &p, &mut out.failures);
    }
    if variant != 7 && variant != 3 && variant != 9 {
        judge(env, &blob, &mut out);
    }
    out.expect(expect);
    out
}

/// A case of `huge_counts`: what it sends, what the kernel must answer,
/// and the blob.
type BlobCase = (String, Expect, Vec<u8>);

/// nmem past the limit on records.
fn nmem_past_limit(rng: &mut Rng, mut raw: RawPlan) -> BlobCase {
    raw.header.nmem = *rng.pick(&[MAX_PLAN_RECORDS + 1, u32::MAX, 1 << 31]);
    (
        format!("nmem {:#x}", raw.header.nmem),
        Expect::Err(libc::E2BIG),
        raw.to_bytes(),
    )
}

/// nmem within the limit but more records than the blob holds.
fn nmem_past_blob(rng: &mut Rng, mut raw: RawPlan) -> BlobCase {
    let fit = raw.records.len() as u32 + (raw.data.len() / MEM_REF_SIZE) as u32;
    raw.header.nmem = rng.range(u64::from(fit) + 1, u64::from(MAX_PLAN_RECORDS)) as u32;
    (
        format!("nmem {} past the blob", raw.header.nmem),
        Expect::Err(libc::EINVAL),
        raw.to_bytes(),
    )
}

/// A list whose count is past the limit on one list.
fn list_count_past_limit(rng: &mut Rng, plan: &Plan) -> BlobCase {
    let count = *rng.pick(&[MAX_LIST_COUNT + 1, u32::MAX, 1 << 31]);
    let id = fresh_id(&mut ids_of(plan), rng);
    let mut p = plan.clone();
    p.push(Record::list(id, vec![p.records[0].var_id]));
    let mut r = p.to_raw().unwrap();
    let last = r.records.last_mut().unwrap();
    let mut u = last.u.list();
    u.count = count;
    last.u = MemRefUnion::from(u);
    last.size = 8 * u64::from(count);
    (
        format!("list count {count:#x}"),
        Expect::Err(libc::E2BIG),
        r.to_bytes(),
    )
}

/// A real list of 2^k entries (rarely the maximum).
fn long_list(rng: &mut Rng, plan: &Plan) -> BlobCase {
    let k = if rng.chance(1, 40) {
        20
    } else {
        rng.range(8, 16)
    };
    let count = 1usize << k;
    let target = plan.records[0].var_id;
    let id = fresh_id(&mut ids_of(plan), rng);
    let p = plan.clone().with(Record::list(id, vec![target; count]));
    (
        format!("list of {count} entries"),
        Expect::OkOr(ENOMEM_ONLY),
        p.to_raw().unwrap().to_bytes(),
    )
}

/// Five lists of the maximum count sharing one id array: over the limit
/// on all lists together.
fn lists_past_total_limit(rng: &mut Rng, plan: &Plan) -> BlobCase {
    let target = plan.records[0].var_id;
    let mut used = ids_of(plan);
    let mut p = plan.clone();
    let ids: Vec<u32> = (0..5).map(|_| fresh_id(&mut used, rng)).collect();
    for &id in &ids {
        p.push(Record::list(id, vec![target]));
    }
    let mut r = p.to_raw().unwrap();
    let start = blob_len(&r);
    r.data
        .extend(std::iter::repeat_n(target.to_le_bytes(), MAX_LIST_COUNT as usize).flatten());
    for m in r.records.iter_mut().filter(|m| ids.contains(&m.var_id)) {
        m.u = MemRefUnion::from(MrList {
            count: MAX_LIST_COUNT,
            rsvd: 0,
            ids_off: start,
        });
        m.size = 8 * u64::from(MAX_LIST_COUNT);
    }
    (
        "5 lists of the maximum count".into(),
        Expect::Err(libc::E2BIG),
        r.to_bytes(),
    )
}

/// A buffer aligned to the maximum alignment or past it.
fn alignment_edge(rng: &mut Rng, plan: &Plan) -> BlobCase {
    let big = rng.chance(1, 2);
    let id = fresh_id(&mut ids_of(plan), rng);
    let align = if big {
        MAX_ALIGNMENT
    } else {
        MAX_ALIGNMENT << rng.range(1, 33)
    };
    let p = plan.clone().with(Record::buffer(id, 4096).alignment(align));
    let mut r = p.to_raw().unwrap();
    r.records.last_mut().unwrap().alignment = align;
    (
        format!("alignment {align:#x}"),
        if big {
            Expect::OkOr(ENOMEM_ONLY)
        } else {
            Expect::Err(libc::E2BIG)
        },
        r.to_bytes(),
    )
}

/// A buffer larger than a channel, or than any device.
fn huge_buffer(env: &Env, rng: &mut Rng, plan: &Plan) -> BlobCase {
    let id = fresh_id(&mut ids_of(plan), rng);
    let (size, e) = match rng.below(3) {
        0 => (
            env.info.channel_size[0] + rng.range(1, GIB),
            Expect::ErrIn(ENOMEM_ONLY),
        ),
        1 => (u64::MAX - rng.below(4096), Expect::ErrIn(TOO_BIG)),
        _ => (1 << rng.range(40, 62), Expect::ErrIn(ENOMEM_ONLY)),
    };
    let p = plan.clone().with(Record::buffer(id, size));
    (
        format!("buffer of {size:#x} bytes"),
        e,
        p.to_raw().unwrap().to_bytes(),
    )
}

/// A plan of hundreds to thousands of small buffers.
fn many_records(rng: &mut Rng) -> BlobCase {
    let n = rng.range(300, 3000) as u32;
    let mut p = Plan::new(0, 0);
    for v in 0..n {
        p.push(Record::buffer(v + 1, rng.range(1, 256)));
    }
    (
        format!("{n} records"),
        Expect::OkOr(ENOMEM_ONLY),
        p.to_raw().unwrap().to_bytes(),
    )
}

/// A local scratchpad larger than a channel, or than any device.
fn huge_scratchpad(env: &Env, rng: &mut Rng, plan: &Plan) -> BlobCase {
    let id = fresh_id(&mut ids_of(plan), rng);
    let scratch = match rng.below(3) {
        0 => env.info.channel_size[0] + rng.range(1, GIB),
        1 => 1 << rng.range(40, 62),
        _ => u64::MAX - rng.below(4096),
    };
    let mut p = plan.clone();
    p.local_scratchpad_size = scratch;
    p.push(Record::virtual_tmp_buf(id, 4096, nhbm::Backing::Local, 0));
    (
        format!("local scratchpad of {scratch:#x} bytes"),
        Expect::ErrIn(TOO_BIG),
        p.to_raw().unwrap().to_bytes(),
    )
}

/// A large but legal buffer.
fn large_buffer(env: &Env, rng: &mut Rng, plan: &Plan) -> BlobCase {
    let id = fresh_id(&mut ids_of(plan), rng);
    // Gigabytes on a simulated device (sparse); megabytes on an
    // emulated PCI function, whose BAR4 is host memory.
    let unit = if env.info.simulated != 0 { GIB } else { MIB };
    let size = rng.range(4, 12) * unit;
    let p = plan.clone().with(Record::buffer(id, size));
    (
        format!("large buffer of {size:#x} bytes"),
        Expect::OkOr(ENOMEM_ONLY),
        p.to_raw().unwrap().to_bytes(),
    )
}

/// The first and last table entries of the long list of `blob`, loaded as
/// `p`, hold the target's address.
fn check_long_list_ends(env: &Env, blob: &[u8], p: &LoadedPlan, f: &mut Vec<String>) {
    let list = RawPlan::from_bytes(blob).ok().and_then(|r| {
        r.records
            .iter()
            .position(|m| m.mr_type == MR_LIST && m.u.list().count > 255)
    });
    if let Some(li) = list {
        let raw = RawPlan::from_bytes(blob).unwrap();
        let lid = raw.records[li].var_id;
        let count = u64::from(raw.records[li].u.list().count);
        let want = p.addrs[0].to_le_bytes().to_vec();
        for off in [0, 8 * (count - 1)] {
            match read_var(env, p.plan_id, lid, off, 8) {
                Ok(b) if b == want => {}
                Ok(b) => f.push(format!("list entry at {off:#x} is {b:x?}")),
                Err(e) => f.push(e),
            }
        }
    }
}

/// RESOLVE_BATCH past its limit, across a guard page, and at a large legal
/// count.
fn batch_limits(env: &mut Env, rng: &mut Rng, anchor: u32) -> CaseOut {
    let qsize = std::mem::size_of::<ResolveQuery>();
    let fit = env.scratch.usable() / qsize;
    let (avar, asize) = ANCHOR_VARS[0];
    let q = ResolveQuery {
        var_id: avar,
        status: 0,
        offset: rng.below(asize),
        size: 1,
        addr: 0,
    };
    let one = q.as_bytes().to_vec();
    let variant = rng.below(3);
    let (count, placed) = match variant {
        0 => (
            *rng.pick(&[MAX_BATCH + 1, u32::MAX, 1 << 20]),
            fit.min(1024),
        ),
        1 => {
            let n = rng.range(2, fit as u64);
            (n as u32, rng.range(1, n - 1) as usize)
        }
        _ => {
            let n = rng.range(1, fit.min(MAX_BATCH as usize) as u64) as u32;
            (n, n as usize)
        }
    };
    let placed = placed.min(count as usize);
    let queries: Vec<u8> = std::iter::repeat_n(one.clone(), placed).flatten().collect();
    let addr = env.scratch.place_before_guard(&queries, 0);
    let mut arg = ResolveBatch {
        plan_id: anchor,
        count,
        queries: addr,
    };
    let mut out = CaseOut::new(format!(
        "RESOLVE_BATCH count {count} with {placed} queries before a guard page"
    ));
    // SAFETY: the queries live in our guarded mapping; past them is the
    // guard page, so the kernel faults rather than touching other memory.
    let r = unsafe {
        env.dev
            .ioctl_raw(IOC_RESOLVE_BATCH, &mut arg as *mut _ as *mut libc::c_void)
    };
    out.errno = r.err().map(|e| errno_of(&e));
    match variant {
        0 => out.expect(Expect::Err(libc::E2BIG)),
        1 => out.expect(Expect::Err(libc::EFAULT)),
        _ => {
            out.expect(Expect::Ok);
            check_batch_answers(env, anchor, &q, queries.len(), &mut out.failures);
        }
    }
    out
}

/// After a RESOLVE_BATCH of `len` bytes of copies of `q` on plan `anchor`:
/// every query answered status 0 and the address RESOLVE gives.
fn check_batch_answers(env: &Env, anchor: u32, q: &ResolveQuery, len: usize, f: &mut Vec<String>) {
    let want = env.dev.resolve(anchor, q.var_id, q.offset, 1).ok();
    let back = env.scratch.read_before_guard(len);
    for (k, c) in back.chunks(std::mem::size_of::<ResolveQuery>()).enumerate() {
        let got = ResolveQuery::read_from_bytes(c).expect("whole queries");
        if got.status != 0 || Some(got.addr) != want {
            f.push(format!(
                "query {k}: status {} addr {:#x}, want 0 and {want:x?}",
                got.status, got.addr
            ));
            break;
        }
    }
}

/// MEM_READ / MEM_WRITE with lengths and offsets from the edges.
fn xfer_limits(env: &mut Env, rng: &mut Rng, anchor: u32) -> CaseOut {
    let (avar, asize) = ANCHOR_VARS[rng.index(ANCHOR_VARS.len())];
    let write = rng.chance(1, 2);
    let (offset, len, expect) = match rng.below(5) {
        0 => (
            0,
            *rng.pick(&[u64::MAX, 1 << 40, asize + 1]),
            Expect::Err(libc::EINVAL),
        ),
        1 => (asize, rng.range(1, 4096), Expect::Err(libc::EINVAL)),
        2 => (
            u64::MAX - rng.below(8),
            rng.range(1, 16),
            Expect::Err(libc::EINVAL),
        ),
        3 => (rng.below(asize), 0, Expect::OkOr(&[libc::EINVAL])),
        _ => {
            let off = rng.below(asize);
            (
                off,
                rng.range(1, (asize - off).min(env.scratch.usable() as u64)),
                Expect::Ok,
            )
        }
    };
    let n = (len as usize).min(env.scratch.usable());
    let buf = env.scratch.addr_before_guard(n);
    let mut arg = MemXfer {
        plan_id: anchor,
        var_id: avar,
        offset,
        len,
        buf,
    };
    let mut out = CaseOut::new(format!(
        "MEM_{} var {avar} offset {offset:#x} len {len:#x}",
        if write { "WRITE" } else { "READ" }
    ));
    // SAFETY: buf is the last n bytes before our guard page; any length
    // beyond them faults in the guard page.
    let r = unsafe { env.dev.mem_xfer_raw(write, &mut arg) };
    out.errno = r.err().map(|e| errno_of(&e));
    out.expect(expect);
    out
}

/// This driver's ioctls, by name.
const IOCTLS: [(u32, &str); 15] = [
    (IOC_DEVICE_INFO, "DEVICE_INFO"),
    (IOC_PLAN_LOAD, "PLAN_LOAD"),
    (IOC_PLAN_UNLOAD, "PLAN_UNLOAD"),
    (IOC_RESOLVE, "RESOLVE"),
    (IOC_RESOLVE_BATCH, "RESOLVE_BATCH"),
    (IOC_MEM_WRITE, "MEM_WRITE"),
    (IOC_MEM_READ, "MEM_READ"),
    (IOC_MEM_STATS, "MEM_STATS"),
    (IOC_RESET, "RESET"),
    (IOC_MAP_OFFSET, "MAP_OFFSET"),
    (IOC_CORES, "CORES"),
    (IOC_RESET_START, "RESET_START"),
    (IOC_RESET_WAIT, "RESET_WAIT"),
    (IOC_PLAN_EXPORT, "PLAN_EXPORT"),
    (IOC_PLAN_IMPORT, "PLAN_IMPORT"),
];

/// Ioctl numbers that are not this driver's (other magics, other numbers,
/// sizes and directions of 0xBB) and this driver's with random argument
/// bytes, on a file without plans.
pub fn ioctl_numbers(env: &mut Env, rng: &mut Rng) -> CaseOut {
    let cmd = random_ioctl_cmd(rng);
    let is_real = IOCTLS.iter().any(|&(c, _)| c == cmd);
    // The argument: random bytes in front of a guard page, or an address
    // that faults. Random bytes never name this file's plans (it has none)
    // nor a readable blob.
    let size = ((cmd >> 16) & 0x3fff) as usize;
    let arg_kind = rng.below(8);
    let mut bytes = rng.bytes(size.max(64));
    if (cmd == IOC_RESET || cmd == IOC_RESET_START) && bytes.len() >= 16 {
        // Never a real reset from random bytes: type 0 is refused.
        bytes[0..4].copy_from_slice(&0u32.to_le_bytes());
    }
    let arg = match arg_kind {
        0 => 0,
        1 => env.unmapped(),
        2 => KERNEL_ADDRS[rng.index(KERNEL_ADDRS.len())],
        _ => env.scratch.place_before_guard(&bytes, 0),
    };
    let mut out = CaseOut::new(format!("cmd {cmd:#010x} arg kind {arg_kind}"));
    // SAFETY: the argument is either unmapped/kernel memory (faults) or
    // our guarded scratch buffer, large enough for the encoded size, with
    // a guard page after it. Random bytes hold no readable pointers.
    let r = unsafe { env.spare.ioctl_raw(cmd, arg as *mut libc::c_void) };
    out.errno = r.as_ref().err().map(errno_of);
    if !is_real {
        out.expect(Expect::Err(libc::ENOTTY));
    } else if arg_kind <= 2 {
        out.expect(Expect::Err(libc::EFAULT));
    } else {
        out.expect(Expect::OkOr(&[
            libc::EINVAL,
            libc::E2BIG,
            libc::ENOENT,
            libc::EFAULT,
            libc::EOPNOTSUPP,
            // CORES claiming a core another open file owns.
            libc::EBUSY,
            // PLAN_IMPORT of a random descriptor: none is a dma-buf.
            libc::EBADF,
        ]));
    }
    if r.is_ok() && cmd == IOC_PLAN_LOAD {
        out.failures
            .push("PLAN_LOAD of random bytes succeeded".into());
    }
    out
}

/// An ioctl number of 0xBB (mostly one of the first fifteen numbers), one of
/// this driver's with its direction or size changed, one of another magic,
/// or one of this driver's.
fn random_ioctl_cmd(rng: &mut Rng) -> u32 {
    match rng.below(10) {
        0..=3 => {
            let nr = if rng.chance(3, 4) {
                rng.below(15)
            } else {
                rng.below(256)
            } as u32;
            ioc(
                rng.below(4) as u32,
                IOC_MAGIC,
                nr,
                rng.below(1 << 14) as usize,
            )
        }
        4..=5 => altered_ioctl_cmd(rng),
        6..=7 => foreign_ioctl_cmd(rng),
        _ => IOCTLS[rng.index(IOCTLS.len())].0,
    }
}

/// A real number with one of dir or size changed.
fn altered_ioctl_cmd(rng: &mut Rng) -> u32 {
    let real = IOCTLS[rng.index(IOCTLS.len())].0;
    if rng.chance(1, 2) {
        real ^ (1 << (30 + rng.below(2)))
    } else {
        let size = (real >> 16) & 0x3fff;
        let new = match rng.below(3) {
            0 => size + rng.range(1, 8) as u32,
            1 => size.saturating_sub(rng.range(1, 8) as u32),
            _ => rng.below(1 << 14) as u32,
        };
        (real & !(0x3fff << 16)) | ((new & 0x3fff) << 16)
    }
}

/// An ioctl number of another magic, none the VFS answers first.
fn foreign_ioctl_cmd(rng: &mut Rng) -> u32 {
    // Magics the VFS or a filesystem answers before the driver (FIOCLEX,
    // FIFREEZE, FS_IOC_*, FICLONE, FIGETBSZ, ...): never sent.
    const VFS_MAGICS: [u32; 7] = [0x00, 0x12, 0x15, 0x54, 0x58, 0x66, 0x94];
    let mut magic = rng.below(256) as u32;
    while magic == IOC_MAGIC || VFS_MAGICS.contains(&magic) {
        magic = rng.below(256) as u32;
    }
    ioc(
        rng.below(4) as u32,
        magic,
        rng.below(256) as u32,
        rng.below(1 << 14) as usize,
    )
}

/// User pointers that fault: the ioctl argument itself, the blob, the addrs
/// array, batch queries and transfer buffers; unmapped, inaccessible,
/// read-only, kernel and non-canonical addresses, and buffers that cross
/// into a guard page. Each must give EFAULT and leave nothing behind.
pub fn faulting_pointers(env: &mut Env, rng: &mut Rng) -> CaseOut {
    let anchor = env.anchors[rng.index(env.anchors.len())];
    let (avar, asize) = ANCHOR_VARS[rng.index(ANCHOR_VARS.len())];
    let variant = rng.below(8);
    let mut out = CaseOut::new(String::new());
    match variant {
        0 | 1 => faulting_argument(env, rng, variant == 0, &mut out),
        2 => read_only_argument(env, rng, anchor, avar, asize, &mut out),
        3 | 4 => faulting_load_buffers(env, rng, variant == 3, &mut out),
        5 => faulting_batch_queries(env, rng, anchor, avar, &mut out),
        _ => faulting_xfer_buffer(env, rng, anchor, avar, asize, &mut out),
    }
    out
}

/// An address that faults, and what it is: NULL, an unmapped page, a
/// PROT_NONE page or a kernel or non-canonical address.
fn bad_pointer(env: &mut Env, rng: &mut Rng) -> (u64, String) {
    match rng.below(5) {
        0 => (0, "NULL".into()),
        1 => (env.unmapped(), "unmapped page".into()),
        2 => (env.prot_none(), "PROT_NONE page".into()),
        _ => {
            let a = KERNEL_ADDRS[rng.index(KERNEL_ADDRS.len())];
            (a, format!("{a:#x}"))
        }
    }
}

/// The argument pointer of each ioctl: a bad address, or (`bad` false) a
/// valid-looking struct whose tail is in the guard page.
fn faulting_argument(env: &mut Env, rng: &mut Rng, bad: bool, out: &mut CaseOut) {
    let (cmd, name) = IOCTLS[rng.index(IOCTLS.len())];
    let size = ((cmd >> 16) & 0x3fff) as usize;
    let (arg, what) = if bad {
        bad_pointer(env, rng)
    } else {
        // A valid-looking struct whose tail is in the guard page.
        let keep = rng.below(size as u64) as usize;
        let mut b = vec![0u8; keep];
        rng.fill(&mut b);
        cut_by_guard(env, &b, size)
    };
    out.what = format!("{name} with its argument at {what}");
    // SAFETY: the argument faults (bad address or guard page).
    let r = unsafe { env.dev.ioctl_raw(cmd, arg as *mut libc::c_void) };
    out.errno = r.err().map(|e| errno_of(&e));
    out.expect(Expect::Err(libc::EFAULT));
}

/// The first part of a `size`-byte argument, `bytes`, placed so that the
/// rest of it lies in the guard page: its address and a description.
fn cut_by_guard(env: &mut Env, bytes: &[u8], size: usize) -> (u64, String) {
    (
        env.scratch.place_before_guard(bytes, 0),
        format!("{} of {size} bytes before a guard page", bytes.len()),
    )
}

/// Results written back to a read-only argument.
fn read_only_argument(
    env: &mut Env,
    rng: &mut Rng,
    anchor: u32,
    avar: u32,
    asize: u64,
    out: &mut CaseOut,
) {
    let (cmd, bytes, name) = read_only_request(env, rng, anchor, avar, asize);
    out.what = format!("{name} with a read-only argument");
    let arg = match env.ro.set(&bytes) {
        Ok(a) => a,
        Err(e) => {
            out.failures.push(format!("read-only page: {e}"));
            return;
        }
    };
    env.loads += u64::from(cmd == IOC_PLAN_LOAD);
    // SAFETY: the argument is our read-only page (the kernel's
    // write back faults); the blob is in our guarded scratch.
    let r = unsafe { env.dev.ioctl_raw(cmd, arg as *mut libc::c_void) };
    out.errno = r.err().map(|e| errno_of(&e));
    out.expect(Expect::Err(libc::EFAULT));
}

/// A request whose answer is written back into its argument: the ioctl,
/// the argument's bytes and a name. A PLAN_LOAD's blob is placed in the
/// guarded scratch.
fn read_only_request(
    env: &mut Env,
    rng: &mut Rng,
    anchor: u32,
    avar: u32,
    asize: u64,
) -> (u32, Vec<u8>, &'static str) {
    let plan = valid_plan(rng, &env.gen, 6);
    let blob = plan.to_raw().unwrap().to_bytes();
    match rng.below(4) {
        0 => (
            IOC_DEVICE_INFO,
            DeviceInfo::default().as_bytes().to_vec(),
            "DEVICE_INFO",
        ),
        1 => (
            IOC_MEM_STATS,
            MemStats::default().as_bytes().to_vec(),
            "MEM_STATS",
        ),
        2 => {
            let q = Resolve {
                plan_id: anchor,
                var_id: avar,
                offset: rng.below(asize),
                size: 1,
                addr: 0,
            };
            (IOC_RESOLVE, q.as_bytes().to_vec(), "RESOLVE")
        }
        _ => {
            let addr = env.scratch.place_before_guard(&blob, 0);
            let a = PlanLoad {
                blob: addr,
                blob_len: blob.len() as u64,
                addrs: 0,
                channel: CHANNEL_ANY,
                ..Default::default()
            };
            (
                IOC_PLAN_LOAD,
                a.as_bytes().to_vec(),
                "PLAN_LOAD of a valid plan",
            )
        }
    }
}

/// PLAN_LOAD of a valid plan whose blob (`blob_faults`) or addrs array
/// faults.
fn faulting_load_buffers(env: &mut Env, rng: &mut Rng, blob_faults: bool, out: &mut CaseOut) {
    let plan = valid_plan(rng, &env.gen, 8);
    let blob = plan.to_raw().unwrap().to_bytes();
    let n = plan.records.len();
    let mut arg = PlanLoad {
        blob: 0,
        blob_len: blob.len() as u64,
        addrs: 0,
        channel: CHANNEL_ANY,
        ..Default::default()
    };
    if blob_faults {
        let (a, what) = faulting_blob(env, rng, &blob);
        out.what = format!("PLAN_LOAD with the blob at {what}");
        arg.blob = a;
    } else {
        arg.blob = env.place_blob(&blob);
        let (a, what) = faulting_addrs(env, rng, n);
        out.what = format!("PLAN_LOAD with addrs at {what}");
        arg.addrs = a;
    }
    env.loads += 1;
    // SAFETY: every pointer in `arg` is either ours (each before a
    // guard page, or the read-only page) or faults.
    let r = unsafe { env.dev.plan_load_raw(&mut arg) };
    out.errno = r.as_ref().err().map(errno_of);
    if r.is_ok() {
        out.loaded = true;
        let _ = env.dev.plan_unload(arg.plan_id);
    }
    out.expect(Expect::Err(libc::EFAULT));
}

/// Where a blob that faults lies: a bad address, or part of `blob` before
/// a guard page.
fn faulting_blob(env: &mut Env, rng: &mut Rng, blob: &[u8]) -> (u64, String) {
    if rng.chance(1, 2) {
        bad_pointer(env, rng)
    } else {
        let keep = rng.below(blob.len() as u64) as usize;
        (
            env.place_blob(&blob[..keep]),
            format!("{keep} of {} bytes before a guard page", blob.len()),
        )
    }
}

/// Where an addrs array for `n` records that faults lies: a bad address
/// (never NULL), the read-only page, or room for fewer addresses.
fn faulting_addrs(env: &mut Env, rng: &mut Rng, n: usize) -> (u64, String) {
    match rng.below(3) {
        // addrs 0 means "no addresses wanted": never NULL here.
        0 => match bad_pointer(env, rng) {
            (0, _) => (env.unmapped(), "unmapped page".to_string()),
            b => b,
        },
        1 => (env.ro.addr(), "a read-only page".to_string()),
        _ => {
            // Room for fewer addresses than records.
            let room = rng.below(n as u64) as usize;
            (
                env.scratch.addr_before_guard(8 * room),
                format!("room for {room} of {n} addresses"),
            )
        }
    }
}

/// RESOLVE_BATCH queries that fault, read-only queries.
fn faulting_batch_queries(env: &mut Env, rng: &mut Rng, anchor: u32, avar: u32, out: &mut CaseOut) {
    let count = rng.range(1, 64) as u32;
    let qsize = std::mem::size_of::<ResolveQuery>();
    let (addr, what) = match rng.below(3) {
        0 => bad_pointer(env, rng),
        1 => {
            let q = ResolveQuery {
                var_id: avar,
                ..Default::default()
            };
            let b: Vec<u8> =
                std::iter::repeat_n(q.as_bytes().to_vec(), (count as usize).min(4096 / qsize))
                    .flatten()
                    .collect();
            match env.ro.set(&b) {
                Ok(a) => (a, "a read-only page".to_string()),
                Err(e) => {
                    out.failures.push(format!("read-only page: {e}"));
                    return;
                }
            }
        }
        _ => {
            let len = count as usize * qsize;
            let keep = rng.below(len as u64) as usize;
            cut_by_guard(env, &vec![0u8; keep], len)
        }
    };
    out.what = format!("RESOLVE_BATCH of {count} with the queries at {what}");
    let mut arg = ResolveBatch {
        plan_id: anchor,
        count,
        queries: addr,
    };
    // SAFETY: the queries fault or lie in our guarded/read-only pages.
    let r = unsafe {
        env.dev
            .ioctl_raw(IOC_RESOLVE_BATCH, &mut arg as *mut _ as *mut libc::c_void)
    };
    out.errno = r.err().map(|e| errno_of(&e));
    out.expect(Expect::Err(libc::EFAULT));
}

/// MEM_WRITE from / MEM_READ into memory that faults.
fn faulting_xfer_buffer(
    env: &mut Env,
    rng: &mut Rng,
    anchor: u32,
    avar: u32,
    asize: u64,
    out: &mut CaseOut,
) {
    let write = rng.chance(1, 2);
    let len = rng.range(1, asize.min(env.scratch.usable() as u64));
    let off = rng.below(asize - len + 1);
    let (buf, what) = match rng.below(3) {
        0 => bad_pointer(env, rng),
        1 if !write => (env.ro.addr(), "a read-only page".to_string()),
        _ => {
            let keep = rng.below(len) as usize;
            (
                env.scratch.addr_before_guard(keep),
                format!("{keep} of {len} bytes before a guard page"),
            )
        }
    };
    out.what = format!(
        "MEM_{} of {len} bytes with the buffer at {what}",
        if write { "WRITE" } else { "READ" }
    );
    let mut arg = MemXfer {
        plan_id: anchor,
        var_id: avar,
        offset: off,
        len,
        buf,
    };
    // SAFETY: the buffer faults, or is our read-only page, or ends at
    // our guard page.
    let r = unsafe { env.dev.mem_xfer_raw(write, &mut arg) };
    out.errno = r.err().map(|e| errno_of(&e));
    out.expect(Expect::Err(libc::EFAULT));
}
