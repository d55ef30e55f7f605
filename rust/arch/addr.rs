// SPDX-License-Identifier: GPL-2.0-only

//! Pure address math: device APB address to BAR0 offset, BAR4 remap of HBM
//! ranges, and the SBUF range predicates. No state, no I/O.

use crate::arch::{ArchInfo, Bar4Layout, SBUF_SIZE};
use kernel::prelude::*;

/// Position of the APB aperture inside BAR0 (`V2_PCIE_BAR0_APB_OFFSET`, seed 001 §1).
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) const BAR0_APB_OFFSET: u64 = 0x3000_0000;
/// Device address of the APB space (`V2_APB_BASE`, seed 001 §1).
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) const APB_BASE: u64 = 0x0fff_f000_0000;
/// Bytes of APB space windowed into BAR0 (the aperture runs to the 1 GiB BAR0 end).
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) const APB_APERTURE_SIZE: u64 = 0x1000_0000;

/// BAR0 host offset of the device APB address `addr`, `None` outside the aperture.
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) fn apb_to_bar0(addr: u64) -> Option<u64> {
    let rel = addr.checked_sub(APB_BASE)?;
    (rel < APB_APERTURE_SIZE).then_some(BAR0_APB_OFFSET + rel)
}

/// BAR4 host offset of the device-PA range `[pa, pa + size)`.
///
/// V2 packs its two 16 GiB stacks into 0..32 GiB (64 GiB appears at 16 GiB);
/// V3/V4 place channel `i` at `i * 64 GiB`. The range must lie in one channel.
///
/// The end bound is inclusive on every arch: a range may end exactly at the
/// end of its channel. Release 2.24.7.0 of the reference compares V2's end
/// with `<` (`mmap_get_bar4_offset_v2`, v2/neuron_dhal_v2.c), but its only
/// caller, `nmmap_dm` in neuron_mmap.c, drops the result, and another
/// version of the file compares with `<=`: the BAR maps the whole stack.
pub(crate) fn bar4_offset(info: &ArchInfo, pa: u64, size: u64) -> Result<u64> {
    let (off, run) = bar4_run(info, pa)?;
    if size > run {
        return Err(EINVAL);
    }
    Ok(off)
}

/// BAR4 host offset of device PA `pa`, and how many bytes from `pa` on map
/// to BAR4 one after the other (to the end of its channel).
pub(crate) fn bar4_run(info: &ArchInfo, pa: u64) -> Result<(u64, u64)> {
    for (i, &base) in info.channel_base[..info.nr_channels].iter().enumerate() {
        let limit = base + info.channel_size;
        if pa < base || pa >= limit {
            continue;
        }
        let window = match info.bar4 {
            Bar4Layout::Packed => i as u64 * info.channel_size,
            Bar4Layout::Strided(stride) => i as u64 * stride,
        };
        return Ok((window + (pa - base), limit - pa));
    }
    Err(EINVAL)
}

/// Device PA behind BAR4 offset `off`: the inverse of [`bar4_run`]
/// (`EINVAL` where BAR4 shows no channel).
pub(crate) fn bar4_to_pa(info: &ArchInfo, off: u64) -> Result<u64> {
    let stride = match info.bar4 {
        Bar4Layout::Packed => info.channel_size,
        Bar4Layout::Strided(stride) => stride,
    };
    let i = usize::try_from(off / stride)?;
    let rel = off % stride;
    if i >= info.nr_channels || rel >= info.channel_size {
        return Err(EINVAL);
    }
    Ok(info.channel_base[i] + rel)
}

/// SBUF window `[base, base + SBUF_SIZE)` of NeuronCore `nc` in the device
/// address map: the start of the core's TPB tile.
pub(crate) fn sbuf_window(info: &ArchInfo, nc: usize) -> Option<(u64, u64)> {
    (nc < info.nr_cores).then(|| (info.tpb_base[nc], SBUF_SIZE))
}

/// Whether `addr` lies in the SBUF of NeuronCore `nc` (`is_address_in_my_sbuf`).
pub(crate) fn is_address_in_my_sbuf(info: &ArchInfo, nc: usize, addr: u64) -> bool {
    match sbuf_window(info, nc) {
        Some((base, size)) => addr >= base && addr - base < size,
        None => false,
    }
}

