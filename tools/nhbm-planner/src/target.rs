//! The device a plan is made for, and what the kernel allocates for it.
//!
//! A [`Target`] is the HBM geometry the planner plans against: the channels,
//! the bytes each region's pool manages, the pools' minimum allocation. It
//! comes from a device (`DEVICE_INFO` and `MEM_STATS`), from the arch table
//! (`--arch v2|v3|v4`), or defaults to a V2 device with the module's default
//! parameters.
//!
//! [`Target::kernel_bytes`] models `NHBM_IOC_PLAN_LOAD`'s placement
//! (`rust/plan/stage.rs`, `rust/pool/mempool.rs`) on an empty channel, so that the
//! bytes the planner reports are the `bytes_allocated` the kernel returns:
//! - each scratchpad is one allocation of its size rounded up to the minimum
//!   allocation, in one region;
//! - the records with their own HBM (INPUT, OUTPUT, BUFFER, BUFFER_STAGED,
//!   TMP_BUF, LIST, PTR_TABLE) are packed in blob order into one arena, each
//!   at max(its alignment, minimum allocation), the arena's size rounded up
//!   to the minimum allocation; a single such record is allocated alone
//!   (the same figure);
//! - an arena that fits in no region falls back to one allocation per record,
//!   each rounded up to the minimum allocation.

use nhbm::uapi::{DeviceInfo, MemStats, ARCH_V2, ARCH_V3, ARCH_V4, MAX_CHANNELS, MAX_REGIONS};
use nhbm::validate::allocates_from_pool;
use nhbm::{Kind, Plan};

use crate::model::align_up;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// The firmware carve-out at the start of every region (`FW_CARVEOUT`,
/// rust/arch.rs).
const FW_CARVEOUT: u64 = 16 * MIB;

/// The module's defaults: `regions=1 min_alloc=4096 fw_carveout=1`.
pub const DEFAULT_REGIONS: usize = 1;
/// The module's default `min_alloc`, in bytes.
pub const DEFAULT_MIN_ALLOC: u64 = 4096;

/// The HBM geometry of one device, as its pools see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Where the figures come from ("v2", "/dev/neuron_hbm0", ...).
    pub name: String,
    /// Bytes each region's pool manages, per channel: `pools[ch][r]`.
    pub pools: Vec<Vec<u64>>,
    /// Minimum allocation (a power of two).
    pub min_alloc: u64,
}

impl Default for Target {
    /// A V2 device (two 16 GiB channels) with the module's defaults.
    fn default() -> Self {
        Target::for_arch(ARCH_V2, DEFAULT_REGIONS, DEFAULT_MIN_ALLOC).expect("V2 is in the table")
    }
}

/// A geometry no Neuron device has.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// An arch number other than 2, 3 or 4.
    #[error("arch {0} is not 2, 3 or 4")]
    Arch(u32),
    /// An arch name other than v2, v3 or v4.
    #[error("unknown arch {0:?} (v2, v3, v4)")]
    ArchName(String),
    /// A region count outside 1..MAX_REGIONS.
    #[error("regions {0} is not 1..{MAX_REGIONS}")]
    Regions(usize),
    /// A minimum allocation that is not a power of two in 1 KiB..1 GiB.
    #[error("min_alloc {0} is not a power of two in 1024..1 GiB")]
    MinAlloc(u64),
}

impl Target {
    /// The geometry of arch `arch` (2, 3, 4) with `regions` regions per
    /// channel and minimum allocation `min_alloc`, as the kernel builds its
    /// pools (`Grid::new` in rust/pool.rs: the 16 MiB firmware carve-out at
    /// the start of every region, on every arch).
    pub fn for_arch(arch: u32, regions: usize, min_alloc: u64) -> Result<Target, TargetError> {
        let (name, channels, channel_size) = match arch {
            ARCH_V2 => ("v2", 2, 16 * GIB),
            ARCH_V3 => ("v3", 4, 24 * GIB),
            ARCH_V4 => ("v4", 4, 36 * GIB),
            _ => return Err(TargetError::Arch(arch)),
        };
        if !(1..=MAX_REGIONS).contains(&regions) {
            return Err(TargetError::Regions(regions));
        }
        if !min_alloc.is_power_of_two() || !(1024..=GIB).contains(&min_alloc) {
            return Err(TargetError::MinAlloc(min_alloc));
        }
        let region = (channel_size / regions as u64) & !(min_alloc - 1);
        let pools = vec![region - FW_CARVEOUT; regions];
        Ok(Target {
            name: name.into(),
            pools: vec![pools; channels],
            min_alloc,
        })
    }

