// SPDX-License-Identifier: GPL-2.0-only

//! The kinds of mem_ref records: shared by the parser, the staging and the
//! test blobs.

use crate::uapi::{
    MR_BUFFER, MR_BUFFER_STAGED, MR_INPUT, MR_INVALID, MR_LIST, MR_OUTPUT, MR_PTR, MR_PTR_TABLE,
    MR_REMOTE, MR_SB, MR_TMP_BUF, MR_VIRTUAL_TMP_BUF,
};
use kernel::prelude::*;

/// `kbin_mr_type_t`, numbered as the runtime numbers it (`enum nhbm_mr_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum MrType {
    /// Window of a NeuronCore's State Buffer.
    Sb = MR_SB,
    /// Staged constant.
    BufferStaged = MR_BUFFER_STAGED,
    /// Weights or persistent data.
    Buffer = MR_BUFFER,
    /// Temporary buffer.
    TmpBuf = MR_TMP_BUF,
    /// Graph input.
    Input = MR_INPUT,
    /// Graph output.
    Output = MR_OUTPUT,
    /// Alias of another variable.
    Ptr = MR_PTR,
    /// Window of a scratchpad.
    VirtualTmpBuf = MR_VIRTUAL_TMP_BUF,
    /// Table of variable addresses.
    List = MR_LIST,
    /// Table of list-table addresses.
    PtrTable = MR_PTR_TABLE,
    /// Variable of another plan.
    Remote = MR_REMOTE,
}

impl MrType {
    /// The kind numbered `v`: `EINVAL` for an unknown one.
    pub(crate) fn from_u32(v: u32) -> Result<Self> {
        Ok(match v {
            MR_SB => Self::Sb,
            MR_BUFFER_STAGED => Self::BufferStaged,
            MR_BUFFER => Self::Buffer,
            MR_TMP_BUF => Self::TmpBuf,
            MR_INPUT => Self::Input,
            MR_OUTPUT => Self::Output,
            MR_PTR => Self::Ptr,
            MR_VIRTUAL_TMP_BUF => Self::VirtualTmpBuf,
            MR_LIST => Self::List,
            MR_PTR_TABLE => Self::PtrTable,
            MR_REMOTE => Self::Remote,
            MR_INVALID => return Err(EINVAL),
            _ => return Err(EINVAL),
        })
    }

    /// Kinds that get their own HBM allocation.
    pub(crate) fn allocates(self) -> bool {
        matches!(
            self,
            Self::Input
                | Self::Output
                | Self::Buffer
                | Self::BufferStaged
                | Self::TmpBuf
                | Self::List
                | Self::PtrTable
        )
    }
}
