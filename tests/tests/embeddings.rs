//! Sentence embeddings of all-MiniLM-L6-v2 (`scripts/fetch-models.sh minilm`, a Hugging
//! Face directory) against sentence-transformers' (PyTorch, float32) and the `tokenizers`
//! package's token ids on 309 sentences of our own (`tests/fixtures/embed/`, made by
//! `scripts/embed/make-reference.py`); the same model written as a GGUF file (llama.cpp's
//! bert keys and tensor names) in F32 and Q8_0; and the errors of bad directories and
//! safetensors files.

use std::path::{Path, PathBuf};

use superinfer_runtime::core::gguf::{GgufFile, GgufWriter, MetaValue};
use superinfer_runtime::core::quant::{self, GgmlType};
use superinfer_runtime::{chain, Engine, EngineOptions};
use superinfer_tests::*;

const DIM: usize = 384;

fn minilm_dir() -> PathBuf {
    let p = models_dir().join("all-minilm-l6-v2");
    assert!(
        p.join("model.safetensors").is_file(),
        "all-MiniLM-L6-v2 not found at {}: run `scripts/fetch-models.sh minilm` first (or set \
         SUPERINFER_MODELS)",
        p.display()
    );
    p
}

fn engine(path: &Path) -> Engine {
    Engine::load(
        path,
        &EngineOptions {
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}", chain(&e)))
}

struct Reference {
    texts: Vec<String>,
    ids: Vec<Vec<u32>>,
    embeddings: Vec<Vec<f32>>,
}

fn reference() -> Reference {
    let dir = fixtures_dir().join("embed");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap())
            .unwrap();
    let bin = std::fs::read(dir.join("reference-f32.bin")).unwrap();
    let floats: Vec<f32> = bin
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let sentences = json["sentences"].as_array().unwrap();
    assert_eq!(floats.len(), sentences.len() * DIM);
    Reference {
        texts: sentences
            .iter()
            .map(|s| s["text"].as_str().unwrap().to_string())
            .collect(),
        ids: sentences.iter().map(|s| ids(&s["ids"])).collect(),
        embeddings: floats.chunks_exact(DIM).map(<[f32]>::to_vec).collect(),
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
    let na: f64 = a.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// Embeds every reference sentence with `e` (from its text, or from the reference's token
/// ids: a GGUF file has no sentence-transformers `max_seq_length`, so it cuts inputs at the
/// trained context as llama.cpp does, not at 256) and checks each cosine against the
/// reference; returns (min, mean).
fn check_cosines(e: &Engine, r: &Reference, floor: f64, what: &str, by_ids: bool) -> (f64, f64) {
    let texts: Vec<&str> = r.texts.iter().map(String::as_str).collect();
    let ids: Vec<&[u32]> = r.ids.iter().map(Vec::as_slice).collect();
    let got = match by_ids {
        true => e.embed_tokens(&ids, None),
        false => e.embed(&texts, None),
    }
    .unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(got.len(), texts.len());
    let cos: Vec<f64> = got
        .iter()
        .zip(&r.embeddings)
        .map(|(g, w)| cosine(g, w))
        .collect();
    let min = cos.iter().copied().fold(f64::INFINITY, f64::min);
    let mean = cos.iter().sum::<f64>() / cos.len() as f64;
    eprintln!(
        "{what}: cosine min {min:.7} mean {mean:.7} over {}",
        cos.len()
    );
    let mut worst: Vec<usize> = (0..cos.len()).collect();
    worst.sort_by(|&a, &b| cos[a].total_cmp(&cos[b]));
    for &i in worst.iter().take(5) {
        eprintln!(
            "  {:.7} {:?} ({} tokens)",
            cos[i],
            r.texts[i],
            r.ids[i].len()
        );
    }
    for (i, c) in cos.iter().enumerate() {
        assert!(
            *c >= floor,
            "{what}: sentence {i} {:?}: cosine {c} < {floor}",
            r.texts[i]
        );
    }
    // the default for this directory is normalised (modules.json lists Normalize)
    for g in &got {
        let n: f64 = g.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
        assert!((n - 1.0).abs() < 1e-5, "{what}: norm {n}");
    }
    (min, mean)
}

/// Token ids identical to the `tokenizers` package's, the F32 load within 0.9999 of
/// sentence-transformers for every sentence, and the order of the texts irrelevant.
#[test]
fn minilm_directory_matches_sentence_transformers() {
    let r = reference();
    let e = engine(&minilm_dir());
    assert_eq!(e.embedding_max_tokens(), 256);
    let mut differ = Vec::new();
    for (i, (t, want)) in r.texts.iter().zip(&r.ids).enumerate() {
        let got = e.embedding_tokens(t).unwrap();
        if &got != want {
            differ.push(format!("{i} {t:?}: ours {got:?}, tokenizers {want:?}"));
        }
    }
    assert!(
        differ.is_empty(),
        "token ids differ:\n{}",
        differ.join("\n")
    );
    check_cosines(&e, &r, 0.9999, "F32 directory", false);

    // a few texts alone and in another order give the same bits (batch invariance)
    let some: Vec<&str> = [5, 77, 300, 1, 200]
        .iter()
        .map(|&i| r.texts[i].as_str())
        .collect();
    let together = e.embed(&some, None).unwrap();
    for (k, t) in some.iter().enumerate() {
        let alone = e.embed(&[t], None).unwrap();
        assert_eq!(alone[0], together[k], "{t:?}");
    }
    // an encoder does not generate
    let err = e
        .session(&Default::default())
        .err()
        .expect("a session of an encoder");
    assert!(chain(&err).contains("encoder"), "{}", chain(&err));
    // --no-normalize: the same direction, not unit length
    let raw = e.embed(&some[..1], Some(false)).unwrap();
    let n: f64 = raw[0]
        .iter()
        .map(|&x| x as f64 * x as f64)
        .sum::<f64>()
        .sqrt();
    assert!((n - 1.0).abs() > 1e-3, "norm {n}");
    assert!(cosine(&raw[0], &together[0]) > 0.999_999);
}

/// The directory written as a GGUF file with llama.cpp's keys and names (what its
/// converter writes for bert), every matrix as `ty` (F32: the same bits as the directory).
fn gguf_copy(ty: GgmlType) -> PathBuf {
    let dst = models_dir()
        .join("derived")
        .join(format!("all-minilm-l6-v2-{ty}.gguf"));
    if dst.is_file() {
        return dst;
    }
    let dir = minilm_dir();
    let hf = std::fs::read(dir.join("model.safetensors")).unwrap();
    let m = superinfer_runtime::hf::HfModel::open(&dir, &hf).unwrap();
    let f = GgufFile::parse_detached(&m.header, &hf[m.data_start..]).unwrap();
    let mut w = GgufWriter::new();
    for (key, value) in f.metadata() {
        w.meta(*key, MetaValue::from_value(value));
    }
    for t in f.tensors() {
        let data = f.tensor_data(t);
        let matrix = t.dims.len() == 2 && t.name.starts_with("blk.");
        if ty == GgmlType::F32 || !matrix {
            w.tensor(t.name, &t.dims, t.ty, data.to_vec()).unwrap();
            continue;
        }
        let mut values = vec![0f32; t.n_elements() as usize];
        quant::dequantize_row(t.ty, data, &mut values).unwrap();
        let mut out = vec![0u8; ty.bytes_for(t.n_elements()).unwrap() as usize];
        let q = quant::quantize_row_ref(ty).unwrap();
        q(&values, &mut out);
        w.tensor(t.name, &t.dims, ty, out).unwrap();
    }
    let out = w.finish().unwrap();
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    let tmp = dst.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, out).unwrap();
    std::fs::rename(&tmp, &dst).unwrap();
    dst
}

/// The same model from GGUF files: F32 gives the directory's bits, Q8_0 stays within 0.999.
#[test]
fn minilm_gguf_f32_and_q8_0() {
    let r = reference();
    let dir = engine(&minilm_dir());
    let f32_file = engine(&gguf_copy(GgmlType::F32));
    assert_eq!(f32_file.arch_name(), "bert");
    let some: Vec<&str> = r.texts.iter().take(40).map(String::as_str).collect();
    assert_eq!(
        f32_file.embed(&some, None).unwrap(),
        dir.embed(&some, None).unwrap()
    );
    assert_eq!(f32_file.embedding_max_tokens(), 512);
    for (t, want) in r.texts.iter().zip(&r.ids).take(100) {
        assert_eq!(&f32_file.embedding_tokens(t).unwrap(), want, "{t:?}");
    }
    // Q8_0 weights and Q8_0-quantized activations (llama.cpp's arithmetic): the 3-5 token
    // inputs ("ok", "?!", ...) land at 0.9977-0.9984, as the same rounding simulated in
    // PyTorch on sentence-transformers' model gives (0.9976-0.9984); the mean is 0.9996
    let q8 = engine(&gguf_copy(GgmlType::Q8_0));
    let (_, mean) = check_cosines(&q8, &r, 0.997, "Q8_0 GGUF", true);
    assert!(mean >= 0.9995, "Q8_0 GGUF: mean cosine {mean}");
    // the directory quantized on load (`embed --type q8_0`) is that file
    let opts = EngineOptions {
        threads: 2,
        ..Default::default()
    };
    let q8_dir = Engine::load_as(&minilm_dir(), &opts, Some(GgmlType::Q8_0)).unwrap();
    let ids: Vec<&[u32]> = r.ids.iter().take(40).map(Vec::as_slice).collect();
    assert_eq!(
        q8_dir.embed_tokens(&ids, None).unwrap(),
        q8.embed_tokens(&ids, None).unwrap()
    );
}

/// A copy of the directory's small files in a fresh temporary directory, with `weights`
/// as its model.safetensors.
fn scratch_dir(name: &str, weights: &[u8]) -> PathBuf {
    let d = std::env::temp_dir().join(format!("superinfer-embed-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("1_Pooling")).unwrap();
    let src = minilm_dir();
    for f in [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "modules.json",
        "1_Pooling/config.json",
    ] {
        std::fs::copy(src.join(f), d.join(f)).unwrap();
    }
    std::fs::write(d.join("model.safetensors"), weights).unwrap();
    d
}

fn safetensors(header: &str, data: usize) -> Vec<u8> {
    let mut b = (header.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(header.as_bytes());
    b.resize(b.len() + data, 0);
    b
}

fn load_err(dir: &Path) -> String {
    match Engine::load(dir, &EngineOptions::default()) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => chain(&e),
    }
}

/// Bad directories and weights files: one clear line naming the file and the field or
/// tensor, never a panic.
#[test]
fn bad_directories_are_refused_clearly() {
    let ok_weights = safetensors(
        r#"{"embeddings.word_embeddings.weight":{"dtype":"F32","shape":[1,4],"data_offsets":[0,16]}}"#,
        16,
    );
    // no config.json
    let d = scratch_dir("noconfig", &ok_weights);
    std::fs::remove_file(d.join("config.json")).unwrap();
    let e = load_err(&d);
    assert!(e.contains("config.json") && e.contains("missing"), "{e}");
    // an architecture we do not read
    let d = scratch_dir("arch", &ok_weights);
    let cfg = std::fs::read_to_string(d.join("config.json")).unwrap();
    std::fs::write(
        d.join("config.json"),
        cfg.replace("\"model_type\": \"bert\"", "\"model_type\": \"mamba\""),
    )
    .unwrap();
    let e = load_err(&d);
    assert!(
        e.contains("config.json") && e.contains("'model_type'") && e.contains("mamba"),
        "{e}"
    );
    // a hyperparameter missing
    let d = scratch_dir("hidden", &ok_weights);
    std::fs::write(
        d.join("config.json"),
        cfg.replace("\"hidden_size\": 384,", ""),
    )
    .unwrap();
    let e = load_err(&d);
    assert!(e.contains("'hidden_size'"), "{e}");
    // safetensors: overlapping and out-of-range offsets, an unknown dtype, a truncated file,
    // a dtype we do not read for a tensor the model uses
    for (name, weights, want) in [
        (
            "overlap",
            safetensors(
                r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}}"#,
                24,
            ),
            "overlaps",
        ),
        (
            "range",
            safetensors(
                r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#,
                8,
            ),
            "outside the data section",
        ),
        (
            "dtype",
            safetensors(
                r#"{"a":{"dtype":"F4","shape":[4],"data_offsets":[0,16]}}"#,
                16,
            ),
            "unknown dtype",
        ),
        ("truncated", ok_weights[..40].to_vec(), "truncated"),
        (
            "i64",
            safetensors(
                r#"{"embeddings.word_embeddings.weight":{"dtype":"I64","shape":[1,2],"data_offsets":[0,16]}}"#,
                16,
            ),
            "I64",
        ),
    ] {
        let d = scratch_dir(name, &weights);
        let e = load_err(&d);
        assert!(
            e.contains("model.safetensors") && e.contains(want),
            "{name}: {e}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
    // a valid file that lacks the model's tensors: core names the missing tensor
    let d = scratch_dir("missing", &ok_weights);
    let e = load_err(&d);
    assert!(
        e.contains("position_embd.weight") || e.contains("tensor"),
        "{e}"
    );
}
