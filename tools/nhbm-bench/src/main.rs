//! `nhbm-bench`: the userspace benchmarks of neuron_hbm (`make bench`).
//!
//! ```text
//! nhbm-bench [DEVICE] [--models DIR] [--no-device] [--no-planner]
//! nhbm-bench DEVICE --pci-write PCI_DEVICE [--bar4 FILE]
//! nhbm-bench --pci-dma PCI_DEVICE [--bar4 FILE]
//! ```
//!
//! With `--pci-write` only the figures of 9 run, DEVICE being a simulated
//! device and PCI_DEVICE an emulated PCI function; with `--pci-dma` only
//! those of 11.
//!
//! DEVICE defaults to `/dev/neuron_hbm0`, DIR (the model descriptions) to
//! `/tests`. Every figure is a ratio of two things measured in the same run,
//! interleaved where they are timed, so the speed of an emulated CPU cancels
//! out. A timed figure is the median of at least 5 repetitions, each a
//! measurement of A and one of B made back to back (ABBA order), and prints
//! the smallest and largest ratio of its repetitions; one line per figure:
//!
//! ```text
//! bench: <name>: <value> (<what A> <A> / <what B> <B>) [spread <min>-<max> of <n>] target <op> <t> <PASS|FAIL>
//! ```
//!
//! Lines starting with `#` are diagnostics. Times come from
//! `clock_gettime(CLOCK_MONOTONIC)` (`std::time::Instant`); the test guest's
//! clock may tick only every 4 ms, so short operations are timed in blocks
//! of about 150 ms and a figure takes the median over blocks.
//!
//! 1. `resolve`: a plan of 4096 4 KiB MR_BUFFER variables is staged; blocks
//!    of NHBM_IOC_RESOLVE calls (every variable in turn, 64 bytes at varying
//!    offsets) alternate with blocks of NHBM_IOC_DEVICE_INFO, the cheapest
//!    ioctl, 21 blocks each in ABBA order. Figure: median ns per RESOLVE /
//!    median ns per DEVICE_INFO. Target <= 1.25.
//! 2. `library_resolve`: on the same plan, `nhbm::Resolver` (the library's
//!    in-process resolve from the address table PLAN_LOAD returned; its
//!    answers are first checked against RESOLVE for every variable) in blocks
//!    alternating with RESOLVE blocks, 21 each. Figure: median ns per library
//!    resolve / median ns per RESOLVE. Target <= 0.02.
//! 3. `staging_scale`: NHBM_IOC_PLAN_LOAD of 100,000 MR_BUFFER records of
//!    4 KiB (no payload, no names, so every record is a real HBM allocation:
//!    400 MB of a 16 GiB V2 channel) / of 10,000 such records, each load from
//!    an empty device and unloaded after, 7 alternating rounds (each round
//!    averages enough 10,000-record loads to last 250 ms). Figure: median of
//!    the rounds' large / small. Target <= 12 (10 is linear).
//! 4. `upload_bandwidth`: NHBM_IOC_MEM_WRITE of a 64 MiB buffer into a 64 MiB
//!    variable against a userspace memcpy of the same 64 MiB buffer into
//!    another, 9 repetitions in ABBA order after one untimed pass of each
//!    (which materializes the simulated device's pages and faults in the
//!    destination). 64 MiB buffers keep source, simulated device and
//!    destination inside the 512 MiB guest. Figure: median MEM_WRITE
//!    bytes/ns / memcpy bytes/ns. Target >= 0.5.
//! 5. `kmem_per_var`: while the first 100,000-variable plan of figure 3 is
//!    staged (and nothing else), the module's own accounting in debugfs
//!    (`neuron_hbm/neuron_hbm0/kmem` or `neuron_hbm0/kmem`: `plans <n> vars
//!    <n> bytes <n>`, figure bytes / vars); without that file, the growth of
//!    `Slab:` + `VmallocUsed:` in /proc/meminfo over the load / 100,000. The
//!    line names its source; the meminfo growth is always printed as a
//!    diagnostic. Read at every large load of figure 3. Target <= 96 bytes.
//! 6. `planner_<model>_<planner>`: for each model description in DIR (a
//!    `*.json` with `tensors` and `operators`; plans are skipped) and each
//!    planner, the scratch high-water mark / the liveness lower bound (the
//!    most scratch bytes live at one operator), with the model's own planner
//!    options. Targets: hill_climb <= 1.05; greedy_by_size <= greedy on the
//!    same model; greedy >= 1 (no plan beats the bound, a consistency check).
//!    `planner_generated_<planner>`: the worst ratio over 20 generated graphs
//!    (residual chains, branchy DAGs, encoder/decoders with long skips; 1 KiB
//!    to 16 MiB tensors, default planner options). `planner_gbs_vs_greedy`:
//!    the worst greedy_by_size / greedy high-water mark over all of them.
//!    Target <= 1.000. `exact` (1 s budget on generated graphs) must never be
//!    above hill_climb or greedy_by_size. `planner_hard_<planner>`: the worst
//!    ratio over hard instances of 50..500 buffers (a time x capacity
//!    rectangle cut into buffers, so the bound is the optimum; exact with
//!    the comparison's node budget below): exact 1.000, hill_climb <= 1.05,
//!    and neither above greedy_by_size on any instance.
//!    `planner_heldout_hill_climb`: hill_climb's worst ratio with default
//!    options over the held-out hard instances (150..450 buffers in steps
//!    of 50, seeds 1..5), target <= 1.05; the slowest plan's wall-clock
//!    time is printed beside it, not judged.
//!    With `--minimalloc PROGRAM`, `planner_vs_minimalloc`: exact (a node
//!    budget of 100,000 per search thread, 60 s as an outer cap) and MiniMalloc
//!    (10 s per capacity asked: the lower bound, then, where it found
//!    nothing and exact is above the bound, exact's peak) on hard
//!    instances of 100..500 buffers, seeds 1..3, and the example models;
//!    the worst exact peak / MiniMalloc peak where MiniMalloc packed,
//!    target <= 1.000; `planner_vs_minimalloc_bound`: instances where
//!    MiniMalloc reached the lower bound and exact did not, target 0.
//!    `planner_10k_ms` and `planner_100k_ms`: the default planner on traced
//!    decoder stacks of 10,000 and 100,000 tensors, milliseconds, targets
//!    1,000 and 10,000 with the plan within 1% of the lower bound (`#`
//!    lines give decoder stacks built from their dimensions beside them);
//!    `planner_time_limit_overrun`: its time over a 2 s limit on 100,000
//!    tensors, target <= 1.10; `planner_vs_minimalloc_challenging`: exact's
//!    worst peak over MiniMalloc's on MiniMalloc's 11 challenging
//!    instances, target <= 1.000 (MiniMalloc run beside it with
//!    `--minimalloc`, else the capacity its paper packs them in).
//!    `planner_traces_lb`: the default planner's worst peak over the lower
//!    bound on compilers' traces (IOPDDL and SOMAS, `traces.rs`), target
//!    <= 1.01; with `--omnimalloc FILE` (omnimalloc's peaks on the same
//!    traces), `planner_vs_bestfit_traces` and
//!    `planner_vs_supermalloc_traces`: the worst of its peak over
//!    omnimalloc's best fit's and SuperMalloc's (10 s, one thread), target
//!    <= 1.000.
//!
//! 7. `model_staging`: NHBM_IOC_PLAN_LOAD of a plan of 1,000 MR_BUFFER_STAGED
//!    records carrying 256 MiB of payloads (upload, scrub, placement) against
//!    a userspace memcpy of the same 256 MiB (a copy with the module's
//!    upload instructions, `movnti`, src/copies.rs, printed beside it), 15
//!    repetitions in ABBA order after one untimed pass of each. Figure:
//!    median memcpy time / PLAN_LOAD time. Target >= 0.8.
//!    `model_staging_vs_mem_write`: the same PLAN_LOAD
//!    against MEM_WRITE of the same 1,000 payloads into a fresh plan of the
//!    same variables, 15 repetitions: what PLAN_LOAD costs beyond its copy.
//!    Figure: median MEM_WRITE time / PLAN_LOAD time. Target >= 0.9.
//! 8. `pointer_chain` and `crafted_ids`: PLAN_LOAD of 2^20 records whose
//!    pointers form one chain / whose pointers all name one buffer, and of
//!    variable ids sharing their low bits / random ids (tools/nhbm-bench/src/
//!    adversarial.rs), 5 repetitions each. Target <= 3 each.
//!    `aligned_gaps`: PLAN_LOAD of 32,768 4 KiB MR_BUFFERs at 8 KiB
//!    alignment (a chunk each, a gap after each) in one plan against the
//!    same buffers in 8 plans loaded and unloaded in turn, 5 repetitions.
//!    Target <= 3.
//!    `shared_weights_hbm`: device memory in use (MEM_STATS) while eight
//!    processes hold an import (NHBM_IOC_PLAN_IMPORT) of one exported 16 MiB
//!    plan / while one does (src/sharing.rs). Target <= 1.01.
//! 9. In `make bench`'s second guest (QEMU 11 with tools/nhbm-devmodel):
//!    `pci_mem_write`, NHBM_IOC_MEM_WRITE of 16 MiB into an emulated PCI
//!    function's write-combining BAR4 / into the simulated device, 6
//!    repetitions after one untimed write of each, target >= 0.02; and the
//!    function against its own BAR4, mapped by this process through sysfs
//!    (`resource4_wc`, or `resource4` where the BAR is not prefetchable, which
//!    a diagnostic then says; `--bar4` names another file):
//!    `pci_write_vs_bar_copy` (MEM_WRITE of 64 MiB / the module's own copy
//!    loop into the mapping: `rep movsq` through 64 KiB, one 64-bit store a
//!    word, src/copies.rs), `pci_read_vs_bar_copy` (MEM_READ / the same
//!    loop out of it) and `pci_scrub_vs_memset` (PLAN_LOAD of a fresh 64 MiB
//!    buffer, which the module scrubs / its zeroing loop over the mapping),
//!    9 repetitions each, bytes/ns over bytes/ns, a libc memcpy or memset
//!    printed beside each as information. Targets >= 0.8 (write), >= 0.65
//!    (read, scrub). And
//!    `pci_mmap_write_vs_bar_copy` / `pci_mmap_read_vs_bar_copy`: a memcpy
//!    into / out of a 16 MiB variable mapped through the module
//!    (MAP_OFFSET, mmap) against the same memcpy through the sysfs mapping,
//!    61 repetitions each, target >= 0.95.
//! 10. `sim_mmap_upload_vs_memcpy`: a memcpy of 64 MiB into a variable of
//!     the simulated device mapped through the module against a memcpy
//!     between two buffers, 9 repetitions in ABBA order after one untimed
//!     pass of each, target >= 0.6.
//! 11. In the same guest, the module loaded again with its DMA engine on
//!     (src/dma.rs): `pci_dma_write_vs_bar_copy` / `pci_dma_read_vs_bar_copy`
//!     (MEM_WRITE / MEM_READ of 64 MiB, which the function's engine moves,
//!     against a libc memcpy into / out of the same bytes of the sysfs
//!     mapping, 5 repetitions each in ABBA order, target >= 2.0) and
//!     `pci_dma_cpu_per_byte` (the CPU time this process spent in those
//!     MEM_WRITEs / in those memcpys, target <= 0.25), and
//!     `pci_model_staging` (`model_staging` on the function: PLAN_LOAD of
//!     the same 256 MiB model, uploaded and scrubbed by the engine, against
//!     a memcpy of its bytes, 5 repetitions, target >= 0.8).
//!
//! Diagnostics (`#` lines) that locate a cost without being figures: a
//! 1-entry RESOLVE_BATCH (fixed against per-entry cost); a 10,000-variable
//! load with 90,000 variables already staged in the same channel (cost of
//! grid occupancy); PLAN_LOAD ns per variable at 10k, 25k, 50k and 100k
//! variables; 100k / 10k MR_VIRTUAL_TMP_BUF records (staging without HBM
//! allocation); PLAN_UNLOAD 100k / 10k; MEM_READ bandwidth and a userspace
//! `rep movsb` copy (the instruction the kernel's user copies use). All plans
//! go to HBM channel 0.
//!
//! The order is fixed: kernel memory is read before anything materializes
//! simulated device pages, which are slab memory too. Exit status: 0 when
//! every figure passes, 1 when one fails, 2 on a usage error.

