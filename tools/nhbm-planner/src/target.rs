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
//!   allocation, from the top of a region's main pool;
//! - the records with their own HBM (INPUT, OUTPUT, BUFFER, BUFFER_STAGED,
//!   TMP_BUF, LIST, PTR_TABLE, a VIRTUAL_TMP_BUF backed by MAIN) are packed in blob order into one arena, each
//!   at max(its alignment, minimum allocation), the arena's size rounded up
//!   to the largest of those alignments; a single such record is allocated
//!   alone;
//! - a record of at most 512 KiB (in pages) whose alignment is larger than
//!   its pages stands alone: a chunk of its own, after the arena;
//! - an arena that fits in no region falls back to one allocation per record;
//! - every allocation tries the regions in order; in each, one of at most
//!   512 KiB tries the region's small pool (its top GiB) first, where it
//!   takes its pages placed aligned, and the main pool, where it spans a
//!   multiple of its alignment, second; a larger one the other way round.
//!
//! The small pool is modelled as filled in order, each chunk at the next
//! aligned place: the kernel's first fit reuses the gaps this leaves, so
//! the model is exact as long as no chunk that the model sends on to a main
//! pool would have found a gap.

use nhbm::uapi::{DeviceInfo, MemStats, ARCH_V2, ARCH_V3, ARCH_V4, MAX_CHANNELS, MAX_REGIONS};
use nhbm::validate::allocates_from_pool;
use nhbm::{Backing, Kind, Plan};

use crate::model::align_up;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// The firmware carve-out at the start of every region (`FW_CARVEOUT`,
/// rust/arch.rs).
const FW_CARVEOUT: u64 = 16 * MIB;
/// Bytes of a region's small pool, at its top, when the region is larger
/// (`SMALL_POOL_SIZE`, rust/pool/mempool.rs).
const SMALL_POOL_SIZE: u64 = GIB;
/// Largest chunk, in pages, the small pool takes first (`SMALL_ALLOC_MAX`,
/// rust/pool/mempool.rs).
const SMALL_ALLOC_MAX: u64 = 512 * 1024;

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

    /// Whether the kernel gives a record of `size` at `align` a chunk of its
    /// own rather than a place in the arena (`stands_alone`,
    /// rust/plan/stage.rs): at most [`SMALL_ALLOC_MAX`] in pages, aligned
    /// beyond them.
    pub fn stands_alone(&self, size: u64, align: u64) -> bool {
        let pages = self.round(size);
        pages <= SMALL_ALLOC_MAX && align > pages
    }

    /// Bytes of the one arena the kernel packs `records` (size, alignment;
    /// in blob order) into, before the fallback: rounded up to the largest
    /// alignment, as every allocation is.
    pub fn arena_bytes(&self, records: impl IntoIterator<Item = (u64, u64)>) -> u64 {
        let (end, align) = self.arena_layout(records);
        align_up(end, align)
    }

    /// End of the last record packed and the largest alignment.
    fn arena_layout(&self, records: impl IntoIterator<Item = (u64, u64)>) -> (u64, u64) {
        records
            .into_iter()
            .fold((0, self.min_alloc), |(end, max), (size, align)| {
                let a = align.max(self.min_alloc);
                (align_up(end, a) + size, max.max(a))
            })
    }

    /// Bytes of HBM the allocating `records` (size, alignment; in blob
    /// order) take in channel `ch` next to `scratch` bytes of scratchpad:
    /// one arena if it fits in a region (and the records that stand alone
    /// after it), else one allocation per record. `None` if some
    /// allocation fits in no region.
    pub fn allocation_bytes(&self, ch: usize, records: &[(u64, u64)], scratch: u64) -> Option<u64> {
        let mut rooms: Vec<Room> = self.pools.get(ch)?.iter().map(|&b| Room::new(b)).collect();
        // Scratchpads are taken first, from the top of the last region.
        if scratch > 0 {
            let last = rooms.iter().rposition(|r| r.main >= scratch)?;
            rooms[last].main -= scratch;
        }
        let packed: Vec<(u64, u64)> = records
            .iter()
            .copied()
            .filter(|&(s, a)| !self.stands_alone(s, a))
            .collect();
        if packed.len() > 1 {
            let (end, align) = self.arena_layout(packed.iter().copied());
            if let Some(arena) = self.take(&mut rooms, align_up(end, align), align) {
                let mut alone = records.iter().filter(|&&(s, a)| self.stands_alone(s, a));
                return alone.try_fold(arena, |n, &(s, a)| Some(n + self.take(&mut rooms, s, a)?));
            }
        }
        records
            .iter()
            .try_fold(0, |n, &(s, a)| Some(n + self.take(&mut rooms, s, a)?))
    }

    /// Takes one allocation of `size` at `align` from the first of `rooms`
    /// with room for it: the bytes it takes.
    fn take(&self, rooms: &mut [Room], size: u64, align: u64) -> Option<u64> {
        let pages = self.round(size);
        let align = align.max(self.min_alloc);
        let spanned = align_up(pages, align);
        let small_first = pages <= SMALL_ALLOC_MAX;
        rooms
            .iter_mut()
            .find_map(|r| r.take(pages, spanned, align, small_first))
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
            .filter(|r| allocates_from_pool(r.mr_type()) || has_own_hbm(&r.kind))
            .map(|r| (r.size, r.alignment))
            .collect();
        Some(scratch + self.allocation_bytes(ch, &records, scratch)?)
    }
}

