//! The PCI figures of the module's DMA path (the module loaded with its
//! default `dma=1`): MEM_WRITE and MEM_READ of [`XFER`] bytes, which the
//! function's UDMA engine moves, against a libc `memcpy` into and out of
//! the same bytes of the function's BAR4 mapped through sysfs; and the
//! guest CPU time each spends per byte; and `pci_model_staging`, PLAN_LOAD
//! of the whole model through the engine against a `memcpy` of its bytes.
//!
//! What cancels: both sides move the same bytes of the same device on the
//! same emulator in the same run. What does not: the engine copies natively
//! inside the device model, while the `memcpy` runs under TCG; so a DMA path
//! that does not leave the CPU copy far behind loses its time in what the
//! guest does around the engine (bounce copies, doorbells, the wait).

use std::io;
use std::path::Path;

use nhbm::Device;

use crate::bar::BarMap;
use crate::device::{
    bandwidth_figure, bar_file_name, buffers_blob, pattern, pci_model_staging_figure,
};
use crate::measure::{interleave, try_time_ns, Pairs};
use crate::report::{Figure, Op, Raw};

/// Bytes of each transfer.
const XFER: usize = 64 << 20;
/// Repetitions of each comparison, in ABBA order: a repetition takes tens
/// of milliseconds, and with 5 one slow `memcpy` or one late answer of the
/// model moved a run's median by a tenth; the CPU time, counted in the
/// guest's ticks, is summed over all of them.
const REPS: usize = 11;
/// What `pci_dma_write_vs_bar_copy` and `pci_dma_read_vs_bar_copy` must
/// reach (Documentation/benchmarks.rst).
const DMA_BW_TARGET: f64 = 2.0;
/// What `pci_dma_cpu_per_byte` must stay under.
const DMA_CPU_TARGET: f64 = 0.25;
/// The channel the transfers use (V2's channel 0 starts at device address
/// 0 and BAR4 offset 0).
const CHANNEL: u32 = 0;

/// CPU time (user and system) this process has used, in nanoseconds.
fn cpu_ns() -> f64 {
    // SAFETY: a zeroed rusage is a valid out argument.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let ns = |t: libc::timeval| t.tv_sec as f64 * 1e9 + t.tv_usec as f64 * 1e3;
    ns(u.ru_utime) + ns(u.ru_stime)
}

/// `f`'s wall time, and the CPU time it used, in nanoseconds.
fn timed(f: impl FnOnce() -> io::Result<()>) -> io::Result<(f64, f64)> {
    let c0 = cpu_ns();
    let wall = try_time_ns(f)?;
    Ok((wall, cpu_ns() - c0))
}

/// Wall-time pairs of `dma` against `cpu`, and the CPU time each used in
/// all (summed over the repetitions).
fn compare(
    mut dma: impl FnMut() -> io::Result<()>,
    mut cpu: impl FnMut() -> io::Result<()>,
) -> io::Result<(Pairs, f64, f64)> {
    let (mut dma_cpu, mut cpu_cpu) = (0.0, 0.0);
    let p = interleave(
        REPS,
        || {
            let (w, c) = timed(&mut dma)?;
            dma_cpu += c;
            Ok(w)
        },
        || {
            let (w, c) = timed(&mut cpu)?;
            cpu_cpu += c;
            Ok(w)
        },
    )?;
    Ok((p, dma_cpu, cpu_cpu))
}

/// What the write and read comparisons measured: the write pairs, the CPU
/// time of the DMA writes and of the `memcpy`s, and the read pairs.
type Measured = (Pairs, f64, f64, Pairs);

/// MEM_WRITE and MEM_READ of variable 1 of plan `id` against a `memcpy`
/// into and out of `map`, after one checked, untimed pass.
fn measure(pci: &Device, id: u32, map: &BarMap) -> io::Result<Measured> {
    let src = pattern(XFER);
    let mut back = vec![0u8; XFER];
    pci.mem_write(id, 1, 0, &src)?;
    pci.mem_read(id, 1, 0, &mut back)?;
    if back != src {
        return Err(io::Error::other("MEM_READ differs from MEM_WRITE"));
    }
    let (w, w_dma_cpu, w_cpu_cpu) = compare(
        || pci.mem_write(id, 1, 0, &src),
        || {
            map.copy_from(&src);
            Ok(())
        },
    )?;
    let mut other = vec![0u8; XFER];
    let (rd, _, _) = compare(
        || pci.mem_read(id, 1, 0, &mut back),
        || {
            map.copy_to(&mut other);
            Ok(())
        },
    )?;
    Ok((w, w_dma_cpu, w_cpu_cpu, rd))
}

/// `pci_dma_write_vs_bar_copy`, `pci_dma_read_vs_bar_copy` and
/// `pci_dma_cpu_per_byte` on the V2 function `pci`, whose BAR4 this
/// process maps through `bar4`.
pub fn pci_dma_figures(pci: &Device, bar4: &Path) -> io::Result<Vec<Figure>> {
    let info = pci.device_info()?;
    if info.arch != 2 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the BAR4 comparison needs a V2 function, not v{}",
                info.arch
            ),
        ));
    }
    let loaded = pci.plan_load(&buffers_blob(1, XFER as u64), CHANNEL)?;
    let r = BarMap::open(bar4, loaded.addrs[0], XFER)
        .and_then(|map| measure(pci, loaded.plan_id, &map));
    pci.plan_unload(loaded.plan_id)?;
    let (w, w_dma_cpu, w_cpu_cpu, rd) = r?;
    let staging = pci_model_staging_figure(pci)?;
    let (file, mib) = (bar_file_name(bar4), XFER >> 20);
    let per_byte = |ns: f64| format!("{:.4}", ns / (REPS * XFER) as f64);
    Ok(vec![
        staging,
        bandwidth_figure(
            "pci_dma_write_vs_bar_copy",
            &w,
            XFER,
            [
                format!("MEM_WRITE by DMA {mib} MiB"),
                format!("memcpy into {file} {mib} MiB"),
            ],
            DMA_BW_TARGET,
        ),
        bandwidth_figure(
            "pci_dma_read_vs_bar_copy",
            &rd,
            XFER,
            [
                format!("MEM_READ by DMA {mib} MiB"),
                format!("memcpy out of {file} {mib} MiB"),
            ],
            DMA_BW_TARGET,
        ),
        Figure::new(
            "pci_dma_cpu_per_byte",
            w_dma_cpu / w_cpu_cpu,
            Raw::new("MEM_WRITE by DMA CPU ns/byte", per_byte(w_dma_cpu)),
            Raw::new(
                format!("memcpy into {file} CPU ns/byte"),
                per_byte(w_cpu_cpu),
            ),
            Op::AtMost,
            DMA_CPU_TARGET,
        ),
    ])
}
