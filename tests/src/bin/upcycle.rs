//! `upcycle DENSE.gguf OUT.gguf`: writes the upcycled mixture-of-experts copy of a dense
//! Qwen2 model (`superinfer_tests::upcycle`), the file the MoE fixture was made from
//! (scripts/moe/make-fixtures.sh upcycled).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: {} DENSE.gguf OUT.gguf", args[0]);
        std::process::exit(2);
    }
    let dense = std::fs::read(&args[1]).unwrap_or_else(|e| {
        eprintln!("cannot read {}: {e}", args[1]);
        std::process::exit(1)
    });
    match superinfer_tests::upcycle::upcycle(&dense) {
        Ok(out) => {
            superinfer_tests::upcycle::write_atomic(std::path::Path::new(&args[2]), &out);
            println!("{}: {} bytes", args[2], out.len());
        }
        Err(e) => {
            eprintln!("upcycling {}: {e}", args[1]);
            std::process::exit(1);
        }
    }
}
