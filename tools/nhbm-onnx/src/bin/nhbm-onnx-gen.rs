//! Writes the generated ONNX models (see `nhbm_onnx::gen`) into a directory:
//! `small_cnn_onnx.onnx` and `transformer_block_onnx.onnx`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use prost::Message;

/// Write the generated ONNX models (a small CNN, a transformer block).
#[derive(Parser, Debug)]
#[command(name = "nhbm-onnx-gen")]
struct Cli {
    /// The directory to write them into
    #[arg(default_value = ".")]
    dir: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let models = [
        ("small_cnn_onnx", nhbm_onnx::gen::small_cnn(Some(1))),
        (
            "transformer_block_onnx",
            nhbm_onnx::gen::transformer_block(),
        ),
    ];
    for (name, proto) in models {
        let path = cli.dir.join(format!("{name}.onnx"));
        std::fs::write(&path, proto.encode_to_vec())
            .with_context(|| format!("{}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
