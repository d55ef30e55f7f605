// SPDX-License-Identifier: GPL-2.0-only

//! `/dev/neuron_hbmN`: one misc device per Neuron device, per-open-file plans
//! and the ioctl surface of include/uapi/linux/neuron_hbm.h.
//!
//! Locking: each open file has one mutex over its plan table, held only for
//! table lookups, updates and walks (MEM_STATS and fdinfo sum at most
//! `MAX_PLANS_PER_FILE` plans), never across a user copy, a device transfer,
//! staging or printing. Ioctls that move data take a reference on the plan
//! and drop the lock first, so a concurrent unload cannot free memory under a
//! transfer.

pub(crate) mod fdinfo;
pub(crate) mod mapping;
pub(crate) mod sharing;
pub(crate) mod telemetry;

use crate::{
    abstractions::capability,
    abstractions::helpers::{
        NHBM_ATTR_ARCH, NHBM_ATTR_CHANNELS, NHBM_ATTR_COUNT, NHBM_ATTR_REGIONS, NHBM_ATTR_SIMULATED,
    },
    abstractions::miscdev::{AttrValues, MiscNode, NodeFile},
    abstractions::resched,
    abstractions::trace,
    abstractions::user_source::{UserSink, UserSource},
    abstractions::vma::{Backing, Fault, NewMapping, Space},
    arch::{MAX_CHANNELS, MAX_REGIONS, SBUF_SIZE},
    chardev::mapping::FileMaps,
    chardev::telemetry::Telemetry,
    device::node_index::MAX_NODES,
    device::reset_batch::{Request, Requester},
    device::Device,
    hw::fw::ResetKind,
    plan::{
        blob::UserBlob,
        ids::{IdNode, PlanIds},
        parse::parse,
        stage::stage,
        Plan, Remotes,
    },
    uapi::{self, *},
};
use kernel::{
    fs::File,
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    seq_file::{seq_print, SeqFile},
    sync::aref::ARef,
    sync::{Arc, Mutex},
    transmute::AsBytes,
    uaccess::{UserPtr, UserSlice},
};

/// Device node names, one per device index.
const NODE_NAMES: [&CStr; MAX_NODES] = [
    c"neuron_hbm0",
    c"neuron_hbm1",
    c"neuron_hbm2",
    c"neuron_hbm3",
    c"neuron_hbm4",
    c"neuron_hbm5",
    c"neuron_hbm6",
    c"neuron_hbm7",
    c"neuron_hbm8",
    c"neuron_hbm9",
    c"neuron_hbm10",
    c"neuron_hbm11",
    c"neuron_hbm12",
    c"neuron_hbm13",
    c"neuron_hbm14",
    c"neuron_hbm15",
];

/// Record addresses copied out per user copy by PLAN_LOAD.
const ADDRS_PIECE: usize = 512;

/// Queries of a RESOLVE_BATCH handled per user copy.
const BATCH_PIECE: usize = 256;

/// The registered device node of one [`Device`], mode 0660.
#[pin_data]
pub(crate) struct Node {
    #[pin]
    _telemetry: Telemetry,
    #[pin]
    misc: MiscNode<OpenFile>,
}

impl Node {
    /// Registers `/dev/neuron_hbm<dev.index>` for `dev`, under `parent` in
    /// sysfs (the PCI function) if given.
    pub(crate) fn new(
        dev: Arc<Device>,
        parent: Option<ARef<kernel::device::Device>>,
    ) -> Result<Pin<KBox<Self>>> {
        let name = *NODE_NAMES.get(dev.index as usize).ok_or(ENOSPC)?;
        let mut attrs: AttrValues = [0; NHBM_ATTR_COUNT as usize];
        attrs[NHBM_ATTR_ARCH as usize] = dev.info.arch as u64;
        attrs[NHBM_ATTR_SIMULATED as usize] = u64::from(dev.sim().is_some());
        attrs[NHBM_ATTR_CHANNELS as usize] = dev.info.nr_channels as u64;
        attrs[NHBM_ATTR_REGIONS as usize] = dev.grid.geometry().regions as u64;
        KBox::pin_init(
            try_pin_init!(Self {
                _telemetry <- Telemetry::new(name, &dev),
                // Registered last: nothing after it can fail.
                misc <- MiscNode::register(name, 0o660, attrs, dev, parent),
            }),
            GFP_KERNEL,
        )
    }
}

