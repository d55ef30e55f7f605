//! nhbm-fuzz-test: the seeded ioctl fuzzer (suite `nhbm_fuzz`).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(nhbm_stress::fuzz::main_with(&args));
}
