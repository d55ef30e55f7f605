//! The plan blob as bytes: a 24-byte header, `nmem` records of 152 bytes, then
//! a data area; little-endian, every offset measured from the start of the blob.
//!
//! [`RawPlan`] is the blob taken apart without any validation, so that a test
//! can build a well-formed plan, break one field, and put it back together.

use zerocopy::{FromBytes, IntoBytes};

use crate::error::PlanError;
use crate::uapi::{MemRef, PlanHeader, MEM_REF_SIZE, PLAN_HEADER_SIZE};

// The blob is the structures' memory image, and the kernel reads it as such;
// the format is little-endian, so the image is the blob only on such a host.
const _: () = assert!(
    cfg!(target_endian = "little"),
    "the plan blob is little-endian"
);

impl PlanHeader {
    /// The header as the 24 bytes of the blob.
    pub fn encode(&self) -> [u8; PLAN_HEADER_SIZE] {
        zerocopy::transmute!(*self)
    }

    /// Reads a header from at least 24 bytes.
    pub fn decode(b: &[u8]) -> Option<Self> {
        Self::read_from_prefix(b).ok().map(|(h, _)| h)
    }
}

impl MemRef {
    /// The record as the 152 bytes of the blob.
    pub fn encode(&self) -> [u8; MEM_REF_SIZE] {
        zerocopy::transmute!(*self)
    }

    /// Reads a record from at least 152 bytes.
    pub fn decode(b: &[u8]) -> Option<Self> {
        Self::read_from_prefix(b).ok().map(|(r, _)| r)
    }
}

/// A plan blob taken apart: header, records, and everything after the records.
/// Offsets inside records stay blob-absolute.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawPlan {
    /// The 24-byte header.
    pub header: PlanHeader,
    /// The records, in blob order.
    pub records: Vec<MemRef>,
    /// The data area: the bytes that follow the last record.
    pub data: Vec<u8>,
}

impl RawPlan {
    /// Offset of the data area in a blob with `nmem` records.
    pub fn data_start(nmem: usize) -> usize {
        PLAN_HEADER_SIZE + nmem * MEM_REF_SIZE
    }