struct PlanEntry {
    plan: Arc<Plan>,
    /// Plans of this file whose REMOTE records point into this one.
    pinned_by: u32,
    /// Another file's plan, imported (PLAN_IMPORT): read-only here, and
    /// its memory not this file's.
    imported: bool,
}

struct FileState {
    /// Ids of live plans and of loads in flight.
    ids: PlanIds,
    /// Plans by id: a lookup is O(log n) in the file's plans.
    plans: RBTree<u32, PlanEntry>,
    /// Number of entries in `plans`.
    count: usize,
    /// The reset RESET_START asked for last (RESET_WAIT's).
    started: Option<Arc<Request>>,
}

impl FileState {
    fn entry(&self, id: u32) -> Result<&PlanEntry> {
        self.plans.get(&id).ok_or(ENOENT)
    }

    /// The id of a plan being listed, held in `id_node` until it is (or
    /// its load fails). Ids count up from 1 and skip any live or loading
    /// after a wrap.
    fn take_id(&mut self, id_node: IdNode) -> u32 {
        let Self { ids, plans, .. } = self;
        ids.take(|id| plans.get(&id).is_some(), id_node)
    }

    fn pin(&mut self, pins: &[u32]) {
        for id in pins {
            if let Some(e) = self.plans.get_mut(id) {
                e.pinned_by += 1;
            }
        }
    }

    fn unpin(&mut self, pins: &[u32]) {
        for id in pins {
            if let Some(e) = self.plans.get_mut(id) {
                e.pinned_by -= 1;
            }
        }
    }
}

/// The id of a load in flight, given back to its file when the load ends.
struct LoadingId<'a> {
    file: &'a OpenFile,
    id: u32,
}

impl Drop for LoadingId<'_> {
    fn drop(&mut self) {
        self.file.state.lock().ids.release(self.id);
    }
}

/// One open file of a device node: its own plans, invisible to other files.
#[pin_data(PinnedDrop)]
pub(crate) struct OpenFile {
    dev: Arc<Device>,
    /// Its `drm-client-id` in fdinfo, and the key of its address space
    /// among the device's.
    client_id: u64,
    #[pin]
    state: Mutex<FileState>,
    /// Its plans' variables listed for mmap. Taken after `state` when both
    /// are held.
    #[pin]
    maps: FileMaps,
}

fn reader<T: kernel::transmute::FromBytes>(arg: usize) -> Result<T> {
    UserSlice::new(UserPtr::from_addr(arg), size_of::<T>())
        .reader()
        .read::<T>()
}

fn writeback<T: kernel::transmute::AsBytes>(arg: usize, v: &T) -> Result {
    UserSlice::new(UserPtr::from_addr(arg), size_of::<T>())
        .writer()
        .write(v)
}

fn user_slice(addr: u64, len: u64) -> Result<UserSlice> {
    let (at, len) = user_range(addr, len)?;
    Ok(UserSlice::new(at, len))
}

/// The user address and length of a request's buffer.
fn user_range(addr: u64, len: u64) -> Result<(UserPtr, usize)> {
    let addr = usize::try_from(addr).map_err(|_| EFAULT)?;
    let len = usize::try_from(len).map_err(|_| EINVAL)?;
    Ok((UserPtr::from_addr(addr), len))
}

#[pinned_drop]
impl PinnedDrop for OpenFile {
    fn drop(self: Pin<&mut Self>) {
        self.dev.remove_space(self.client_id);
        self.dev.file_closed(self.client_id);
    }
}

impl OpenFile {
    fn plan(&self, id: u32) -> Result<Arc<Plan>> {
        Ok(self.state.lock().entry(id)?.plan.clone())
    }