mod adversarial;
mod bar;
mod copies;
mod device;
mod dma;
mod mapped;
mod measure;
mod placed;
mod planner;
mod report;
mod sharing;
mod traces;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use nhbm::cli::{DeviceArg, DeviceNode};
use nhbm::uapi::DeviceInfo;
use nhbm::{io_errno_name, Device};
use nhbm_planner::Model;

use device::note;
use report::{error_line, Figure};

/// Benchmarks of neuron_hbm, each figure a ratio of two things measured in
/// the same run.
#[derive(Parser, Debug)]
#[command(name = "nhbm-bench")]
struct Args {
    #[command(flatten)]
    device: DeviceArg,
    /// The device (as -d)
    #[arg(value_name = "DEVICE")]
    device_pos: Option<DeviceNode>,
    /// Where the example models are
    #[arg(long, value_name = "DIR", default_value = "/tests")]
    models: PathBuf,
    /// Skip the device figures
    #[arg(long)]
    no_device: bool,
    /// Skip the planner figures
    #[arg(long)]
    no_planner: bool,
    /// Also compare the exact planner with MiniMalloc, run as PROGRAM
    /// (`--input= --output= --capacity= --timeout=`), on hard instances and
    /// the example models
    #[arg(long, value_name = "PROGRAM")]
    minimalloc: Option<PathBuf>,
    /// Also compare the default planner on compilers' traces with
    /// omnimalloc's best fit and SuperMalloc, whose peaks FILE holds
    /// (JSON, as tools/testing/omnimalloc-peaks.py writes it)
    #[arg(long, value_name = "FILE")]
    omnimalloc: Option<PathBuf>,
    /// Only the PCI figures: this emulated PCI function's node against
    /// DEVICE and against its own BAR4 mapping
    #[arg(long, value_name = "PCI_DEVICE")]
    pci_write: Option<PathBuf>,
    /// Only the DMA figures: this emulated PCI function, the module moving
    /// its bytes with the DMA engine, against its own BAR4 mapping
    #[arg(long, value_name = "PCI_DEVICE", conflicts_with = "pci_write")]
    pci_dma: Option<PathBuf>,
    /// The PCI function's BAR4 resource file in sysfs (default: resource4_wc,
    /// else resource4, of the one function bound to neuron_hbm)
    #[arg(long, value_name = "FILE")]
    bar4: Option<PathBuf>,
}

