#!/usr/bin/env python3
"""Reference embeddings and token ids for tests/tests/embeddings.rs, computed outside the
project: sentence-transformers with PyTorch (CPU, float32) on the all-MiniLM-L6-v2 directory
that `scripts/fetch-models.sh minilm` unpacks, and the Hugging Face `tokenizers` package's
ids for the same sentences (tokenizer.json with its padding off and truncation at
sentence-transformers' max_seq_length, 256, as sentence-transformers encodes).

Set up once (PyPI only):
    python3 -m venv ~/.cache/superinfer/venv-embed
    ~/.cache/superinfer/venv-embed/bin/pip install torch sentence-transformers tokenizers numpy
Then:
    ~/.cache/superinfer/venv-embed/bin/python scripts/embed/make-reference.py

Writes tests/fixtures/embed/reference.json (versions, the model's sha256, per sentence its
token ids) and tests/fixtures/embed/reference-f32.bin (the normalised embeddings, float32
little-endian, sentence after sentence, 384 values each).
"""
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np
import sentence_transformers
import tokenizers
import torch
from sentence_transformers import SentenceTransformer

ROOT = Path(__file__).resolve().parents[2]
MODEL = Path(os.environ.get("SUPERINFER_MODELS", Path.home() / ".cache/superinfer/models")) / "all-minilm-l6-v2"
OUT = ROOT / "tests/fixtures/embed"


def main():
    sentences = (OUT / "sentences.txt").read_text(encoding="utf-8").split("\n")
    sentences = [s for s in sentences if s]
    torch.manual_seed(0)
    model = SentenceTransformer(str(MODEL), device="cpu")
    assert model.max_seq_length == 256, model.max_seq_length
    emb = model.encode(sentences, batch_size=32, convert_to_numpy=True, normalize_embeddings=False)
    emb = emb.astype("<f4")
    # the pipeline ends in Normalize (modules.json): check it did
    norms = np.linalg.norm(emb, axis=1)
    assert np.all(np.abs(norms - 1) < 1e-5), norms

    tok = tokenizers.Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=model.max_seq_length)
    ids = [e.ids for e in tok.encode_batch(sentences, add_special_tokens=True)]
    # the same ids sentence-transformers fed the model
    st_ids = model.tokenize(sentences)["input_ids"].tolist()
    for a, b in zip(ids, st_ids):
        assert b[: len(a)] == a and all(x == 0 for x in b[len(a):]), (a, b)

    sha = hashlib.sha256((MODEL / "model.safetensors").read_bytes()).hexdigest()
    meta = {
        "made_by": "scripts/embed/make-reference.py",
        "model": "all-MiniLM-L6-v2 (scripts/fetch-models.sh minilm)",
        "model_safetensors_sha256": sha,
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "numpy": np.__version__,
        },
        "dim": int(emb.shape[1]),
        "max_seq_length": model.max_seq_length,
        "embeddings": "reference-f32.bin: float32 little-endian, sentence after sentence",
        "sentences": [{"text": s, "ids": i} for s, i in zip(sentences, ids)],
    }
    (OUT / "reference.json").write_text(json.dumps(meta, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    (OUT / "reference-f32.bin").write_bytes(emb.tobytes())
    print(f"{len(sentences)} sentences, dim {emb.shape[1]}, longest {max(map(len, ids))} tokens")


if __name__ == "__main__":
    main()