    /// Plan `id`, and whether this file imported it (and may only read it).
    fn plan_and_rights(&self, id: u32) -> Result<(Arc<Plan>, bool)> {
        let st = self.state.lock();
        let e = st.entry(id)?;
        Ok((e.plan.clone(), e.imported))
    }

    fn device_info(&self, arg: usize) -> Result {
        self.dev.check_present()?;
        let d = &self.dev;
        let geo = d.grid.geometry();
        let mut info = DeviceInfo {
            abi_version: ABI_VERSION,
            arch: d.info.arch as u32,
            pci_vendor: u32::from(d.pci_vendor),
            pci_device: u32::from(d.pci_device),
            simulated: u32::from(d.sim().is_some()),
            nr_channels: d.info.nr_channels as u32,
            regions_per_channel: geo.regions as u32,
            nr_cores: d.info.nr_cores as u32,
            sbuf_size: SBUF_SIZE,
            min_alloc_size: geo.min_alloc,
            bar0_size: d.info.bar0_size,
            bar4_size: d.info.bar4_size,
            ..DeviceInfo::default()
        };
        for ch in 0..d.info.nr_channels {
            info.channel_base[ch] = d.info.channel_base[ch];
            info.channel_size[ch] = d.info.channel_size;
        }
        writeback(arg, &info)
    }

    fn plan_load(&self, arg: usize) -> Result {
        let timer = trace::plan_load_timer();
        let mut req: PlanLoad = reader(arg)?;
        if req.flags != 0 || req.rsvd != 0 {
            return Err(EINVAL);
        }
        self.dev.check_present()?;
        let channel = self.load_channel(req.channel)?;
        let blob = UserBlob::new(req.blob, req.blob_len, &self.dev.fault)?;
        let parsed = parse(&blob, self.dev.info)?;

        // REMOTE targets: the plan takes a reference on each plan it names, so
        // none of their memory can be freed while it (or a transfer through
        // it) can reach it. They are pinned in this file's table when the plan
        // is inserted, if they are still there.
        let mut remotes = Remotes::wanted(&parsed)?;
        // The table slot and the id's place are taken up front: once staged,
        // inserting cannot fail.
        let slot = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        let id_node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        let id = self.take_remotes_and_id(&mut remotes, id_node)?;
        // The id stays this load's until it ends, listed or not.
        let _loading = LoadingId { file: self, id };
        remotes.check(&parsed)?;

        let fault = &self.dev.fault;
        let staged = stage(&self.dev, parsed, &blob, channel, remotes, id).and_then(|plan| {
            req.plan_id = id;
            self.report_load(&plan, arg, &mut req)?;
            Ok(plan)
        });
        // On failure nothing of this load stays: its plan, if staged, was
        // dropped, and with it the references on its targets.
        let plan = staged.and_then(|plan| {
            fault.point(ENOMEM)?;
            Ok(Arc::new(plan, GFP_KERNEL_ACCOUNT)?)
        })?;
        let (records, bytes) = (plan.vars().len(), plan.bytes);
        self.insert_plan(plan, slot, id, false)?;
        trace::plan_load(&timer, self.dev.index, id, records, bytes);
        Ok(())
    }

    /// The HBM channel a load asks for: `EINVAL` for one the device lacks.
    fn load_channel(&self, channel: u32) -> Result<usize> {
        match channel {
            CHANNEL_ANY => Ok(self.dev.grid.emptiest_channel()),
            c if (c as usize) < self.dev.info.nr_channels => Ok(c as usize),
            _ => Err(EINVAL),
        }
    }

    /// Takes references on the plans `remotes` names and the id of the plan
    /// being loaded (held in `id_node` until the load ends): `E2BIG` when
    /// the file holds all the plans it may.
    fn take_remotes_and_id(&self, remotes: &mut Remotes, id_node: IdNode) -> Result<u32> {
        let mut st = self.state.lock();
        if st.count >= MAX_PLANS_PER_FILE as usize {
            return Err(E2BIG);
        }
        remotes.take(|id| {
            let e = st.entry(id)?;
            e.plan.check_live()?;
            Ok((e.plan.clone(), e.imported))
        })?;
        Ok(st.take_id(id_node))
    }