impl Args {
    /// The device under test: DEVICE, else -d, else /dev/neuron_hbm0.
    fn device(&self) -> PathBuf {
        self.device_pos
            .clone()
            .unwrap_or_else(|| self.device.node())
            .path
    }
}

/// Collects lines and verdicts, printing each line at once.
#[derive(Default)]
struct Out {
    failed: usize,
    total: usize,
}

impl Out {
    fn figure(&mut self, f: &Figure) {
        self.total += 1;
        if !f.pass() {
            self.failed += 1;
        }
        println!("{}", f.line());
        let _ = std::io::stdout().flush();
    }
    fn error(&mut self, names: &[&str], e: &std::io::Error) {
        let msg = match e.raw_os_error() {
            Some(_) => format!("{} {e}", io_errno_name(e)),
            None => e.to_string(),
        };
        for n in names {
            self.total += 1;
            self.failed += 1;
            println!("{}", error_line(n, &msg));
        }
        let _ = std::io::stdout().flush();
    }
}

/// The diagnostic that describes the device at `path` (`i` its
/// DEVICE_INFO) and the clock the figures are timed by.
fn device_line(path: &Path, i: &DeviceInfo) -> String {
    format!(
        "{}: arch v{}, simulated {}, {} channels of {} MiB, min alloc {}; clocksource {}",
        path.display(),
        i.arch,
        i.simulated,
        i.nr_channels,
        i.channel_size[0] >> 20,
        i.min_alloc_size,
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .map_or("unknown".into(), |s| s.trim().to_string())
    )
}

