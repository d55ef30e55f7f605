//! The UDMA unit's register map as the reference driver programs it
//! (aws-neuron-driver 2.24.7.0, `udma/udma_regs.h`, `udma/udma_main.c`):
//! only what the host-to-device queues use, each with its source.

/// Bytes of BAR0 one UDMA unit answers for: V2's engine window
/// (v2/address_map.h:134); the SDMA wrapper beyond it is a plain register
/// file.
pub const UNIT_SIZE: u64 = 0x4_0000;
/// Offset of the S2M half of a unit (`struct unit_regs_v4`,
/// udma_regs.h:627-635).
pub const S2M: u64 = 0x2_0000;
/// Offset of queue 0 in either half (`m2s_q[16]` / `s2m_q[16]`,
/// udma_regs.h:143, 390).
pub const QUEUES: u64 = 0x1000;
/// Bytes between queues (`sizeof(union udma_q_regs)`, udma_regs.h:656-660).
pub const QUEUE_STRIDE: u64 = 0x1000;
/// Queues per direction (`DMA_MAX_Q_V4`, udma.h:12).
pub const NR_QUEUES: usize = 16;

/// The state register of a half (`m2s.state` / `s2m.state`, +0x200):
/// four 2-bit fields (comp_ctrl 1:0, stream_if 5:4, data_rd 9:8,
/// desc_pref 13:12, udma_regs.h:453-463), each 0 idle, 1 normal, 2 abort
/// (udma_regs.h:31-37), as `udma_state_get` reads them
/// (udma_main.c:613-671).
pub const STATE: u64 = 0x200;
/// Every field of [`STATE`] at `v`.
pub const fn state_fields(v: u32) -> u32 {
    v | v << 4 | v << 8 | v << 12
}
/// A field's "normal" value.
pub const STATE_NORMAL: u32 = 1;
/// A field's "abort" value.
pub const STATE_ABORT: u32 = 2;

/// Queue registers, as offsets in a queue block (`udma_rings_regs`,
/// udma_regs.h:638-653; the same in both halves up to 0x50).
pub mod q {
    /// `cfg` (udma_regs.h:97, 350).
    pub const CFG: u64 = 0x20;
    /// `status` (udma_regs.h:99, 352): no bit is defined by the reference,
    /// which only reads it raw for a debug ioctl (neuron_dma.c:800); the
    /// model shows [`STATUS_ERROR`] there.
    pub const STATUS: u64 = 0x24;
    /// Ring base, low half; bits 5:0 ignored (`ADDR_MASK` 0xffffffc0,
    /// udma_regs.h:218-223).
    pub const DRBP_LOW: u64 = 0x28;
    /// Ring base, high half (udma_main.c:227).
    pub const DRBP_HIGH: u64 = 0x2c;
    /// Ring length in descriptors (`OFFSET_MASK` 0xffffff, udma_regs.h:225;
    /// the driver writes the count, udma_main.c:229).
    pub const DRL: u64 = 0x30;
    /// Head: offset 23:0 in descriptors, ring id 31:30 (udma_regs.h:232-236).
    pub const DRHP: u64 = 0x34;
    /// Tail increment, the doorbell: adds bits 23:0 to the tail
    /// (udma_regs.h:238-240; udma_main.c:674-684).
    pub const DRTP_INC: u64 = 0x38;
    /// Tail, as [`DRHP`] (udma_regs.h:245-249).
    pub const DRTP: u64 = 0x3c;
    /// M2S `comp_cfg` (udma_regs.h:125); always written 0: no completion
    /// ring (udma_m2m.c:175-178, udma_main.c:200-202).
    pub const M2S_COMP_CFG: u64 = 0xa0;
    /// M2S `q_sw_ctrl` (udma_regs.h:128).
    pub const M2S_SW_CTRL: u64 = 0xb0;
    /// S2M `comp_cfg` (udma_regs.h:375).
    pub const S2M_COMP_CFG: u64 = 0x54;
    /// S2M `q_sw_ctrl` (udma_regs.h:378).
    pub const S2M_SW_CTRL: u64 = 0x64;

    /// `cfg` bits that enable the queue, `EN_PREF` | `EN_SCHEDULING`
    /// (udma_regs.h:213, 215; udma_main.c:247-262).
    pub const CFG_ENABLE: u32 = 1 << 16 | 1 << 17;
    /// `cfg` at reset, "hardware reset value (from datasheet)"
    /// (udma_main.c:163-172).
    pub const CFG_RESET: u32 = 3 << 24;
    /// `q_sw_ctrl` `RST_Q` (udma_regs.h:282, 432): clears the queue's
    /// pointers at once; the driver does not wait (udma_main.c:406-423).
    pub const SW_CTRL_RST_Q: u32 = 1 << 8;
    /// Offset field of [`DRHP`] / [`DRTP`] / [`DRTP_INC`].
    pub const OFFSET_MASK: u32 = 0x00ff_ffff;
    /// Shift of the ring-id field of [`DRHP`] / [`DRTP`].
    pub const RING_ID_SHIFT: u32 = 30;
    /// The model's [`STATUS`] bit: the queue stopped on an error and fetches
    /// nothing until [`SW_CTRL_RST_Q`].
    pub const STATUS_ERROR: u32 = 1;
}

/// The ring rules `udma_q_init_validate` enforces (udma_main.c:359-395;
/// udma.h:23-27) and `udma_m2m_init_queue` adds (udma_m2m.c:158-173).
pub mod ring {
    /// Fewest descriptors (`UDMA_MIN_Q_SIZE`).
    pub const MIN: u32 = 32;
    /// Most descriptors (`UDMA_MAX_Q_SIZE`, (1 << 24) - 16).
    pub const MAX: u32 = (1 << 24) - 16;
    /// Ring base and end alignment (`UDMA_QUEUE_ADDR_BYTE_ALIGNMENT`).
    pub const ALIGN: u64 = 256;
    /// Descriptor counts are a multiple of this.
    pub const MULTIPLE: u32 = 16;
}