    /// Copies the staged `plan`'s variable PAs to `req.addrs` (if given) and
    /// `req`, filled in, back to `arg`.
    fn report_load(&self, plan: &Plan, arg: usize, req: &mut PlanLoad) -> Result {
        let fault = &self.dev.fault;
        if req.addrs != 0 {
            fault.point(EFAULT)?;
            let n = plan.vars().len() as u64;
            let mut w = user_slice(req.addrs, n.checked_mul(8).ok_or(EINVAL)?)?.writer();
            let mut piece = KVec::with_capacity(ADDRS_PIECE, GFP_KERNEL_ACCOUNT)?;
            for vars in plan.vars().chunks(ADDRS_PIECE) {
                piece.clear();
                for v in vars {
                    // Cannot fail: at most ADDRS_PIECE entries.
                    let _ = piece.push_within_capacity(v.pa);
                }
                w.write_slice(AsBytes::as_bytes(&piece[..]))?;
            }
        }
        req.local_scratchpad_pa = plan.local_scratch_pa;
        req.shared_scratchpad_pa = plan.shared_scratch_pa;
        req.bytes_allocated = plan.bytes;
        fault.point(EFAULT)?;
        writeback(arg, req)
    }

    /// Lists `plan` as `id` in this file's table, in the `slot` reserved
    /// for it: a plan loaded here, which pins the plans it points into, or
    /// one `imported` from another file, read-only. `E2BIG` when the file
    /// filled up, `ENOENT` when a target was unloaded meanwhile and `EIO`
    /// when a device reset began after it was staged.
    fn insert_plan(
        &self,
        plan: Arc<Plan>,
        slot: RBTreeNodeReservation<u32, PlanEntry>,
        id: u32,
        imported: bool,
    ) -> Result {
        let mut st = self.state.lock();
        if st.count >= MAX_PLANS_PER_FILE as usize {
            drop(st);
            return Err(E2BIG);
        }
        // A target unloaded meanwhile is gone for this file, too. An
        // imported plan's REMOTE ids are its loader's, not this file's.
        if !imported && !plan.remotes_match(|id| st.entry(id).ok().map(|e| &e.plan)) {
            drop(st);
            return Err(ENOENT);
        }
        // The id was held for this load alone (`PlanIds`): never a live key.
        if st.plans.get(&id).is_some() {
            drop(st);
            return Err(EEXIST);
        }
        // A device reset that began after the last transfer of this load
        // wiped it all the same: it is not listed (and is freed on return).
        if let Err(e) = plan.check_live() {
            drop(st);
            return Err(e);
        }
        if !imported {
            st.pin(plan.remote_ids());
        }
        let entry = PlanEntry {
            plan,
            pinned_by: 0,
            imported,
        };
        st.plans.insert(slot.into_node(id, entry));
        st.count += 1;
        Ok(())
    }

    fn plan_unload(&self, arg: usize) -> Result {
        let timer = trace::plan_unload_timer();
        let req: PlanUnload = reader(arg)?;
        if req.rsvd != 0 {
            return Err(EINVAL);
        }
        // After removal every ioctl answers ENODEV; closing the file frees.
        self.dev.check_present()?;
        let entry = {
            let mut st = self.state.lock();
            if st.entry(req.plan_id)?.pinned_by > 0 {
                return Err(EBUSY);
            }
            let entry = st.plans.remove(&req.plan_id).ok_or(ENOENT)?;
            st.count -= 1;
            if !entry.imported {
                st.unpin(entry.plan.remote_ids());
            }
            entry
        };
        let (records, bytes) = (entry.plan.vars().len(), entry.plan.bytes);
        // No process keeps a page of it: mapped, its pages are taken away
        // before its memory is given back, here, outside the lock (unless a
        // transfer in flight still holds the plan).
        self.maps.revoke_plan(&entry.plan);
        drop(entry);
        trace::plan_unload(&timer, self.dev.index, req.plan_id, records, bytes);
        Ok(())
    }

