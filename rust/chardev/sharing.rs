// SPDX-License-Identifier: GPL-2.0-only

//! Plans shared across open files: PLAN_EXPORT hands a loaded plan out as
//! a dma-buf, and PLAN_IMPORT lists the plan of such a buffer in another
//! file's table, read-only, with no device memory allocated or copied.
//!
//! A buffer holds a reference on its plan, and so does each import: the
//! plan's memory (charged to its loader) stays until the loader unloaded
//! it and neither a buffer nor an import of it is left. An importer reaches
//! the memory only through its own file, whose mappings and transfers a
//! device reset, unbind or removal revokes as the loader's.

use super::{reader, writeback, LoadingId, OpenFile};
use crate::{
    abstractions::dma_buf::{self, Shared},
    plan::Plan,
    uapi::{PlanExport, PlanImport, MAX_PLANS_PER_FILE},
};
use kernel::{
    bindings, fs::file::FileDescriptorReservation, prelude::*, rbtree::RBTreeNodeReservation,
    sync::Arc,
};

/// What the dma-buf of an exported plan carries: a reference on the plan.
#[derive(Clone)]
struct Exported(Arc<Plan>);

impl Shared for Exported {
    const KIND: u32 = 1;
}

impl OpenFile {
    /// PLAN_EXPORT: a new dma-buf of a plan this file loaded, installed as
    /// a close-on-exec descriptor of the caller once nothing can fail.
    /// `EACCES` for a plan this file imported (only its loader shares it).
    pub(super) fn plan_export(&self, arg: usize) -> Result {
        let mut req: PlanExport = reader(arg)?;
        if req.flags != 0 || req.rsvd != 0 {
            return Err(EINVAL);
        }
        self.dev.check_present()?;
        let (plan, imported) = self.plan_and_rights(req.plan_id)?;
        if imported {
            return Err(EACCES);
        }
        plan.check_live()?;
        let fd = FileDescriptorReservation::get_unused_fd_flags(bindings::O_CLOEXEC)?;
        let bytes = plan.bytes;
        let file = dma_buf::export(Exported(plan), bytes)?;
        req.fd = i32::try_from(fd.reserved_fd()).map_err(|_| EMFILE)?;
        // A failed copy drops the buffer and gives the descriptor back.
        writeback(arg, &req)?;
        fd.fd_install(file);
        Ok(())
    }

    /// PLAN_IMPORT: lists the plan of the dma-buf `req.fd` in this file's
    /// table, read-only. `EBADF`, `EINVAL` (not an exported plan), `EXDEV`
    /// (a plan of another device), `EIO` (wiped by a device reset), `E2BIG`
    /// (the table is full).
    pub(super) fn plan_import(&self, arg: usize) -> Result {
        let mut req: PlanImport = reader(arg)?;
        if req.flags != 0 {
            return Err(EINVAL);
        }
        self.dev.check_present()?;
        let Exported(plan) = dma_buf::import::<Exported>(req.fd)?;
        if !plan.is_on(&self.dev) {
            return Err(EXDEV);
        }
        plan.check_live()?;
        let slot = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        let id_node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        let id = {
            let mut st = self.state.lock();
            if st.count >= MAX_PLANS_PER_FILE as usize {
                return Err(E2BIG);
            }
            st.take_id(id_node)
        };
        let _listing = LoadingId { file: self, id };
        req.plan_id = id;
        req.nr_vars = u32::try_from(plan.vars().len()).map_err(|_| E2BIG)?;
        req.bytes = plan.bytes;
        writeback(arg, &req)?;
        self.insert_plan(plan, slot, id, true)
    }
}
