//! Lowering a MemoryPlan to mem_ref plans, one per HBM memory (a plan is
//! loaded onto one channel):
//! - scratch tensors: MR_VIRTUAL_TMP_BUF at their planned offsets in the local
//!   scratchpad, whose size is that memory's scratch high-water mark;
//! - views (`alias_of`): MR_VIRTUAL_TMP_BUF at their base's offset with
//!   their own size, a window inside the base's window. Every byte of a view
//!   resolves; an MR_PTR would only resolve at offset 0 (the runtime's
//!   `mem_ref_to_addr` asserts it, and so does NHBM_IOC_RESOLVE);
//! - persistent tensors: MR_BUFFER, allocation only;
//! - constants: MR_BUFFER (cold) or MR_BUFFER_STAGED (staged from the host),
//!   with their bytes as payload;
//! - graph inputs and outputs: MR_INPUT / MR_OUTPUT.
//!
//! var_ids number the model's tensors from 1 in description order, so a
//! tensor has the same var_id in whichever plan it lands.

use std::collections::BTreeMap;

use nhbm::{Backing, Plan, Record};

use crate::desc::{Io, Model, ModelError};
use crate::model::*;

/// The plan of one HBM memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoweredPlan {
    /// The memory it places tensors in.
    pub memory: MemoryType,
    /// The plan PLAN_LOAD stages.
    pub plan: Plan,
}

impl LoweredPlan {
    /// The HBM channel to load this plan on.
    pub fn channel(&self) -> u32 {
        self.memory
            .channel()
            .expect("lowered plans live in device memory")
    }
}

/// var_id of every tensor: its 1-based position in the description.
pub fn var_ids(model: &Model) -> BTreeMap<TensorId, u32> {
    model
        .tensors
        .iter()
        .enumerate()
        .map(|(k, t)| (t.desc.id.clone(), k as u32 + 1))
        .collect()
}

/// Lowers `mp` (made for `model`) to one mem_ref plan per memory it uses.
pub fn lower(model: &Model, mp: &MemoryPlan) -> Result<Vec<LoweredPlan>, ModelError> {
    let ids = var_ids(model);
    let mut plans: BTreeMap<MemoryType, Plan> = BTreeMap::new();
    for t in &model.tensors {
        let a = mp
            .get_allocation(t.id())
            .map_err(|e| ModelError(e.to_string()))?;
        let b = a
            .binding
            .ok_or_else(|| ModelError(format!("tensor {:?} has no binding", t.id())))?;
        let var = ids[t.id()];
        let scratch = mp.arena_usages.get(&a.memory).map_or(0, |u| u.total_size);
        let plan = plans
            .entry(a.memory)
            .or_insert_with(|| Plan::new(scratch, 0));
        let mut r = match (b.role, t.desc.io, &t.desc.alias_of) {
            (_, Some(Io::Input), _) => Record::input(var, t.size),
            (_, Some(Io::Output), _) => Record::output(var, t.size),
            // A view's allocation is its base's slot (planner::plan).
            (ArenaRole::Scratch, None, _) => {
                Record::virtual_tmp_buf(var, t.size, Backing::Local, a.offset)
            }
            (ArenaRole::Persistent, None, _) => Record::buffer(var, t.size),
            (ArenaRole::Constant, None, _) => {
                let r = if b.is_staged() {
                    Record::buffer_staged(var, t.size)
                } else {
                    Record::buffer(var, t.size)
                };
                r.data(model.constant_bytes(t)?)
            }
        };
        r = r.name(t.id()).alignment(a.alignment);
        if let Some(d) = &t.desc.dtype {
            r = r.dtype(d.clone(), t.desc.shape.as_deref().unwrap_or(&[]));
        }
        plan.push(r);
    }
    Ok(plans
        .into_iter()
        .map(|(memory, plan)| LoweredPlan { memory, plan })
        .collect())
}