fn device_figures(path: &Path, out: &mut Out) {
    let all = [
        "resolve",
        "library_resolve",
        "staging_scale",
        "kmem_per_var",
        "upload_bandwidth",
        "model_staging",
        "model_staging_vs_mem_write",
        "pointer_chain",
        "crafted_ids",
        "aligned_gaps",
        "shared_weights_hbm",
    ];
    let dev = match Device::open_path(path) {
        Ok(d) => d,
        Err(e) => return out.error(&all, &e.into()),
    };
    match dev.device_info() {
        Ok(i) => note(&device_line(path, &i)),
        Err(e) => return out.error(&all, &e),
    }
    match device::resolve_figures(&dev) {
        Ok(figs) => figs.iter().for_each(|f| out.figure(f)),
        Err(e) => out.error(&all[..2], &e),
    }
    match device::staging_figures(&dev) {
        Ok((s, k)) => {
            out.figure(&s);
            out.figure(&k);
        }
        Err(e) => out.error(&["staging_scale", "kmem_per_var"], &e),
    }
    match device::upload_figure(&dev) {
        Ok(f) => out.figure(&f),
        Err(e) => out.error(&["upload_bandwidth"], &e),
    }
    match mapped::sim_mmap_figure(&dev) {
        Ok(f) => out.figure(&f),
        Err(e) => out.error(&["sim_mmap_upload_vs_memcpy"], &e),
    }
    match device::model_staging_figures(&dev) {
        Ok(figs) => figs.iter().for_each(|f| out.figure(f)),
        Err(e) => out.error(&["model_staging", "model_staging_vs_mem_write"], &e),
    }
    match adversarial::adversarial_figures(&dev) {
        Ok(figs) => figs.iter().for_each(|f| out.figure(f)),
        Err(e) => out.error(&["pointer_chain", "crafted_ids", "aligned_gaps"], &e),
    }
    match sharing::shared_weights_figure(&dev) {
        Ok(f) => out.figure(&f),
        Err(e) => out.error(&["shared_weights_hbm"], &e),
    }
}

