//! nhbm-stress-test: concurrency, fault injection and isolation (suite
//! `nhbm_stress`).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(nhbm_stress::stress::main_with(&args));
}