    /// The geometry of arch `name` ("v2", "v3", "v4") with the module's
    /// default parameters.
    pub fn for_arch_name(name: &str) -> Result<Target, TargetError> {
        let arch = match name.to_ascii_lowercase().as_str() {
            "v2" => ARCH_V2,
            "v3" => ARCH_V3,
            "v4" => ARCH_V4,
            _ => return Err(TargetError::ArchName(name.to_string())),
        };
        Target::for_arch(arch, DEFAULT_REGIONS, DEFAULT_MIN_ALLOC)
    }

    /// The geometry a device reports: its channels and minimum allocation
    /// from `DEVICE_INFO`, each pool's size from `MEM_STATS`.
    pub fn from_device(name: &str, info: &DeviceInfo, stats: &MemStats) -> Target {
        let channels = (info.nr_channels as usize).min(MAX_CHANNELS);
        let regions = (info.regions_per_channel as usize).min(MAX_REGIONS);
        let pools = (0..channels)
            .map(|c| {
                (0..regions)
                    .filter(|&r| stats.pools[c][r].present == 1)
                    .map(|r| stats.pools[c][r].total)
                    .collect()
            })
            .collect();
        Target {
            name: name.into(),
            pools,
            min_alloc: info.min_alloc_size,
        }
    }

    /// HBM channels.
    pub fn channels(&self) -> usize {
        self.pools.len()
    }

    /// Bytes the pools of channel `ch` manage together (0 if it does not exist).
    pub fn channel_bytes(&self, ch: usize) -> u64 {
        self.pools.get(ch).map_or(0, |p| p.iter().sum())
    }

    /// The largest pool of channel `ch`: the most one allocation can take.
    pub fn largest_region(&self, ch: usize) -> u64 {
        self.pools
            .get(ch)
            .and_then(|p| p.iter().copied().max())
            .unwrap_or(0)
    }

    /// `size` rounded up to the minimum allocation.
    pub fn round(&self, size: u64) -> u64 {
        align_up(size, self.min_alloc)
    }

    /// The bytes one allocation of `size` at `align` takes: a multiple of
    /// its alignment, as the kernel rounds it.
    pub fn chunk_bytes(&self, size: u64, align: u64) -> u64 {
        align_up(size, align.max(self.min_alloc))
    }

    /// Bytes of the one arena the kernel packs `records` (size, alignment;
    /// in blob order) into, before the fallback: rounded up to the largest
    /// alignment, as every allocation is.
    pub fn arena_bytes(&self, records: impl IntoIterator<Item = (u64, u64)>) -> u64 {
        let (end, align) =
            records
                .into_iter()
                .fold((0, self.min_alloc), |(end, max), (size, align)| {
                    let a = align.max(self.min_alloc);
                    (align_up(end, a) + size, max.max(a))
                });
        align_up(end, align)
    }

    /// Bytes of HBM the allocating `records` (size, alignment; in blob
    /// order) take in channel `ch` next to `scratch` bytes of scratchpad:
    /// one arena if it fits in a region, else one allocation per record.
    /// `None` if some allocation fits in no region.
    pub fn allocation_bytes(&self, ch: usize, records: &[(u64, u64)], scratch: u64) -> Option<u64> {
        let pools = self.pools.get(ch)?;
        // Scratchpads are taken first, from the top of the last region.
        let mut free = pools.clone();
        if scratch > 0 {
            let last = free.iter().rposition(|&f| f >= scratch)?;
            free[last] -= scratch;
        }
        let arena = self.arena_bytes(records.iter().copied());
        if records.is_empty() || free.iter().any(|&f| f >= arena) {
            return Some(arena);
        }
        let mut total = 0;
        for &(size, align) in records {
            let s = self.chunk_bytes(size, align);
            let r = free.iter().position(|&f| f >= s)?;
            free[r] -= s;
            total += s;
        }
        Some(total)
    }

