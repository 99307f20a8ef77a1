//! Models split with gguf-split (shards written by core's splitter, byte for byte what
//! llama-gguf-split and `superinfer gguf-split` write): loaded from the first shard, the
//! others found beside it by name, they give the unsplit model's logits and greedy tokens
//! bit for bit, repacked or not; incomplete or inconsistent shard sets are clear errors,
//! never panics.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use superinfer_runtime::core::generate::Model;
use superinfer_runtime::core::gguf::{
    shard_file_name, write_planned, write_shards, GgufFile, SplitBy,
};
use superinfer_runtime::core::kernels::Kernels;
use superinfer_runtime::core::sampler::Sampler;
use superinfer_runtime::{Engine, EngineOptions, SessionOptions};
use superinfer_tests::synth::{self, Spec};

fn dir_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("superinfer-split-{}-{tag}", std::process::id()))
}

/// A fresh directory for one test's shards.
fn dir(tag: &str) -> PathBuf {
    let d = dir_path(tag);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes `shards` as `dir/model-0000k-of-0000n.gguf`; returns their paths.
fn write(dir: &Path, shards: &[Vec<u8>]) -> Vec<PathBuf> {
    let n = shards.len() as u16;
    shards
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let p = dir.join(shard_file_name("model", i as u16, n));
            std::fs::write(&p, b).unwrap();
            p
        })
        .collect()
}

fn split(bytes: &[u8], by: SplitBy) -> Vec<Vec<u8>> {
    write_shards(&GgufFile::parse(bytes).unwrap(), by).unwrap()
}