/// Whether `addr` lies in any NeuronCore's SBUF (`is_address_in_sbuf`).
pub(crate) fn is_address_in_sbuf(info: &ArchInfo, addr: u64) -> bool {
    (0..info.nr_cores).any(|nc| is_address_in_my_sbuf(info, nc, addr))
}

/// Whether any byte of `[pa, pa + len)` lies in a NeuronCore's SBUF. A range
/// that wraps past the end of the address space counts as touching.
pub(crate) fn range_touches_sbuf(info: &ArchInfo, pa: u64, len: u64) -> bool {
    let Some(last) = pa.checked_add(len.max(1) - 1) else {
        return true;
    };
    is_address_in_sbuf(info, pa)
        || (0..info.nr_cores).any(|nc| match sbuf_window(info, nc) {
            Some((base, _)) => pa <= base && base <= last,
            None => false,
        })
}

#[kunit_tests(neuron_hbm_addr)]
mod tests {
    use super::*;
    use crate::arch::{GIB, V2, V3, V4};

    #[test]
    fn bar4_offsets_map_back_to_their_device_address() {
        for info in [&V2, &V3, &V4] {
            for &base in &info.channel_base[..info.nr_channels] {
                for pa in [base, base + 0x1234, base + info.channel_size - 8] {
                    let off = bar4_offset(info, pa, 8).unwrap_or(u64::MAX);
                    assert_eq!(bar4_to_pa(info, off), Ok(pa));
                }
            }
        }
        // V3's 40 GiB between a channel's end and the next window, and
        // past the last window.
        assert_eq!(bar4_to_pa(&V3, 24 * GIB), Err(EINVAL));
        assert_eq!(bar4_to_pa(&V3, 256 * GIB), Err(EINVAL));
        assert_eq!(bar4_to_pa(&V2, 32 * GIB), Err(EINVAL));
        assert_eq!(bar4_to_pa(&V2, 16 * GIB), Ok(0x10_0000_0000));
    }

    #[test]
    fn apb_maps_into_bar0() {
        assert_eq!(apb_to_bar0(APB_BASE), Some(0x3000_0000));
        // H2D UDMA, the reference's own example (neuron_dhal_v2.c:1072).
        assert_eq!(apb_to_bar0(0x0fff_f0d0_0000), Some(0x30d0_0000));
        assert_eq!(apb_to_bar0(APB_BASE - 1), None);
        assert_eq!(apb_to_bar0(APB_BASE + APB_APERTURE_SIZE), None);
        assert_eq!(apb_to_bar0(u64::MAX), None);
        // `V2_APB_MISC_RAM_OFFSET` (v2/address_map.h) is V2's MISC RAM in BAR0.
        assert_eq!(apb_to_bar0(0x0fff_f0fa_0000), Some(V2.bar0_misc_ram));
    }

    #[test]
    fn v2_stacks_pack_into_32_gib() {
        assert_eq!(bar4_offset(&V2, 0, 1), Ok(0));
        assert_eq!(bar4_offset(&V2, 16 * GIB - 2, 1), Ok(16 * GIB - 2));
        assert_eq!(bar4_offset(&V2, 64 * GIB, 1), Ok(16 * GIB));
        assert_eq!(bar4_offset(&V2, 80 * GIB - 2, 1), Ok(32 * GIB - 2));
    }

    #[test]
    fn v2_range_may_end_at_a_stack_end() {
        // The last byte of each stack, and a whole stack, translate.
        assert_eq!(bar4_offset(&V2, 16 * GIB - 1, 1), Ok(16 * GIB - 1));
        assert_eq!(bar4_offset(&V2, 80 * GIB - 1, 1), Ok(32 * GIB - 1));
        assert_eq!(bar4_offset(&V2, 0, 16 * GIB), Ok(0));
        // Crossing the end is rejected, on either stack.
        assert_eq!(bar4_offset(&V2, 16 * GIB - 4096, 8192), Err(EINVAL));
        assert_eq!(bar4_offset(&V2, 80 * GIB - 4096, 8192), Err(EINVAL));
    }