fn pci_dma_figures(pci: &Path, bar4: Option<&Path>, out: &mut Out) {
    let names = [
        "pci_model_staging",
        "pci_dma_write_vs_bar_copy",
        "pci_dma_read_vs_bar_copy",
        "pci_dma_cpu_per_byte",
    ];
    let figs = Device::open_path(pci)
        .map_err(std::io::Error::from)
        .and_then(|p| {
            let file = bar4.map_or_else(bar::find_bar4, |f| Ok(f.to_path_buf()))?;
            dma::pci_dma_figures(&p, &file)
        });
    match figs {
        Ok(figs) => figs.iter().for_each(|f| out.figure(f)),
        Err(e) => out.error(&names, &e),
    }
}

fn pci_figures(sim: &Path, pci: &Path, bar4: Option<&Path>, out: &mut Out) {
    let bar_names = [
        "pci_write_vs_bar_copy",
        "pci_read_vs_bar_copy",
        "pci_scrub_vs_memset",
        "pci_mmap_write_vs_bar_copy",
        "pci_mmap_read_vs_bar_copy",
    ];
    let opened = Device::open_path(sim)
        .and_then(|s| Ok((s, Device::open_path(pci)?)))
        .map_err(std::io::Error::from);
    let (s, p) = match opened {
        Ok(d) => d,
        Err(e) => return out.error(&[&["pci_mem_write"][..], &bar_names].concat(), &e),
    };
    match device::pci_write_figure(&s, &p) {
        Ok(f) => out.figure(&f),
        Err(e) => out.error(&["pci_mem_write"], &e),
    }
    let file = bar4.map_or_else(bar::find_bar4, |f| Ok(f.to_path_buf()));
    if let Ok(f) = &file {
        if !f.ends_with("resource4_wc") {
            note(&format!(
                "{}: BAR4 is not prefetchable, so it has no resource4_wc; compared with the \
                 uncached mapping",
                f.display()
            ));
        }
    }
    let figs = file.and_then(|f| {
        let mut figs = device::pci_bar_figures(&p, &f)?;
        figs.extend(mapped::pci_mmap_figures(&p, &f)?);
        Ok(figs)
    });
    match figs {
        Ok(figs) => figs.iter().for_each(|f| out.figure(f)),
        Err(e) => out.error(&bar_names, &e),
    }
}

fn planner_figures(dir: &Path, out: &mut Out) {
    let mut outcomes = example_model_figures(dir, out);
    let generated = generated_model_figures(out);
    outcomes.extend(generated);
    if !outcomes.is_empty() {
        out.figure(&planner::gbs_vs_greedy_figure(&outcomes));
    }
    hard_instance_figures(out);
    planner_time_figures(out);
}