/// Every position's logits (as bits) over a fixed prompt, then 16 greedy tokens.
fn outputs(path: &Path, opts: &EngineOptions) -> (Vec<Vec<u32>>, Vec<u32>) {
    let e = Engine::load(path, opts).unwrap();
    let prompt: Vec<u32> = (0..14u32).map(|i| (i * 37 + 5) % 262).collect();
    let mut s = e.session(&SessionOptions::with_ctx(64)).unwrap();
    let mut logits = Vec::new();
    s.feed_each(&prompt, |_, l| {
        logits.push(l.iter().map(|x| x.to_bits()).collect())
    })
    .unwrap();
    s.reset();
    let mut tokens = Vec::new();
    s.generate(&prompt[..5], 16, &mut Sampler::greedy(), |t| {
        tokens.push(t.id);
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(tokens.len(), 16);
    (logits, tokens)
}

fn error(path: &Path) -> String {
    match Engine::load(path, &EngineOptions::default()) {
        Ok(_) => panic!("{} loaded", path.display()),
        Err(e) => superinfer_runtime::chain(&e),
    }
}

#[test]
fn split_models_decode_bit_identically() {
    for (spec, tag) in [(Spec::llama(), "llama"), (Spec::gemma3(), "gemma3")] {
        let whole = synth::write_temp(&spec, &format!("split-{tag}"));
        let bytes = std::fs::read(&whole).unwrap();
        for (by, name) in [
            (SplitBy::Tensors(1), "one-tensor-each"),
            (SplitBy::Tensors(5), "five-tensors"),
            (SplitBy::Bytes(20_000), "bytes"),
        ] {
            let d = dir(&format!("{tag}-{name}"));
            let shards = split(&bytes, by);
            assert!(shards.len() > 2, "{tag} {name}: {} shards", shards.len());
            let paths = write(&d, &shards);
            for no_repack in [false, true] {
                let opts = EngineOptions {
                    threads: 2,
                    no_repack,
                    ..Default::default()
                };
                let want = outputs(&whole, &opts);
                let got = outputs(&paths[0], &opts);
                assert!(
                    got == want,
                    "{tag} {name} (no_repack {no_repack}): the split model differs"
                );
            }
            let e = Engine::load(&paths[0], &EngineOptions::default()).unwrap();
            assert_eq!(e.files().collect::<Vec<_>>(), paths);
            assert_eq!(
                e.file_size(),
                shards.iter().map(Vec::len).sum::<usize>(),
                "file_size is every shard's"
            );
            let _ = std::fs::remove_dir_all(&d);
        }
        // a first shard of metadata only (llama-gguf-split --no-tensor-first-split)
        let f = GgufFile::parse(&bytes).unwrap();
        let n = f.tensors().len();
        let d = dir(&format!("{tag}-no-tensor-first"));
        let paths = write(&d, &write_planned(&f, &[0..0, 0..n / 2, n / 2..n]).unwrap());
        let opts = EngineOptions {
            threads: 2,
            ..Default::default()
        };
        assert!(outputs(&paths[0], &opts) == outputs(&whole, &opts));
        let _ = std::fs::remove_dir_all(&d);
    }
}

#[test]
fn a_core_model_over_joined_shards_equals_the_whole_file() {
    let bytes = synth::build(&Spec::qwen2());
    let shards = split(&bytes, SplitBy::Tensors(4));
    let files: Vec<GgufFile<'_>> = shards.iter().map(|s| GgufFile::parse(s).unwrap()).collect();
    let joined = GgufFile::from_shards(files).unwrap();
    let whole = GgufFile::parse(&bytes).unwrap();
    for t in whole.tensors() {
        assert_eq!(
            joined.tensor_data(joined.tensor(t.name).unwrap()),
            whole.tensor_data(t)
        );
    }
    let m = Model::from_file(&joined, Kernels::scalar()).unwrap();
    assert_eq!(m.config().n_layer, Spec::qwen2().n_layer);
    // one shard alone: the error names what is missing, not a tensor
    let e = Model::from_gguf(&shards[0], Kernels::scalar())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("the others are needed too"), "{e}");
}

#[test]
fn incomplete_or_inconsistent_shard_sets_are_clear_errors() {
    let whole = synth::write_temp(&Spec::llama(), "split-errors");
    let bytes = std::fs::read(&whole).unwrap();
    let f = GgufFile::parse(&bytes).unwrap();
    let n = f.tensors().len();
    let third = n.div_ceil(3);
    let three = split(&bytes, SplitBy::Tensors(third));
    assert_eq!(three.len(), 3);

    // a missing shard is named
    let d = dir("missing");
    let paths = write(&d, &three);
    std::fs::remove_file(&paths[2]).unwrap();
    let e = error(&paths[0]);
    assert!(
        e.contains("missing") && e.contains(&paths[2].display().to_string()),
        "{e}"
    );
    std::fs::remove_file(&paths[1]).unwrap();
    let e = error(&paths[0]);
    assert!(
        e.contains("these are missing") && e.contains("model-00002-of-00003.gguf"),
        "{e}"
    );

    // a later shard given first names the first
    let d = dir("later");
    let paths = write(&d, &three);
    let e = error(&paths[1]);
    assert!(
        e.contains("is shard 2 of 3")
            && e.contains("load the first shard")
            && e.contains(&paths[0].display().to_string()),
        "{e}"
    );
    // a first shard whose name is not a shard's: the others cannot be found
    let renamed = d.join("model.gguf");
    std::fs::copy(&paths[0], &renamed).unwrap();
    let e = error(&renamed);
    assert!(e.contains("does not end in -00001-of-00003.gguf"), "{e}");

    // a shard of another split of the model in its place: split.count disagrees
    let d = dir("count");
    let paths = write(&d, &three);
    let two = split(&bytes, SplitBy::Tensors(n.div_ceil(2)));
    std::fs::write(&paths[1], &two[1]).unwrap();
    let e = error(&paths[0]);
    assert!(
        e.contains("3 files given, but file 2 says the model is split into 2"),
        "{e}"
    );

    // shards out of order (the files' names swapped)
    let d = dir("order");
    let paths = write(&d, &three);
    std::fs::write(&paths[1], &three[2]).unwrap();
    std::fs::write(&paths[2], &three[1]).unwrap();
    let e = error(&paths[0]);
    assert!(e.contains("file 2 of the 3 given is shard 3 of 3"), "{e}");

    // the same tensor in two shards, and a tensor in none
    let d = dir("duplicate");
    let paths = write(&d, &write_planned(&f, &[0..6, 5..10, 10..n]).unwrap());
    let e = error(&paths[0]);
    let dup = f.tensors()[5].name;
    assert!(
        e.contains(&format!(
            "tensor '{dup}' is in shard 1 and again in shard 2"
        )),
        "{e}"
    );
    let d = dir("short");
    let paths = write(&d, &write_planned(&f, &[0..6, 6..10, 11..n]).unwrap());
    let e = error(&paths[0]);
    assert!(
        e.contains(&format!(
            "hold {} tensors, but split.tensors.count says {n}",
            n - 1
        )),
        "{e}"
    );

    // a truncated shard: its own path and the usual GGUF error
    let d = dir("truncated");
    let paths = write(&d, &three);
    std::fs::write(&paths[2], &three[2][..three[2].len() / 2]).unwrap();
    let e = error(&paths[0]);
    assert!(
        e.starts_with(&paths[2].display().to_string()) && e.contains("GGUF"),
        "{e}"
    );
    for t in [
        "missing",
        "later",
        "count",
        "order",
        "duplicate",
        "short",
        "truncated",
    ] {
        let _ = std::fs::remove_dir_all(dir_path(t));
    }
}