    #[test]
    fn v2_gap_and_overflow_rejected() {
        assert_eq!(bar4_offset(&V2, 16 * GIB, 1), Err(EINVAL));
        assert_eq!(bar4_offset(&V2, 32 * GIB, 1), Err(EINVAL));
        assert_eq!(bar4_offset(&V2, 64 * GIB - 1, 1), Err(EINVAL));
        assert_eq!(bar4_offset(&V2, 80 * GIB, 1), Err(EINVAL));
        assert_eq!(bar4_offset(&V2, 64 * GIB, u64::MAX), Err(EINVAL));
        assert_eq!(bar4_offset(&V2, u64::MAX, 2), Err(EINVAL));
    }

    #[test]
    fn v3_v4_channels_stride_64_gib() {
        for (info, size) in [(&V3, 24 * GIB), (&V4, 36 * GIB)] {
            for ch in 0..4 {
                let base = info.channel_base[ch];
                let win = ch as u64 * 64 * GIB;
                assert_eq!(bar4_offset(info, base, 1), Ok(win));
                assert_eq!(bar4_offset(info, base + size - 1, 1), Ok(win + size - 1));
                assert_eq!(bar4_offset(info, base, size), Ok(win));
                assert_eq!(bar4_offset(info, base + size - 1, 2), Err(EINVAL));
                assert_eq!(bar4_offset(info, base + size, 1), Err(EINVAL));
            }
            assert_eq!(bar4_offset(info, 0x8040_0000_0000, u64::MAX), Err(EINVAL));
        }
    }

    #[test]
    fn sbuf_edges_of_every_core() {
        for info in [&V2, &V3, &V4] {
            for nc in 0..info.nr_cores {
                let (base, size) = sbuf_window(info, nc).unwrap();
                assert_eq!(size, 32 << 20);
                assert!(is_address_in_my_sbuf(info, nc, base));
                assert!(is_address_in_my_sbuf(info, nc, base + size - 1));
                assert!(!is_address_in_my_sbuf(info, nc, base + size));
                assert!(!is_address_in_sbuf(info, base + size));
                assert!(is_address_in_sbuf(info, base + size - 1));
                if base > 0 {
                    assert!(!is_address_in_my_sbuf(info, nc, base - 1));
                    assert!(!is_address_in_sbuf(info, base - 1));
                }
                if nc + 1 < info.nr_cores {
                    assert!(!is_address_in_my_sbuf(info, nc + 1, base));
                }
            }
            assert!(sbuf_window(info, info.nr_cores).is_none());
            assert!(!is_address_in_my_sbuf(
                info,
                info.nr_cores,
                info.tpb_base[0]
            ));
        }
        assert_eq!(sbuf_window(&V2, 1), Some((0x0fff_c400_0000, 32 << 20)));
        assert_eq!(sbuf_window(&V3, 7), Some((0x8070_0000_0000, 32 << 20)));
    }

    #[test]
    fn sbuf_never_meets_hbm() {
        for info in [&V2, &V3, &V4] {
            for nc in 0..info.nr_cores {
                let (base, size) = sbuf_window(info, nc).unwrap();
                let end = base + size;
                for ch in 0..info.nr_channels {
                    let hbm = info.channel_base[ch];
                    let hbm_end = hbm + info.channel_size;
                    assert!(end <= hbm || hbm_end <= base);
                    // Nothing of the window reaches the host through BAR4.
                    assert!(bar4_offset(info, base, 1).is_err());
                    assert!(bar4_offset(info, end - 1, 1).is_err());
                }
                for other in 0..info.nr_cores {
                    if other != nc {
                        let (b, s) = sbuf_window(info, other).unwrap();
                        assert!(end <= b || b + s <= base);
                    }
                }
            }
        }
    }

    #[test]
    fn ranges_touching_sbuf() {
        let (base, size) = sbuf_window(&V2, 1).unwrap();
        assert!(range_touches_sbuf(&V2, base, 1));
        assert!(range_touches_sbuf(&V2, base - 4096, 4097));
        assert!(range_touches_sbuf(&V2, base + size - 1, 4096));
        assert!(range_touches_sbuf(&V2, 0, u64::MAX));
        assert!(range_touches_sbuf(&V2, u64::MAX, 2));
        assert!(!range_touches_sbuf(&V2, base - 4096, 4096));
        assert!(!range_touches_sbuf(&V2, base + size, 4096));
        assert!(!range_touches_sbuf(&V2, 0, 16 * GIB));
        assert!(!range_touches_sbuf(&V3, 0, 24 * GIB));
    }
}
