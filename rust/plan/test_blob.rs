// SPDX-License-Identifier: GPL-2.0-only

//! Builds plan blobs in kernel memory for the KUnit suites, in exactly the
//! layout userspace sends: header, records, then a data area.

use super::mr_type::MrType;
use crate::uapi::{MemRef, PlanHeader};
use core::mem::size_of;
use kernel::{prelude::*, transmute::AsBytes};

/// Offsets marked with this bit are relative to the data area; `build`
/// rebases them.
const DATA_REL: u64 = 1 << 62;

/// A plan blob under construction.
pub(crate) struct TestBlob {
    pub(crate) hdr: PlanHeader,
    pub(crate) recs: KVec<MemRef>,
    data: KVec<u8>,
}

impl TestBlob {
    /// An empty plan with the given scratchpad sizes.
    pub(crate) fn new(local: u64, shared: u64) -> Self {
        Self {
            hdr: PlanHeader {
                local_scratchpad_size: local,
                shared_scratchpad_size: shared,
                nmem: 0,
                rsvd: 0,
            },
            recs: KVec::new(),
            data: KVec::new(),
        }
    }

    /// Adds a record and returns its position.
    pub(crate) fn rec(&mut self, mr_type: MrType, var_id: u32, size: u64) -> Result<usize> {
        let mut m = MemRef {
            mr_type: mr_type as u32,
            var_id,
            size,
            ..MemRef::default()
        };
        m.dtype[..4].copy_from_slice(b"fp32");
        self.recs.push(m, GFP_KERNEL)?;
        Ok(self.recs.len() - 1)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<u64> {
        let off = self.data.len() as u64;
        self.data.extend_from_slice(bytes, GFP_KERNEL)?;
        Ok(off | DATA_REL)
    }

    /// Gives record `i` a payload.
    pub(crate) fn payload(&mut self, i: usize, bytes: &[u8]) -> Result {
        self.recs[i].data_off = self.put(bytes)?;
        self.recs[i].data_len = bytes.len() as u64;
        Ok(())
    }

    /// Gives record `i` a name (NUL added).
    pub(crate) fn name(&mut self, i: usize, name: &[u8]) -> Result {
        let off = self.put(name)?;
        self.put(&[0])?;
        self.recs[i].name_off = off;
        Ok(())
    }

    /// Makes record `i` list `ids`.
    pub(crate) fn list(&mut self, i: usize, ids: &[u32]) -> Result {
        let mut bytes = KVec::new();
        for id in ids {
            bytes.extend_from_slice(&id.to_le_bytes(), GFP_KERNEL)?;
        }
        let off = self.put(&bytes)?;
        self.recs[i].u = [ids.len() as u64, off];
        Ok(())
    }

    /// The blob bytes.
    pub(crate) fn build(&self) -> Result<KVec<u8>> {
        let base = (size_of::<PlanHeader>() + self.recs.len() * size_of::<MemRef>()) as u64;
        let rebase = |v: u64| {
            if v & DATA_REL != 0 {
                (v & !DATA_REL) + base
            } else {
                v
            }
        };
        let mut hdr = self.hdr;
        if hdr.nmem == 0 {
            hdr.nmem = self.recs.len() as u32;
        }
        let mut out = KVec::new();
        out.extend_from_slice(&hdr.local_scratchpad_size.to_le_bytes(), GFP_KERNEL)?;
        out.extend_from_slice(&hdr.shared_scratchpad_size.to_le_bytes(), GFP_KERNEL)?;
        out.extend_from_slice(&hdr.nmem.to_le_bytes(), GFP_KERNEL)?;
        out.extend_from_slice(&hdr.rsvd.to_le_bytes(), GFP_KERNEL)?;
        for m in self.recs.iter() {
            let mut m = *m;
            m.name_off = rebase(m.name_off);
            m.data_off = rebase(m.data_off);
            m.u[1] = rebase(m.u[1]);
            out.extend_from_slice(m.as_bytes(), GFP_KERNEL)?;
        }
        out.extend_from_slice(&self.data, GFP_KERNEL)?;
        Ok(out)
    }
}