/// What the model knows of one region's room: the main pool's free bytes
/// and how far its small pool is filled.
struct Room {
    main: u64,
    small_size: u64,
    small_end: u64,
}

impl Room {
    /// An empty region of `bytes`; its top GiB is the small pool when it is
    /// larger than that.
    fn new(bytes: u64) -> Self {
        let small_size = if bytes > SMALL_POOL_SIZE {
            SMALL_POOL_SIZE
        } else {
            0
        };
        Room {
            main: bytes - small_size,
            small_size,
            small_end: 0,
        }
    }

    /// Takes `pages` placed at `align` from the small pool (first if
    /// `small_first`) or `spanned` from the main pool: the bytes taken.
    fn take(&mut self, pages: u64, spanned: u64, align: u64, small_first: bool) -> Option<u64> {
        for small in [small_first, !small_first] {
            if small {
                let at = align_up(self.small_end, align);
                if at + pages <= self.small_size {
                    self.small_end = at + pages;
                    return Some(pages);
                }
            } else if self.main >= spanned {
                self.main -= spanned;
                return Some(spanned);
            }
        }
        None
    }
}

/// Whether a record of a kind that is not an allocating type has HBM of its
/// own all the same: a table, or a VIRTUAL_TMP_BUF backed by MAIN.
fn has_own_hbm(k: &Kind) -> bool {
    matches!(
        k,
        Kind::List { .. }
            | Kind::PtrTable { .. }
            | Kind::VirtualTmpBuf {
                backing: Backing::Main,
                ..
            }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use nhbm::Record;

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
    fn an_allocation_spans_its_alignment_in_a_main_pool() {
        let t = Target::default();
        assert_eq!(t.allocation_bytes(0, &[(600 * 1024, MIB)], 0), Some(MIB));
        assert_eq!(
            t.allocation_bytes(0, &[(3 * MIB, 2 * MIB)], 0),
            Some(4 * MIB)
        );
        assert_eq!(t.allocation_bytes(0, &[(100, 0)], 0), Some(4096));
        // A small chunk alone takes its pages in the small pool.
        assert_eq!(
            t.allocation_bytes(0, &[(12 * 1024, 8192)], 0),
            Some(12 * 1024)
        );
    }

    #[test]
    fn small_overaligned_records_stand_alone() {
        let t = Target::default();
        assert!(t.stands_alone(4096, 64 * 1024));
        assert!(!t.stands_alone(4096, 4096) && !t.stands_alone(600 * 1024, MIB));
        // Two packed records (one 8 KiB arena) and 10,000 pages at 64 KiB.
        let mut recs = vec![(100, 0), (4096, 0)];
        recs.extend(std::iter::repeat_n((4096, 64 * 1024), 10_000));
        assert_eq!(t.allocation_bytes(0, &recs, 0), Some(8192 + 10_000 * 4096));
        // The small GiB holds 16,384 of them, less the arena's place; the
        // rest span their alignment in the main pool.
        recs.extend(std::iter::repeat_n((4096, 64 * 1024), 10_000));
        let small = 16_384 - 1;
        let main = 20_000 - small;
        assert_eq!(
            t.allocation_bytes(0, &recs, 0),
            Some(8192 + small * 4096 + main * 64 * 1024)
        );
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
        // A MAIN scratch buffer is packed with them.
        let main = p
            .clone()
            .with(Record::virtual_tmp_buf(5, 100, Backing::Main, 0));
        assert_eq!(t.kernel_bytes(&main, 0), Some(8192 + 16384));
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
