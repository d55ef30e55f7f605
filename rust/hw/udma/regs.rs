// SPDX-License-Identifier: GPL-2.0-only

//! The registers of one UDMA queue block as the reference driver programs
//! them (aws-neuron-driver 2.24.7.0, `udma/udma_regs.h`,
//! `udma/udma_main.c`), relative to the block; [`queue_block`] places a
//! block in BAR0. The M2S and S2M blocks agree up to 0x50 and keep
//! `comp_cfg` and `q_sw_ctrl` at their own offsets.

use kernel::io::{register, Mmio, Region};

/// Bytes of one queue block (`sizeof(union udma_q_regs)`,
/// udma_regs.h:656-660).
pub(crate) const QUEUE_BLOCK: usize = 0x1000;

/// A queue block of BAR0, as the kernel crate's I/O type.
pub(crate) type QueueRegs<'a> = Mmio<'a, Region<QUEUE_BLOCK>>;

/// Which half of a unit a queue is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    /// Memory to stream: the engine reads the source.
    M2s,
    /// Stream to memory: the engine writes the destination.
    S2m,
}

/// BAR0 offset of queue `q`'s block in direction `dir` of the UDMA unit
/// at BAR0 `unit`: M2S at +0, S2M at +0x20000 (`struct unit_regs_v4`,
/// udma_regs.h:627-635), queue 0 at +0x1000 of each (`m2s_q[16]`,
/// `s2m_q[16]`, udma_regs.h:143, 390).
pub(crate) fn queue_block(unit: u64, dir: Dir, q: u64) -> u64 {
    let half = match dir {
        Dir::M2s => 0,
        Dir::S2m => 0x2_0000,
    };
    unit + half + 0x1000 + q * QUEUE_BLOCK as u64
}

register! {
    /// `cfg` (udma_regs.h:97, 350).
    pub(crate) Q_CFG(u32) @ 0x20 {
        /// `EN_PREF` (bit 16) and `EN_SCHEDULING` (bit 17): the queue
        /// fetches and runs descriptors (udma_regs.h:213, 215).
        17:16 enable;
        /// Set at reset and kept as read ("hardware reset value",
        /// udma_main.c:163-172).
        25:24 reset_value;
    }

    /// Ring base, low half; bits 5:0 are ignored (`ADDR_MASK`,
    /// udma_regs.h:218-223).
    pub(crate) Q_DRBP_LOW(u32) @ 0x28 {
        /// Address bits 31:0.
        31:0 addr;
    }

    /// Ring base, high half (udma_main.c:227).
    pub(crate) Q_DRBP_HIGH(u32) @ 0x2c {
        /// Address bits 63:32.
        31:0 addr;
    }

    /// Ring length in descriptors (`OFFSET_MASK`, udma_regs.h:225;
    /// udma_main.c:229).
    pub(crate) Q_DRL(u32) @ 0x30 {
        /// Descriptors.
        23:0 descs;
    }

    /// Tail increment: the doorbell (udma_regs.h:238-240,
    /// udma_main.c:674-684).
    pub(crate) Q_DRTP_INC(u32) @ 0x38 {
        /// Descriptors posted.
        23:0 descs;
    }

    /// M2S `comp_cfg` (udma_regs.h:125): 0, no completion ring
    /// (udma_m2m.c:175-178, udma_main.c:200-202).
    pub(crate) M2S_COMP_CFG(u32) @ 0xa0 {
        /// `EN_COMP_RING_UPDATE` (udma_regs.h:277).
        0:0 ring_update => bool;
    }

    /// M2S `q_sw_ctrl` (udma_regs.h:128).
    pub(crate) M2S_Q_SW_CTRL(u32) @ 0xb0 {
        /// `RST_Q`: clears the queue's pointers (udma_regs.h:282).
        8:8 rst_q => bool;
    }

    /// S2M `comp_cfg` (udma_regs.h:375).
    pub(crate) S2M_COMP_CFG(u32) @ 0x54 {
        /// `EN_COMP_RING_UPDATE`.
        0:0 ring_update => bool;
    }

    /// S2M `q_sw_ctrl` (udma_regs.h:378).
    pub(crate) S2M_Q_SW_CTRL(u32) @ 0x64 {
        /// `RST_Q` (udma_regs.h:432).
        8:8 rst_q => bool;
    }
}
