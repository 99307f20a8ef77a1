//! The load path of the package, natively: a model streamed into the model buffer part by
//! part, probed as it arrives (as `js/src/worker.js` does), then loaded. The shards of a
//! split model give the whole file's greedy tokens, byte ranges keep working, and shard sets
//! that are incomplete, out of order or mixed are refused with `invalid_argument` from the
//! header of the part that shows it.

use serde_json::{json, Value};
use superinfer_core::generate::ContextOptions;
use superinfer_core::gguf::{write_planned, write_shards, GgufFile, SplitBy};
use superinfer_core::parallel::Sequential;
use superinfer_tests::synth::{self, Spec};
use superinfer_wasm::abi::kernels;
use superinfer_wasm::buffer::ModelBuffer;
use superinfer_wasm::engine::Engine;
use superinfer_wasm::errors::Failure;
use superinfer_wasm::probe;

static SEQ: Sequential = Sequential;

/// How far the stream got before a refusal: the bytes written and whether the header was
/// accepted.
#[derive(Debug)]
struct Refused {
    failure: Failure,
    loaded: usize,
}

/// Streams `parts` in chunks of `chunk` bytes as the worker does, probing every 4 KiB and at
/// each part's end; then loads.
fn stream(parts: &[Vec<u8>], chunk: usize) -> Result<(Engine, Value), Refused> {
    let opts = ContextOptions {
        n_ctx: 64,
        ..Default::default()
    };
    let sizes: Vec<usize> = parts.iter().map(Vec::len).collect();
    let mut loaded = 0;
    let fail = |failure, loaded| Refused { failure, loaded };
    let mut buf = ModelBuffer::with_parts(&sizes).map_err(|f| fail(f, 0))?;
    let mut header = None;
    for (i, part) in parts.iter().enumerate() {
        let at = buf.place(i).map_err(|f| fail(f, loaded))?;
        for (k, c) in part.chunks(chunk).enumerate() {
            // SAFETY: `place` keeps every part inside the buffer; nothing borrows it now.
            unsafe {
                core::ptr::copy_nonoverlapping(c.as_ptr(), buf.ptr().add(at + k * chunk), c.len())
            };
            loaded += c.len();
            if header.is_none() && loaded % 4096 < chunk {
                header = probe::probe(&mut buf, loaded, &kernels(), &opts)
                    .map_err(|f| fail(f, loaded))?;
            }
        }
        if header.is_none() {
            header =
                probe::probe(&mut buf, loaded, &kernels(), &opts).map_err(|f| fail(f, loaded))?;
        }
    }
    let header = header.expect("the header is checked by the end");
    let e = Engine::load(buf, kernels(), &SEQ, &opts).map_err(|f| fail(f, loaded))?;
    Ok((e, header))
}

fn greedy(e: &mut Engine) -> Vec<u64> {
    e.begin(&json!({"prompt": [2, 40, 41, 42, 43], "max_tokens": 12, "temperature": 0}))
        .unwrap();
    while e.prefill(64).unwrap() > 0 {}
    let mut ids = Vec::new();
    loop {
        let t = e.next_token().unwrap();
        if let Some(id) = t["id"].as_u64() {
            ids.push(id);
        }
        if !t["finish"].is_null() {
            return ids;
        }
    }
}

fn shards(bytes: &[u8], k: usize) -> Vec<Vec<u8>> {
    write_shards(&GgufFile::parse(bytes).unwrap(), SplitBy::Tensors(k)).unwrap()
}

fn refused(parts: &[Vec<u8>]) -> Refused {
    match stream(parts, 1000) {
        Ok(_) => panic!("loaded"),
        Err(r) => r,
    }
}

