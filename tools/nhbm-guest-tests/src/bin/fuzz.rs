//! nhbm-fuzz-test: the seeded ioctl fuzzer (suite `nhbm_fuzz`).

fn main() {
    std::process::exit(nhbm_guest_tests::fuzz::main());
}