/// The figures of each example model in `dir`, and the outcomes of those
/// that planned.
fn example_model_figures(dir: &Path, out: &mut Out) -> Vec<planner::Outcome> {
    let mut outcomes = Vec::new();
    match planner::model_files(dir) {
        Ok(files) if !files.is_empty() => {
            for f in files {
                let stem = f
                    .file_stem()
                    .map_or("model".into(), |s| s.to_string_lossy());
                let name = format!("planner_{}", report::sanitize(&stem));
                let r = Model::load(&f).map_err(|e| e.to_string()).and_then(|m| {
                    planner::evaluate(&stem, &m, &m.desc.planner_options).map_err(|e| e.to_string())
                });
                match r {
                    Ok(o) => {
                        for fig in planner::model_figures(&o) {
                            out.figure(&fig);
                        }
                        outcomes.push(o);
                    }
                    Err(e) => out.error(&[&name], &device::invalid(e)),
                }
            }
        }
        Ok(_) => note(&format!("no model descriptions in {}", dir.display())),
        Err(e) => note(&format!("{}: {e}", dir.display())),
    }
    outcomes
}

/// The figures of the generated graphs, and the outcomes of those that
/// planned.
fn generated_model_figures(out: &mut Out) -> Vec<planner::Outcome> {
    let mut generated = Vec::new();
    for seed in 0..planner::GENERATED {
        let (name, m) = planner::generated(seed);
        match planner::evaluate(&name, &m, &planner::generated_options()) {
            Ok(o) => generated.push(o),
            Err(e) => out.error(
                &[&format!("planner_{name}")],
                &device::invalid(e.to_string()),
            ),
        }
    }
    if !generated.is_empty() {
        for fig in planner::generated_figures(&generated) {
            out.figure(&fig);
        }
    }
    generated
}

/// The figures of the hard instances, each instance's ratios noted.
fn hard_instance_figures(out: &mut Out) {
    let mut hard = Vec::new();
    for n in planner::HARD_SIZES {
        let (name, m) = planner::hard(n);
        match planner::evaluate(&name, &m, &planner::peer_options()) {
            Ok(o) => {
                note(&format!(
                    "{name}: greedy {:.3} greedy_by_size {:.3} hill_climb {:.3} exact {:.3}",
                    o.ratio(0),
                    o.ratio(1),
                    o.ratio(2),
                    o.ratio(3)
                ));
                hard.push(o);
            }
            Err(e) => out.error(
                &[&format!("planner_{name}")],
                &device::invalid(e.to_string()),
            ),
        }
    }
    if !hard.is_empty() {
        for fig in planner::hard_figures(&hard) {
            out.figure(&fig);
        }
    }
}

/// The planner's timed figures: the decoder stacks, the time limit's
/// overrun and hill_climb on the held-out instances.
fn planner_time_figures(out: &mut Out) {
    match planner::scale_figures() {
        Ok(figs) => figs.iter().for_each(|f| out.figure(f)),
        Err(e) => out.error(
            &["planner_10k_ms", "planner_100k_ms"],
            &device::invalid(e.to_string()),
        ),
    }
    match planner::scale_notes() {
        Ok(lines) => lines.iter().for_each(|l| note(l)),
        Err(e) => note(&format!("decoder stacks: {e}")),
    }
    match planner::overrun_figure() {
        Ok(f) => out.figure(&f),
        Err(e) => out.error(
            &["planner_time_limit_overrun"],
            &device::invalid(e.to_string()),
        ),
    }
    match planner::heldout_figure() {
        Ok((fig, slowest)) => {
            note(&slowest);
            out.figure(&fig);
        }
        Err(e) => out.error(
            &["planner_heldout_hill_climb"],
            &device::invalid(e.to_string()),
        ),
    }
}

