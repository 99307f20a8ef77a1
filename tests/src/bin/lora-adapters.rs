//! `lora-adapters BASE.gguf OUT_DIR [NAME...]`: writes the random LoRA adapters of
//! `superinfer_tests::lora::SPECS` (all, or those named) for the base model as
//! OUT_DIR/NAME.gguf and prints each file's sha256 (scripts/lora/make-fixtures.sh records
//! them beside the fixtures; the test regenerates the same bytes).

use superinfer_runtime::core::gguf::GgufFile;
use superinfer_tests::lora::{adapter, SPECS};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: {} BASE.gguf OUT_DIR [NAME...]", args[0]);
        std::process::exit(2);
    }
    let base = std::fs::read(&args[1]).unwrap_or_else(|e| {
        eprintln!("cannot read {}: {e}", args[1]);
        std::process::exit(1)
    });
    let f = GgufFile::parse(&base).unwrap_or_else(|e| {
        eprintln!("{}: {e}", args[1]);
        std::process::exit(1)
    });
    let dir = std::path::Path::new(&args[2]);
    std::fs::create_dir_all(dir).expect("the output folder");
    for spec in SPECS {
        if args.len() > 3 && !args[3..].iter().any(|n| n == spec.name) {
            continue;
        }
        let bytes = adapter(&f, &spec);
        let path = dir.join(format!("{}.gguf", spec.name));
        std::fs::write(&path, &bytes).expect("the adapter file");
        println!("{} {}", superinfer_tests::sha256::hex(&bytes), spec.name);
    }
}
