//! nhbm-uapi-test: exercises every neuron_hbm ioctl through the real device
//! nodes and prints the results as KTAP (suite `nhbm_uapi`).
//!
//!   nhbm-uapi-test [-d N] [--list] [NAME_SUBSTRING...]
//!
//! Runs as root in the test guest with the module loaded as
//! `sim_devices=2 sim_arch=v2`; `-d N` picks /dev/neuron_hbmN (default 0; the
//! cross-device case uses N + 1). Exit status 0 when every case passed.

mod cases;
mod fixtures;
mod killed;
mod library_resolve;
mod limits;
mod planner;
mod reject;
mod uffd;

use std::io;

use clap::Parser;
use nhbm::cli::DeviceArg;
use nhbm_testkit::ktap::{self, Case};

/// Runs `cases` as the subtest `suite`, printing KTAP on stdout. Returns
/// whether all of them passed or were skipped.
fn run(suite: &str, cases: &[Case]) -> bool {
    ktap::run_counted(&mut io::stdout().lock(), suite, "cases", cases)
}

fn all_cases() -> Vec<Case> {
    let mut v = vec![
        Case::plain(
            "device_info_reports_v2_geometry",
            cases::device_info_reports_v2_geometry,
        ),
        Case::plain("device_node_is_mode_0660", cases::device_node_is_mode_0660),
        Case::plain(
            "second_device_reports_the_same_geometry",
            cases::second_device_reports_the_same_geometry,
        ),
        Case::plain(
            "mem_stats_matches_device_geometry",
            cases::mem_stats_matches_device_geometry,
        ),
        Case::plain(
            "every_kind_loads_and_resolves",
            cases::every_kind_loads_and_resolves,
        ),
        Case::plain(
            "planned_bytes_are_allocated_bytes",
            planner::planned_bytes_are_allocated_bytes,
        ),
        Case::plain(
            "list_tables_hold_listed_addresses",
            cases::list_tables_hold_listed_addresses,
        ),
        Case::plain(
            "plan_load_without_addrs_array",
            cases::plan_load_without_addrs_array,
        ),
        Case::plain(
            "plans_land_on_the_requested_channel",
            cases::plans_land_on_the_requested_channel,
        ),
        Case::plain(
            "channel_any_picks_the_emptiest_channel",
            cases::channel_any_picks_the_emptiest_channel,
        ),
        Case::plain(
            "payload_is_uploaded_at_load",
            cases::payload_is_uploaded_at_load,
        ),
        Case::plain(
            "mem_write_read_round_trip_with_offsets",
            cases::mem_write_read_round_trip_with_offsets,
        ),
        Case::plain(
            "mem_xfer_bounds_are_checked",
            cases::mem_xfer_bounds_are_checked,
        ),
        Case::plain(
            "mem_xfer_bad_buffer_is_efault",
            cases::mem_xfer_bad_buffer_is_efault,
        ),
        Case::plain(
            "resolve_bounds_are_checked",
            cases::resolve_bounds_are_checked,
        ),
        Case::plain(
            "unknown_plan_or_var_is_enoent",
            cases::unknown_plan_or_var_is_enoent,
        ),
        Case::plain(
            "second_file_cannot_see_the_first_files_plans",
            cases::second_file_cannot_see_the_first_files_plans,
        ),
        Case::plain(
            "closing_a_file_frees_its_plans",
            cases::closing_a_file_frees_its_plans,
        ),
        Case::plain(
            "unload_frees_and_then_resolve_is_enoent",
            cases::unload_frees_and_then_resolve_is_enoent,
        ),
        Case::plain(
            "plan_unload_rejects_reserved_bits",
            cases::plan_unload_rejects_reserved_bits,
        ),
        Case::plain(
            "mem_stats_accounts_loaded_plans",
            cases::mem_stats_accounts_loaded_plans,
        ),
        Case::plain(
            "remote_reference_pins_its_plan",
            cases::remote_reference_pins_its_plan,
        ),
        Case::plain(
            "remote_to_missing_plan_or_var_is_enoent",
            cases::remote_to_missing_plan_or_var_is_enoent,
        ),
        Case::plain(
            "library_resolve_matches_kernel",
            library_resolve::library_resolve_matches_kernel,
        ),
        Case::plain(
            "resolve_batch_answers_each_query_in_place",
            cases::resolve_batch_answers_each_query_in_place,
        ),
        Case::plain(
            "reset_device_succeeds_on_the_simulated_device",
            cases::reset_device_succeeds_on_the_simulated_device,
        ),
        Case::plain("unknown_ioctl_is_enotty", cases::unknown_ioctl_is_enotty),
        Case::plain(
            "fresh_allocation_reads_zeros",
            cases::fresh_allocation_reads_zeros,
        ),
    ];
    v.extend(reject::cases());
    v.extend([
        Case::plain(
            "remote_target_outlives_a_stalled_transfer",
            limits::remote_target_outlives_a_stalled_transfer,
        ),
        Case::plain(
            "stalled_user_copy_does_not_block_others",
            limits::stalled_user_copy_does_not_block_others,
        ),
        Case::plain(
            "plan_bookkeeping_is_charged_to_the_memory_cgroup",
            limits::plan_bookkeeping_is_charged_to_the_memory_cgroup,
        ),
        Case::plain(
            "dmem_max_caps_hbm_per_cgroup",
            limits::dmem_max_caps_hbm_per_cgroup,
        ),
        Case::plain(
            "retired_scratchpad_survives_atomic_allocation_failure",
            limits::retired_scratchpad_survives_atomic_allocation_failure,
        ),
        Case::plain(
            "live_plans_are_limited_per_file_and_device",
            limits::live_plans_are_limited_per_file_and_device,
        ),
        Case::plain(
            "killed_plan_load_stops_and_leaves_nothing",
            killed::killed_plan_load_stops_and_leaves_nothing,
        ),
        Case::plain(
            "killed_mem_read_stops_and_the_plan_stays",
            killed::killed_mem_read_stops_and_the_plan_stays,
        ),
    ]);
    v.push(Case::plain(
        "twelve_gib_buffer_stages_on_sparse_hbm",
        cases::twelve_gib_buffer_stages_on_sparse_hbm,
    ));
    v
}

/// The UAPI tests of neuron_hbm, as KTAP (suite nhbm_uapi).
#[derive(Parser)]
#[command(name = "nhbm-uapi-test")]
struct Cli {
    #[command(flatten)]
    device: DeviceArg,
    /// Print the names of the cases instead of running them
    #[arg(long)]
    list: bool,
    /// Run only the cases whose name contains one of these
    #[arg(value_name = "NAME_SUBSTRING")]
    filters: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    fixtures::set_device_index(cli.device.index()?);
    let mut cases = all_cases();
    if !cli.filters.is_empty() {
        cases.retain(|c| cli.filters.iter().any(|f| c.name.contains(f.as_str())));
    }
    if cli.list {
        for c in &cases {
            println!("{}", c.name);
        }
        return Ok(());
    }
    // Without a device node there is nothing to exercise: one failing case
    // that says why, rather than the same failure for every case.
    let path = nhbm::device_path(fixtures::device_index());
    if let Err(e) = nhbm::Device::open_path(&path) {
        let msg = format!(
            "cannot open device {}: {} ({e})",
            path.display(),
            nhbm::io_errno_name(&e)
        );
        let fail = Case::plain("open_device_node", move || ktap::fail(msg.clone()));
        run("nhbm_uapi", &[fail]);
        std::process::exit(1);
    }
    let ok = run("nhbm_uapi", &cases);
    std::process::exit(if ok { 0 } else { 1 });
}