    /// The `bytes_allocated` NHBM_IOC_PLAN_LOAD reports for `plan` loaded on
    /// an empty channel `ch`, or `None` if it does not fit there.
    pub fn kernel_bytes(&self, plan: &Plan, ch: usize) -> Option<u64> {
        let scratch: u64 = [plan.local_scratchpad_size, plan.shared_scratchpad_size]
            .iter()
            .filter(|&&s| s > 0)
            .map(|&s| self.round(s))
            .sum();
        let records: Vec<(u64, u64)> = plan
            .records
            .iter()
            .filter(|r| allocates_from_pool(r.mr_type()) || is_table(&r.kind))
            .map(|r| (r.size, r.alignment))
            .collect();
        Some(scratch + self.allocation_bytes(ch, &records, scratch)?)
    }
}

fn is_table(k: &Kind) -> bool {
    matches!(k, Kind::List { .. } | Kind::PtrTable { .. })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nhbm::{Backing, Record};

    #[test]
    fn arch_table_is_the_kernels_pool_layout() {
        let v2 = Target::default();
        assert_eq!(v2.channels(), 2);
        assert_eq!(v2.pools[0], vec![16 * GIB - 16 * MIB]);
        let v3 = Target::for_arch(ARCH_V3, 2, 8192).unwrap();
        assert_eq!(v3.channels(), 4);
        assert_eq!(v3.pools[3], vec![12 * GIB - 16 * MIB; 2]);
        let v4 = Target::for_arch_name("V4").unwrap();
        assert_eq!(v4.channel_bytes(0), 36 * GIB - 16 * MIB);
        assert!(Target::for_arch(5, 1, 4096).is_err());
        assert!(Target::for_arch(ARCH_V2, 0, 4096).is_err());
        assert!(Target::for_arch(ARCH_V2, 1, 3000).is_err());
    }

    #[test]
    fn arena_packs_at_the_minimum_allocation() {
        let t = Target::default();
        // 100 B, then 3 MiB at 2 MiB, then 4 KiB: 0..100, 2M..5M, 5M..5M+4K,
        // and the arena a multiple of its 2 MiB alignment.
        let recs = [(100, 0), (3 * MIB, 2 * MIB), (4096, 64)];
        assert_eq!(t.arena_bytes(recs), 6 * MIB);
        // Order matters: the big one first leaves no gap.
        assert_eq!(
            t.arena_bytes([(3 * MIB, 2 * MIB), (100, 0), (4096, 64)]),
            4 * MIB
        );
        assert_eq!(t.arena_bytes([(1, 0)]), 4096);
        assert_eq!(t.arena_bytes([(1, 0), (4096, 4096)]), 8192);
    }

    #[test]
    fn an_allocation_spans_its_alignment() {
        let t = Target::default();
        assert_eq!(t.chunk_bytes(4096, 1 << 30), 1 << 30);
        assert_eq!(t.chunk_bytes(100, 0), 4096);
        assert_eq!(t.chunk_bytes(3 * MIB, 2 * MIB), 4 * MIB);
    }

    #[test]
    fn kernel_bytes_counts_scratchpads_arena_and_fallback() {
        let t = Target::for_arch(ARCH_V2, 2, 4096).unwrap();
        let p = Plan::new(5000, 0)
            .with(Record::buffer(1, 100).data(vec![1; 100]))
            .with(Record::virtual_tmp_buf(2, 64, Backing::Local, 0))
            .with(Record::input(3, 4097))
            .with(Record::ptr(4, 1, 0));
        // 8 KiB scratchpad + arena 0..100, 4K..8K+1 -> 12 KiB.
        assert_eq!(t.kernel_bytes(&p, 0), Some(8192 + 12288));
        // Two 5 GiB records do not fit one 8 GiB region: one chunk each.
        let big = Plan::new(0, 0)
            .with(Record::buffer(1, 5 * GIB))
            .with(Record::buffer(2, 5 * GIB + 1));
        assert_eq!(t.kernel_bytes(&big, 1), Some(10 * GIB + 4096));
        let huge = Plan::new(0, 0).with(Record::buffer(1, 9 * GIB));
        assert_eq!(t.kernel_bytes(&huge, 0), None); // larger than a region
        assert_eq!(t.kernel_bytes(&p, 2), None); // no channel 2
    }
}