    /// The blob. `header.nmem` is written as it is (a test may want a lie),
    /// while the records actually present are all written.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::data_start(self.records.len()) + self.data.len());
        out.extend_from_slice(self.header.as_bytes());
        out.extend_from_slice(self.records.as_bytes());
        out.extend_from_slice(&self.data);
        out
    }

    /// Takes a blob apart. Only the sizes are checked (header present, `nmem`
    /// records present); nothing else is validated.
    pub fn from_bytes(blob: &[u8]) -> Result<Self, PlanError> {
        let header = PlanHeader::decode(blob)
            .ok_or_else(|| PlanError::einval("blob shorter than the 24-byte header"))?;
        let nmem = header.nmem as usize;
        let end = (nmem as u64)
            .checked_mul(MEM_REF_SIZE as u64)
            .and_then(|n| n.checked_add(PLAN_HEADER_SIZE as u64))
            .filter(|&e| e <= blob.len() as u64)
            .ok_or_else(|| PlanError::einval(format!("blob too short for nmem {nmem} records")))?
            as usize;
        let records = (0..nmem)
            .map(|i| MemRef::decode(&blob[PLAN_HEADER_SIZE + i * MEM_REF_SIZE..]).unwrap())
            .collect();
        Ok(RawPlan {
            header,
            records,
            data: blob[end..].to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uapi::*;

    fn rd_u32(b: &[u8], off: usize) -> u32 {
        u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
    }

    fn rd_u64(b: &[u8], off: usize) -> u64 {
        u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
    }

    #[test]
    fn header_is_little_endian() {
        let h = PlanHeader {
            local_scratchpad_size: 0x0102_0304_0506_0708,
            shared_scratchpad_size: 0x1122,
            nmem: 3,
            rsvd: 0,
        };
        let b = h.encode();
        assert_eq!(b[0], 0x08);
        assert_eq!(b[7], 0x01);
        assert_eq!(&b[8..10], &[0x22, 0x11]);
        assert_eq!(&b[16..20], &[3, 0, 0, 0]);
        assert_eq!(PlanHeader::decode(&b), Some(h));
    }

    #[test]
    fn record_fields_land_at_header_offsets() {
        let mut r = MemRef {
            mr_type: MR_SB,
            flags: 0,
            name_off: 0xAA,
            size: 0xBB,
            alignment: 0x40,
            var_id: 0x1234_5678,
            ndim: 2,
            data_off: 0xCC,
            data_len: 0xDD,
            u: MemRefUnion::from(MrSb {
                nc_id: 1,
                rsvd: 0,
                offset: 0x1000,
            }),
            ..Default::default()
        };
        r.dtype[..7].copy_from_slice(b"float32");
        r.shape[0] = 3;
        r.shape[1] = 5;
        let b = r.encode();
        assert_eq!(rd_u32(&b, 0), MR_SB);
        assert_eq!(rd_u64(&b, 8), 0xAA);
        assert_eq!(rd_u64(&b, 16), 0xBB);
        assert_eq!(rd_u64(&b, 24), 0x40);
        assert_eq!(rd_u32(&b, 32), 0x1234_5678);
        assert_eq!(&b[36..44], b"float32\0");
        assert_eq!(rd_u32(&b, 52), 2);
        assert_eq!(rd_u64(&b, 56), 3);
        assert_eq!(rd_u64(&b, 64), 5);
        assert_eq!(rd_u64(&b, 120), 0xCC);
        assert_eq!(rd_u64(&b, 128), 0xDD);
        assert_eq!(rd_u32(&b, 136), 1);
        assert_eq!(rd_u32(&b, 140), 0);
        assert_eq!(rd_u64(&b, 144), 0x1000);
        assert_eq!(MemRef::decode(&b), Some(r));
    }

    #[test]
    fn union_variants_encode_little_endian() {
        let v = MemRef {
            mr_type: MR_VIRTUAL_TMP_BUF,
            u: MemRefUnion::from(MrVtmp {
                offset: 0x0102_0304_0506_0708,
                backing: 1,
                nc_id: 0,
            }),
            ..Default::default()
        };
        let b = v.encode();
        assert_eq!(rd_u64(&b, 136), 0x0102_0304_0506_0708);
        assert_eq!(rd_u32(&b, 144), 1);
        assert_eq!(MemRef::decode(&b), Some(v));

        let l = MemRef {
            mr_type: MR_LIST,
            u: MemRefUnion::from(MrList {
                count: 7,
                rsvd: 0,
                ids_off: 0x300,
            }),
            ..Default::default()
        };
        let b = l.encode();
        assert_eq!(rd_u32(&b, 136), 7);
        assert_eq!(rd_u64(&b, 144), 0x300);
        assert_eq!(MemRef::decode(&b), Some(l));

        let r = MemRef {
            mr_type: MR_REMOTE,
            u: MemRefUnion::from(MrRemote {
                remote_var_id: 9,
                remote_plan_id: 4,
                rsvd: 0,
            }),
            ..Default::default()
        };
        let b = r.encode();
        assert_eq!(rd_u32(&b, 136), 9);
        assert_eq!(rd_u32(&b, 140), 4);
        assert_eq!(MemRef::decode(&b), Some(r));
    }

    #[test]
    fn raw_plan_round_trips_and_checks_sizes() {
        let raw = RawPlan {
            header: PlanHeader {
                local_scratchpad_size: 64,
                nmem: 1,
                ..Default::default()
            },
            records: vec![MemRef {
                mr_type: MR_BUFFER,
                size: 8,
                var_id: 1,
                ..Default::default()
            }],
            data: vec![1, 2, 3],
        };
        let b = raw.to_bytes();
        assert_eq!(b.len(), 24 + 152 + 3);
        assert_eq!(RawPlan::from_bytes(&b).unwrap(), raw);
        assert!(RawPlan::from_bytes(&b[..23]).is_err());
        assert!(RawPlan::from_bytes(&b[..24 + 151]).is_err());
    }
}