    fn map_offset(&self, arg: usize) -> Result {
        let mut req: MapOffset = reader(arg)?;
        if req.flags != 0 || req.rsvd != 0 {
            return Err(EINVAL);
        }
        self.dev.check_present()?;
        let slot = FileMaps::slot()?;
        // Listed under the plan table's lock: an unload, which takes it
        // first, either comes after (and unlists it) or the plan is gone.
        let st = self.state.lock();
        let e = st.entry(req.plan_id)?;
        (req.offset, req.size) = self.maps.offset(&e.plan, req.var_id, slot, e.imported)?;
        drop(st);
        writeback(arg, &req)
    }

    fn resolve(&self, arg: usize) -> Result {
        let mut req: Resolve = reader(arg)?;
        self.dev.check_present()?;
        req.addr = {
            let st = self.state.lock();
            let plan = &st.entry(req.plan_id)?.plan;
            plan.check_live()?;
            plan.resolve(req.var_id, req.offset, req.size)?
        };
        writeback(arg, &req)
    }

    fn resolve_batch(&self, arg: usize) -> Result {
        let req: ResolveBatch = reader(arg)?;
        if req.count > MAX_BATCH {
            return Err(E2BIG);
        }
        self.dev.check_present()?;
        let plan = self.plan(req.plan_id)?;
        plan.check_live()?;
        let qsize = size_of::<ResolveQuery>() as u64;
        let (mut r, mut w) = user_slice(req.queries, u64::from(req.count) * qsize)?.reader_writer();
        let mut piece = KVec::from_elem(ResolveQuery::default(), BATCH_PIECE, GFP_KERNEL_ACCOUNT)?;
        let mut left = req.count as usize;
        while left > 0 {
            resched::checkpoint()?;
            // A device reset during the batch ends it: no address of a plan
            // whose memory the reset wiped is handed out.
            plan.check_live()?;
            let n = left.min(BATCH_PIECE);
            r.read_slice(piece[..n].as_bytes_mut())?;
            for q in piece[..n].iter_mut() {
                match plan.resolve(q.var_id, q.offset, q.size) {
                    Ok(a) => {
                        q.addr = a;
                        q.status = 0;
                    }
                    Err(e) => {
                        q.addr = PA_UNSTAGED;
                        q.status = e.to_errno();
                    }
                }
            }
            w.write_slice(piece[..n].as_bytes())?;
            left -= n;
        }
        Ok(())
    }

    fn mem_xfer(&self, arg: usize, write: bool) -> Result {
        let timer = trace::mem_xfer_timer();
        let req: MemXfer = reader(arg)?;
        let res = self.transfer(&req, write);
        let ids = (req.plan_id, req.var_id);
        trace::mem_xfer(&timer, self.dev.index, ids, write, req.len, &res);
        res
    }

    /// Copies `req.len` bytes from (`write`) or to the user buffer of `req`:
    /// `EACCES` for a write into memory this file may only read.
    fn transfer(&self, req: &MemXfer, write: bool) -> Result {
        self.dev.check_present()?;
        let (plan, imported) = self.plan_and_rights(req.plan_id)?;
        if write {
            if imported {
                return Err(EACCES);
            }
            plan.check_writable(req.var_id)?;
        }
        plan.check_live()?;
        let pa = plan.resolve_hbm(req.var_id, req.offset, req.len)?;
        let (at, n) = user_range(req.buf, req.len)?;
        self.dev.fault.point(EFAULT)?;
        let staged_at = plan.reset_epoch();
        if write {
            self.dev
                .write_from_user(staged_at, pa, &mut UserSource::new(at, n), req.len)
        } else {
            self.dev
                .read_to_user(staged_at, pa, &mut UserSink::new(at, n), req.len)
        }
    }

