//! The figures of variables mapped into this process (MAP_OFFSET, `mmap`):
//! a copy through the mapping against the same copy through the function's
//! BAR4 mapped by sysfs, and against a copy between two plain buffers on a
//! simulated device.

use std::cell::RefCell;
use std::io;
use std::path::Path;

use nhbm::{Device, Mapping};

use crate::bar::BarMap;
use crate::device::{
    bandwidth_figure, bar_file_name, buffers_blob, invalid, pattern, CHANNEL, UPLOAD_CHUNK,
    UPLOAD_REPS,
};
use crate::measure::{interleave, time_ns, Pairs};
use crate::report::Figure;

/// What `pci_mmap_write_vs_bar_copy` and `pci_mmap_read_vs_bar_copy` must
/// reach: the mapping is the same BAR, write-combining (see
/// Documentation/benchmarks.rst).
pub const PCI_MMAP_TARGET: f64 = 0.95;
/// Bytes and repetitions of the two PCI figures: both sides are the same
/// BAR pages, so the figure sits near 1 and only the emulator's noise
/// (single repetitions of 64 MiB: 0.6-1.6) moves its median; shorter
/// copies, many more of them, interleave more finely.
const PCI_MMAP_XFER: usize = 16 << 20;
const PCI_MMAP_REPS: usize = 61;
/// What `sim_mmap_upload_vs_memcpy` must reach: both sides are copies into
/// plain memory, and the emulator alone spread the median over 0.70-1.07
/// in three runs (Documentation/benchmarks.rst).
pub const SIM_MMAP_TARGET: f64 = 0.6;

/// Nanoseconds `f` took, or its error.
fn timed(f: impl FnOnce() -> io::Result<()>) -> io::Result<f64> {
    let (r, ns) = time_ns(f);
    r.map(|()| ns)
}

/// A loaded one-buffer plan of `len` bytes on [`CHANNEL`], mapped: its
/// id, device address and mapping.
fn mapped_buffer(dev: &Device, len: usize) -> io::Result<(u32, u64, Mapping)> {
    let p = dev.plan_load(&buffers_blob(1, len as u64), CHANNEL)?;
    let m = dev.map(p.plan_id, 1).inspect_err(|_| {
        let _ = dev.plan_unload(p.plan_id);
    })?;
    Ok((p.plan_id, p.addrs[0], m))
}

/// `pci_mmap_write_vs_bar_copy` and `pci_mmap_read_vs_bar_copy`: a memcpy
/// of [`PCI_MMAP_XFER`] bytes into and out of a variable mapped through the
/// module, against the same memcpy into and out of the same bytes of the
/// function's BAR4 mapped through `bar4` (sysfs `resource4_wc`), after one
/// untimed pass of each (which fills the module's mapping), [`PCI_MMAP_REPS`]
/// repetitions each in ABBA order. V2 only: its channel 0 is BAR4 offset 0.
pub fn pci_mmap_figures(pci: &Device, bar4: &Path) -> io::Result<Vec<Figure>> {
    if pci.device_info()?.arch != 2 {
        return Err(invalid("the BAR4 comparison needs a V2 function".into()));
    }
    let len = PCI_MMAP_XFER;
    let file = bar_file_name(bar4);
    let (id, pa, mut m) = mapped_buffer(pci, len)?;
    let res = (|| {
        let bar = BarMap::open(bar4, pa, len)?;
        let (w, r) = mmap_vs_bar_pairs(&mut m, &bar, len)?;
        let mib = len >> 20;
        Ok(vec![
            bandwidth_figure(
                "pci_mmap_write_vs_bar_copy",
                &w,
                len,
                [
                    format!("memcpy into the mapped variable {mib} MiB"),
                    format!("memcpy into {file} {mib} MiB"),
                ],
                PCI_MMAP_TARGET,
            ),
            bandwidth_figure(
                "pci_mmap_read_vs_bar_copy",
                &r,
                len,
                [
                    format!("memcpy out of the mapped variable {mib} MiB"),
                    format!("memcpy out of {file} {mib} MiB"),
                ],
                PCI_MMAP_TARGET,
            ),
        ])
    })();
    drop(m);
    pci.plan_unload(id)?;
    res
}

/// A memcpy of `len` bytes into and then out of the mapped variable `m`
/// against the same memcpy through `bar`, after one untimed pass of each
/// and a check that both read back what was written: the (write, read)
/// pairs.
fn mmap_vs_bar_pairs(m: &mut Mapping, bar: &BarMap, len: usize) -> io::Result<(Pairs, Pairs)> {
    let src = pattern(len);
    m.write(0, &src)?;
    bar.copy_from(&src);
    let w = interleave(
        PCI_MMAP_REPS,
        || timed(|| m.write(0, &src)),
        || Ok(time_ns(|| bar.copy_from(&src)).1),
    )?;
    // One destination for both sides: two buffers of 64 MiB need not
    // cost the same to write (one may be backed by huge pages, which
    // the emulator's TLB handles much faster), and that would be
    // measured instead of the mappings.
    let dst = RefCell::new(vec![0u8; len]);
    m.read(0, &mut dst.borrow_mut())?;
    let via_map = dst.borrow().clone();
    bar.copy_to(&mut dst.borrow_mut());
    if via_map != src || *dst.borrow() != src {
        return Err(invalid(
            "the two mappings differ from what was written".into(),
        ));
    }
    drop(via_map);
    let r = interleave(
        PCI_MMAP_REPS,
        || timed(|| m.read(0, &mut dst.borrow_mut())),
        || Ok(time_ns(|| bar.copy_to(&mut dst.borrow_mut())).1),
    )?;
    Ok((w, r))
}

/// `sim_mmap_upload_vs_memcpy`: a memcpy of [`UPLOAD_CHUNK`] bytes into a
/// variable of a simulated device mapped into the process, against the same
/// memcpy into a plain buffer, after one untimed pass of each (which
/// allocates the simulated pages and faults both in), [`UPLOAD_REPS`]
/// repetitions in ABBA order.
pub fn sim_mmap_figure(dev: &Device) -> io::Result<Figure> {
    let len = UPLOAD_CHUNK;
    let (id, _, mut m) = mapped_buffer(dev, len)?;
    let res = (|| {
        let src = pattern(len);
        let mut dst = vec![0u8; len];
        let mut copy = |src: &[u8]| {
            dst.copy_from_slice(std::hint::black_box(src));
            std::hint::black_box(&dst);
        };
        m.write(0, &src)?;
        copy(&src);
        let p = interleave(
            UPLOAD_REPS,
            || timed(|| m.write(0, &src)),
            || Ok(time_ns(|| copy(&src)).1),
        )?;
        let mut back = vec![0u8; 4096];
        dev.mem_read(id, 1, (len / 2) as u64, &mut back)?;
        if back[..] != src[len / 2..len / 2 + 4096] {
            return Err(invalid(
                "MEM_READ differs from what the mapping wrote".into(),
            ));
        }
        let mib = len >> 20;
        Ok(bandwidth_figure(
            "sim_mmap_upload_vs_memcpy",
            &p,
            len,
            [
                format!("memcpy into the mapped variable {mib} MiB"),
                format!("memcpy {mib} MiB"),
            ],
            SIM_MMAP_TARGET,
        ))
    })();
    drop(m);
    dev.plan_unload(id)?;
    res
}