/// exact side by side with MiniMalloc (`program`) on the hard instances of
/// [`planner::peer_instances`] and the example models in `dir`.
fn peer_figures(program: &Path, dir: &Path, out: &mut Out) {
    let names = ["planner_vs_minimalloc", "planner_vs_minimalloc_bound"];
    let work = std::env::temp_dir().join(format!("nhbm-bench-minimalloc-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&work) {
        return out.error(&names, &e);
    }
    let peer = planner::Peer {
        program: program.to_path_buf(),
        dir: work.clone(),
        times: None,
    };
    let mut models = planner::peer_instances();
    for f in planner::model_files(dir).unwrap_or_default() {
        let stem = f
            .file_stem()
            .map_or("model".into(), |s| s.to_string_lossy().into_owned());
        match Model::load(&f) {
            Ok(m) => models.push((report::sanitize(&stem), m)),
            Err(e) => note(&format!("{}: {e}", f.display())),
        }
    }
    let mut duels = Vec::new();
    for (name, m) in &models {
        match planner::duel(&peer, name, m) {
            Ok(d) => {
                for x in &d {
                    note(&format!("vs MiniMalloc {}", x.line()));
                }
                duels.extend(d);
            }
            Err(e) => note(&format!("{name}: {e}")),
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    if duels.len() < models.len() {
        let e = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "an instance failed to plan",
        );
        return out.error(&names, &e);
    }
    for fig in planner::peer_figures(&duels) {
        out.figure(&fig);
    }
}

/// `planner_vs_minimalloc_challenging`, beside MiniMalloc (`program`)
/// where there is a build of it.
fn challenging_figure(program: Option<&Path>, out: &mut Out) {
    let names = ["planner_vs_minimalloc_challenging"];
    let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    let set = match planner::challenging() {
        Ok(s) => s,
        Err(e) => return out.error(&names, &invalid(e)),
    };
    let mut duels = None;
    if let Some(program) = program {
        let work =
            std::env::temp_dir().join(format!("nhbm-bench-challenging-{}", std::process::id()));
        if let Err(e) = std::fs::create_dir_all(&work) {
            return out.error(&names, &e);
        }
        let mut all = Vec::new();
        for c in &set {
            let peer = planner::Peer {
                program: program.to_path_buf(),
                dir: work.clone(),
                times: Some(c.times.clone()),
            };
            match planner::duel_with(&peer, &c.name, &c.model, &planner::challenging_options()) {
                Ok(mut d) => {
                    note(&format!("vs MiniMalloc {}", d[0].line()));
                    all.push(d.remove(0));
                }
                Err(e) => return out.error(&names, &invalid(e.to_string())),
            }
        }
        let _ = std::fs::remove_dir_all(&work);
        duels = Some(all);
    }
    match planner::challenging_figure(&set, duels.as_deref()) {
        Ok(f) => out.figure(&f),
        Err(e) => out.error(&names, &invalid(e.to_string())),
    }
}

/// The default planner on compilers' traces, and beside omnimalloc's
/// peaks in `peers` where given.
fn traces_figures(peers: Option<&Path>, out: &mut Out) {
    let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    let peer_names = ["planner_vs_bestfit_traces", "planner_vs_supermalloc_traces"];
    let plans = match traces::plan_traces() {
        Ok(p) => p,
        Err(e) => {
            out.error(&["planner_traces_lb"], &invalid(e.clone()));
            return out.error(&peer_names, &invalid(e));
        }
    };
    out.figure(&traces::bound_figure(&plans));
    let Some(path) = peers else {
        let why = "no omnimalloc peaks (--omnimalloc FILE)";
        return out.error(&peer_names, &invalid(why.into()));
    };
    match traces::read_peers(path) {
        Ok(v) => traces::peer_figures(&plans, &v)
            .iter()
            .for_each(|f| out.figure(f)),
        Err(e) => out.error(&peer_names, &invalid(e)),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let device = args.device();
    let mut out = Out::default();
    let (_, ns) = measure::time_ns(|| {
        if let Some(pci) = &args.pci_write {
            return pci_figures(&device, pci, args.bar4.as_deref(), &mut out);
        }
        if let Some(pci) = &args.pci_dma {
            return pci_dma_figures(pci, args.bar4.as_deref(), &mut out);
        }
        if !args.no_device {
            device_figures(&device, &mut out);
        }
        if !args.no_planner {
            planner_figures(&args.models, &mut out);
            if let Some(program) = &args.minimalloc {
                peer_figures(program, &args.models, &mut out);
            }
            challenging_figure(args.minimalloc.as_deref(), &mut out);
            traces_figures(args.omnimalloc.as_deref(), &mut out);
        }
    });
    note(&format!(
        "{} figures, {} failed, {:.1} s",
        out.total,
        out.failed,
        ns / 1e9
    ));
    if out.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