    fn mem_stats(&self, arg: usize) -> Result {
        self.dev.check_present()?;
        let grid = &self.dev.grid;
        let mut out = MemStats::default();
        // Device-wide usage says what other tenants hold and, polled, when
        // they load: it is for an administrator. Everyone sees the pools'
        // sizes and their own figures (as DRM's fdinfo shows each client its
        // own, and debugfs the whole device to root).
        let admin = capability::admin_quietly();
        for ch in 0..self.dev.info.nr_channels.min(MAX_CHANNELS) {
            for r in 0..grid.geometry().regions.min(MAX_REGIONS) {
                let s = grid.stats(ch, r)?;
                let usage = |v| if admin { v } else { 0 };
                out.pools[ch][r] = uapi::PoolStats {
                    total: s.total,
                    used: usage(s.used),
                    peak: usage(s.peak),
                    live_chunks: usage(u64::from(s.live_chunks)) as u32,
                    present: 1,
                };
            }
        }
        {
            // Imported plans hold their exporter's memory, not this file's.
            let st = self.state.lock();
            for e in st.plans.values().filter(|e| !e.imported) {
                out.own_bytes += e.plan.bytes;
                out.own_chunks += e.plan.chunk_count() as u32;
                out.own_plans += 1;
            }
        }
        writeback(arg, &out)
    }

    /// A RESET or RESET_START request: its kind, and who asks.
    fn reset_request(&self, req: &Reset) -> Result<(ResetKind, Requester)> {
        if req.rsvd != 0 || req.status != 0 {
            return Err(EINVAL);
        }
        let kind = ResetKind::from_u32(req.type_).ok_or(EINVAL)?;
        // Asked quietly first: a tenant refused by the rule of
        // `Gate::may_reset` leaves no audit record (it could make a flood
        // of them); an administrator's reset is audited as a privileged
        // operation is.
        let admin = capability::admin_quietly() && capability::admin();
        let who = Requester {
            client: self.client_id,
            admin,
        };
        Ok((kind, who))
    }

    /// `res`'s errno (0 for success) in `req.status`, written back.
    fn reset_status<T>(arg: usize, mut req: Reset, res: Result<T>) -> Result {
        req.status = match &res {
            Ok(_) => 0,
            Err(e) => e.to_errno(),
        };
        writeback(arg, &req)?;
        res.map(|_| ())
    }

    fn reset(&self, arg: usize) -> Result {
        let req: Reset = reader(arg)?;
        let (kind, who) = self.reset_request(&req)?;
        // One tenant may not wipe the others: the rule of `Gate::may_reset`
        // (the cores one owns, the device's only open file, or an
        // administrator; never another file's cores), checked under the
        // lock that opens and claims take.
        let res = Device::reset(&self.dev, kind, req.nc_map, who);
        Self::reset_status(arg, req, res)
    }

    fn reset_start(&self, arg: usize) -> Result {
        let req: Reset = reader(arg)?;
        let (kind, who) = self.reset_request(&req)?;
        let mut st = self.state.lock();
        if st.started.as_ref().is_some_and(|r| r.outcome().is_none()) {
            return Err(EBUSY);
        }
        let res = Device::request_reset(&self.dev, kind, req.nc_map, Some(who));
        if let Ok(r) = &res {
            st.started = Some(r.clone());
        }
        drop(st);
        Self::reset_status(arg, req, res)
    }

    fn reset_wait(&self, arg: usize) -> Result {
        let mut req: Reset = reader(arg)?;
        if req.type_ != 0 || req.nc_map != 0 || req.status != 0 || req.rsvd != 0 {
            return Err(EINVAL);
        }
        let started = self.state.lock().started.clone().ok_or(ENOENT)?;
        let res = self.dev.wait_reset(&started);
        if res == Err(EINTR) {
            return res.map(|_| ());
        }
        let (kind, cores) = started.asked();
        req.type_ = kind as u32;
        req.nc_map = cores;
        Self::reset_status(arg, req, res)
    }

