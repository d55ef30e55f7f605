//! nhbm-unplug-test: simulated surprise removal of /dev/neuron_hbm1 (suite
//! `nhbm_unplug`). Irreversible until the module is reloaded.

fn main() {
    std::process::exit(nhbm_guest_tests::unplug::main());
}