#[test]
fn shards_and_byte_ranges_load_as_the_whole_file() {
    let bytes = synth::build(&Spec::gemma3());
    let (mut whole, h) = stream(std::slice::from_ref(&bytes), 1000).unwrap();
    assert_eq!(h["shards"], 1);
    let want = greedy(&mut whole);
    assert_eq!(want.len(), 12);
    assert_eq!(whole.info()["shards"], 1);

    for k in [1, 4, 9] {
        let parts = shards(&bytes, k);
        let n = parts.len();
        // odd chunk sizes: part ends and shard offsets fall anywhere
        let (mut e, h) = stream(&parts, 777).unwrap();
        assert_eq!(h["shards"], n);
        assert_eq!(e.info()["shards"], n);
        assert_eq!(
            e.info()["file_size"],
            parts.iter().map(Vec::len).sum::<usize>()
        );
        assert_eq!(greedy(&mut e), want, "{n} shards");
    }
    // a first shard of metadata only (llama-gguf-split --no-tensor-first-split)
    let f = GgufFile::parse(&bytes).unwrap();
    let n = f.tensors().len();
    let parts = write_planned(&f, &[0..0, 0..n / 2, n / 2..n]).unwrap();
    let (mut e, _) = stream(&parts, 4096).unwrap();
    assert_eq!(greedy(&mut e), want, "no tensor in the first shard");
    // one file cut into byte ranges, at cuts that are no shard's
    for cuts in [vec![100], vec![7, 5000, 5001], vec![bytes.len() / 2]] {
        let mut parts = Vec::new();
        let mut at = 0;
        for c in cuts.iter().chain([&bytes.len()]) {
            parts.push(bytes[at..*c].to_vec());
            at = *c;
        }
        let (mut e, _) = stream(&parts, 333).unwrap();
        assert_eq!(e.info()["shards"], 1);
        assert_eq!(greedy(&mut e), want, "byte ranges at {cuts:?}");
    }
}

#[test]
fn broken_shard_sets_are_refused_from_the_header_that_shows_it() {
    let bytes = synth::build(&Spec::llama());
    let n_tensors = GgufFile::parse(&bytes).unwrap().tensors().len();
    let three = shards(&bytes, n_tensors.div_ceil(3));
    assert_eq!(three.len(), 3);
    let two = shards(&bytes, n_tensors.div_ceil(2));
    let code = |r: &Refused| r.failure.code;

    // the first shard alone, or two of three: from the first shard's header
    for given in [&three[..1], &three[..2]] {
        let r = refused(given);
        assert_eq!(code(&r), "invalid_argument", "{}", r.failure.message);
        assert!(
            r.failure.message.contains("split into 3 shards"),
            "{}",
            r.failure.message
        );
        assert!(r.loaded <= three[0].len(), "refused at {} bytes", r.loaded);
    }
    // the second shard first
    let r = refused(&[three[1].clone(), three[0].clone(), three[2].clone()]);
    assert_eq!(code(&r), "invalid_argument");
    assert!(
        r.failure.message.contains("the first part is shard 2 of 3"),
        "{}",
        r.failure.message
    );
    assert!(r.loaded <= three[1].len());
    // out of order after the first: from the second part's header, before the third part
    let r = refused(&[three[0].clone(), three[2].clone(), three[1].clone()]);
    assert!(
        r.failure.message.contains("part 2 is shard 3 of 3"),
        "{}",
        r.failure.message
    );
    assert!(r.loaded < three[0].len() + three[2].len());
    // a shard of another split of the model
    let r = refused(&[three[0].clone(), two[1].clone(), three[2].clone()]);
    assert!(
        r.failure
            .message
            .contains("part 2 is a shard of a model split into 2"),
        "{}",
        r.failure.message
    );
    // a whole file among shards, and shards after a whole file
    let r = refused(&[three[0].clone(), bytes.clone(), three[2].clone()]);
    assert!(
        r.failure
            .message
            .contains("part 2 is a GGUF file but not a shard"),
        "{}",
        r.failure.message
    );
    let r = refused(&[bytes.clone(), three[1].clone()]);
    assert_eq!(code(&r), "invalid_argument");
    assert!(
        r.failure
            .message
            .contains("part 2 is a GGUF file of its own"),
        "{}",
        r.failure.message
    );
    // a later part that is not GGUF at all
    let r = refused(&[three[0].clone(), vec![7u8; 5000], three[2].clone()]);
    assert_eq!(code(&r), "not_gguf");
    assert!(
        r.failure.message.starts_with("part 2: "),
        "{}",
        r.failure.message
    );
    // a truncated last shard
    let mut cut = three.clone();
    let short = cut[2].len() - 10;
    cut[2].truncate(short);
    let r = refused(&cut);
    assert_eq!(code(&r), "truncated", "{}", r.failure.message);
}
