//! nhbm-unplug-test: simulated surprise removal of /dev/neuron_hbm1 (suite
//! `nhbm_unplug`). Irreversible until the module is reloaded.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(nhbm_stress::unplug::main_with(&args));
}
