//! The 16-byte UDMA descriptor (`union udma_desc`, udma.h:38-58): `len_ctrl`
//! at 0, `meta_ctrl` (M2S) or an unused word (S2M) at 4, the buffer address
//! at 8, little-endian.

/// Bytes of a descriptor.
pub const SIZE: usize = 16;
/// `len_ctrl` length field (`M2S_DESC_LEN_MASK`, udma.h:66-67); 0 stands
/// for 64 KiB (`ENCODE_64K`, udma_regs.h:150-154; udma_m2m.c:274-277).
const LEN_MASK: u32 = 0xffff;
/// `len_ctrl` ring id, 25:24 (udma.h:64-65).
const RING_ID_SHIFT: u32 = 24;
/// The phase a ring's first pass carries (`UDMA_INITIAL_RING_ID`, udma.h:32).
pub const INITIAL_RING_ID: u32 = 1;
/// Ring ids count modulo this (`DMA_RING_ID_MASK` + 1, udma.h:35).
pub const RING_IDS: u32 = 4;
/// Largest transfer one descriptor describes (`MAX_DMA_DESC_SIZE`,
/// udma.h:428).
pub const MAX_LEN: u32 = 1 << 16;

/// One descriptor as read from its ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Desc {
    /// Bytes it moves (1 to 64 KiB).
    pub len: u32,
    /// Its phase.
    pub ring_id: u32,
    /// The buffer: the source of an M2S descriptor (`buf_ptr`), the
    /// destination of an S2M one (`buf1_ptr`).
    pub addr: u64,
}

impl Desc {
    /// Decodes the descriptor's bytes.
    pub fn parse(b: &[u8; SIZE]) -> Self {
        let len_ctrl = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let mut addr = [0u8; 8];
        addr.copy_from_slice(&b[8..]);
        let len = len_ctrl & LEN_MASK;
        Desc {
            len: if len == 0 { MAX_LEN } else { len },
            ring_id: len_ctrl >> RING_ID_SHIFT & (RING_IDS - 1),
            addr: u64::from_le_bytes(addr),
        }
    }

    /// The bytes of a descriptor of `len` (1 to 64 KiB) bytes at `addr`
    /// in phase `ring_id`, as `udma_m2m_copy_prepare_one` builds the M2S
    /// half (FIRST | LAST, udma_m2m.c:335-343); the model's tests build
    /// rings with it.
    pub fn encode(len: u32, ring_id: u32, addr: u64) -> [u8; SIZE] {
        let first_last = 0b11 << 26;
        let len_ctrl = (len & LEN_MASK) | (ring_id & (RING_IDS - 1)) << RING_ID_SHIFT | first_last;
        let mut b = [0u8; SIZE];
        b[..4].copy_from_slice(&len_ctrl.to_le_bytes());
        b[8..].copy_from_slice(&addr.to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_zero_is_64_kib_and_the_phase_is_bits_25_24() {
        let d = Desc::parse(&Desc::encode(MAX_LEN, 3, 1 << 44 | 0x1000));
        assert_eq!(d.len, 65536);
        assert_eq!(d.ring_id, 3);
        assert_eq!(d.addr, 1 << 44 | 0x1000);
        // The reference's len_ctrl of a 4-byte copy in phase 1
        // (FIRST | LAST | 1 << 24 | 4).
        let mut b = [0u8; SIZE];
        b[..4].copy_from_slice(&0x0d00_0004u32.to_le_bytes());
        assert_eq!(
            Desc::parse(&b),
            Desc {
                len: 4,
                ring_id: 1,
                addr: 0
            }
        );
    }
}
