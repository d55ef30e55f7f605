//! nhbm-monitor-test: `nhbm ls`, `monitor` and `top` while two tenants hold
//! plans, as KTAP (suite `nhbm_monitor`; see `nhbm_guest_tests::monitor`).

fn main() {
    std::process::exit(nhbm_guest_tests::monitor::main());
}
