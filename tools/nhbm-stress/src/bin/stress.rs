//! nhbm-stress-test: concurrency, fault injection and isolation (suite
//! `nhbm_stress`).

fn main() {
    std::process::exit(nhbm_stress::stress::main());
}
