//! Writes the generated ONNX models (see `nhbm_onnx::gen`) into a directory:
//! `small_cnn_onnx.onnx` and `transformer_block_onnx.onnx`.

use std::path::PathBuf;
use std::process::ExitCode;

use prost::Message;

fn main() -> ExitCode {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    let models = [
        ("small_cnn_onnx", nhbm_onnx::gen::small_cnn(Some(1))),
        (
            "transformer_block_onnx",
            nhbm_onnx::gen::transformer_block(),
        ),
    ];
    for (name, proto) in models {
        let path = dir.join(format!("{name}.onnx"));
        if let Err(e) = std::fs::write(&path, proto.encode_to_vec()) {
            eprintln!("nhbm-onnx-gen: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