    fn cores(&self, arg: usize) -> Result {
        let mut req: Cores = reader(arg)?;
        if req.owned != 0 || req.taken != 0 || req.owner_pid.iter().any(|&p| p != 0) {
            return Err(EINVAL);
        }
        let view = self
            .dev
            .claim_cores(self.client_id, req.claim, req.release)?;
        req.owned = view.owned;
        req.taken = view.taken;
        req.owner_pid = view.pids;
        writeback(arg, &req)
    }
}

impl NodeFile for OpenFile {
    type Data = Arc<Device>;

    fn open(_file: &File, space: Arc<Space>, dev: &Arc<Device>) -> Result<Pin<KBox<Self>>> {
        let dev = dev.clone();
        dev.check_present()?;
        let client_id = fdinfo::new_client_id();
        let listed = space.clone();
        let file = KBox::try_pin_init(
            try_pin_init!(Self {
                dev,
                client_id,
                state <- new_mutex!(FileState {
                    ids: PlanIds::new(),
                    plans: RBTree::new(),
                    count: 0,
                    started: None,
                }),
                maps <- FileMaps::new(space),
            }),
            GFP_KERNEL_ACCOUNT,
        )?;
        // Counted once the file exists: its drop uncounts it (and unlists
        // its address space, listed or not).
        file.dev.file_opened();
        file.dev.add_space(client_id, listed)?;
        Ok(file)
    }

    fn ioctl(me: Pin<&OpenFile>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        match cmd {
            IOC_DEVICE_INFO => me.device_info(arg)?,
            IOC_PLAN_LOAD => me.plan_load(arg)?,
            IOC_PLAN_UNLOAD => me.plan_unload(arg)?,
            IOC_RESOLVE => me.resolve(arg)?,
            IOC_RESOLVE_BATCH => me.resolve_batch(arg)?,
            IOC_MEM_WRITE => me.mem_xfer(arg, true)?,
            IOC_MEM_READ => me.mem_xfer(arg, false)?,
            IOC_MEM_STATS => me.mem_stats(arg)?,
            IOC_RESET => me.reset(arg)?,
            IOC_MAP_OFFSET => me.map_offset(arg)?,
            IOC_CORES => me.cores(arg)?,
            IOC_RESET_START => me.reset_start(arg)?,
            IOC_RESET_WAIT => me.reset_wait(arg)?,
            IOC_PLAN_EXPORT => me.plan_export(arg)?,
            IOC_PLAN_IMPORT => me.plan_import(arg)?,
            _ => return Err(ENOTTY),
        }
        Ok(0)
    }

    /// The file's own figures only (fdinfo is readable by the process's
    /// owner and root): the HBM its listed plans hold on each channel.
    fn show_fdinfo(me: Pin<&OpenFile>, m: &SeqFile, _file: &File) {
        let mut channels = [0u64; MAX_CHANNELS];
        let nr = me.dev.info.nr_channels.min(MAX_CHANNELS);
        {
            // At most MAX_PLANS_PER_FILE additions, printed after the lock.
            let st = me.state.lock();
            for e in st.plans.values().filter(|e| !e.imported) {
                if let Some(c) = channels.get_mut(e.plan.channel()) {
                    *c += e.plan.bytes;
                }
            }
        }
        let lines = fdinfo::Lines {
            client_id: me.client_id,
            pdev: me.dev.pci_slot.as_deref().and_then(|s| s.to_str().ok()),
            channels: &channels[..nr],
        };
        seq_print!(m, "{lines}");
    }

    fn mmap(me: Pin<&OpenFile>, _file: &File, map: &NewMapping<'_>) -> Result<Backing> {
        me.dev.check_present()?;
        me.maps.check_map(&me.dev, map)
    }

    fn fault(me: Pin<&OpenFile>, pgoff: u64, fault: &Fault<'_>) -> Result {
        me.maps.fault(&me.dev, pgoff, fault)
    }
}

#[kunit_tests(neuron_hbm_chardev)]
mod tests {
    use super::*;

    #[test]
    fn devices_give_their_index_back() -> Result {
        for _ in 0..2 * MAX_NODES {
            drop(Device::new_test_sim(1)?);
        }
        Ok(())
    }
}
