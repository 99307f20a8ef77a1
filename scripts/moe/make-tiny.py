#!/usr/bin/env python3
"""Tiny random mixture-of-experts models, one per architecture, for the agreement fixtures.

Writes, for each model, an all-F32 GGUF (`<name>-f32.gguf`) and the prompts of its fixture
(`<name>-prompts.json`, random token ids) into OUT_DIR. `scripts/moe/make-fixtures.sh`
quantizes each file with the pinned `llama-quantize` and runs llama.cpp on it
(`scripts/moe/llama-fixtures.cpp`).

Deterministic: the same numpy Generator (PCG64, fixed seeds, `random()` only) gives the same
files. Needs gguf-py from the pinned llama.cpp sources and numpy:

    PYTHONPATH=<llama.cpp>/gguf-py python3 scripts/moe/make-tiny.py OUT_DIR

Scales: every matrix is uniform with standard deviation about 1/sqrt(fan-in) (so each
product keeps unit-sized activations), norms 1 +- 0.2, the output matrix 2.5x larger so the
next-token distribution is peaked (most positions are decisive, not near-ties), routers 5x
(gpt-oss: 6x) larger so that the top-k choice is rarely a near-tie: where it is, rounding
decides which expert runs and the result jumps, and llama.cpp's own two attention paths (F16
and F32) then disagree; these gains keep that rare (measured with llama-fixtures.cpp's
FIXTURES_COMPARE_UBATCH) while the second-best experts still weigh in. gpt-oss's expert
gate/up are 3x larger so that its clamped SwiGLU (limit 7) clips a few percent of the values.
"""

import json
import sys
from pathlib import Path

import numpy as np
import gguf


# --- vocabulary: GPT-2 byte-level BPE (256 byte tokens, some merges, a few specials) ---

def byte_char(b: int) -> str:
    printable = lambda x: 33 <= x <= 126 or 0xA1 <= x <= 0xAC or 0xAE <= x <= 0xFF
    if printable(b):
        return chr(b)
    return chr(256 + sum(1 for x in range(b) if not printable(x)))


MERGES = [
    ("t", "h"), ("th", "e"), ("Ġ", "the"), ("i", "n"), ("a", "n"), ("e", "r"), ("o", "n"),
    ("r", "e"), ("Ġ", "a"), ("e", "n"), ("a", "t"), ("o", "r"), ("e", "s"), ("Ġ", "s"),
    ("i", "s"), ("Ġ", "w"), ("Ġ", "c"), ("a", "l"), ("i", "t"), ("Ġ", "t"), ("e", "d"),
    ("Ġ", "o"), ("Ġ", "in"), ("an", "d"), ("Ġ", "and"), ("n", "g"), ("i", "ng"),
    ("Ġ", "f"), ("Ġ", "p"), ("o", "u"), ("Ġ", "b"), ("l", "e"), ("a", "r"), ("Ġ", "m"),
    ("s", "t"), ("Ġ", "is"), ("o", "f"), ("Ġ", "of"), ("l", "l"), ("Ġ", "d"),
]


def vocab(specials):
    """(tokens, merges, types, first special id)"""
    tokens = [byte_char(b) for b in range(256)]
    merges = []
    for a, b in MERGES:
        assert a in tokens and b in tokens, (a, b)
        merges.append(f"{a} {b}")
        if a + b not in tokens:
            tokens.append(a + b)
    types = [1] * len(tokens)
    first_special = len(tokens)
    for s in specials:
        tokens.append(s)
        types.append(3)  # CONTROL
    return tokens, merges, types, first_special


# --- models ---

MODELS = {
    # OpenAI gpt-oss: MXFP4 experts with biases, router bias, attention biases and sinks,
    # sliding-window attention on even layers, YaRN (gpt-oss-20b's real rope: head_dim 64,
    # base 150000, factor 32 over 4096). n_embd 160 is not a multiple of 256 (real: 2880)
    # and n_head * head_dim = 256 != n_embd (real: 64 * 64 = 4096 != 2880).
    "gpt-oss": dict(
        arch="gpt-oss", seed=11, n_embd=160, n_layer=3, n_head=4, n_head_kv=2, head_dim=64,
        n_expert=16, n_expert_used=4, n_ff_exp=64, n_ctx_train=131072, eps=1e-5,
        rope_base=150000.0, sliding_window=8, pre="gpt-4o", router_gain=6.0,
        specials=["<|startoftext|>", "<|endoftext|>", "<|start|>", "<|message|>",
                  "<|channel|>", "<|end|>", "<|return|>", "<|call|>"],
        bos="<|startoftext|>", eos="<|return|>", add_bos=False,
    ),
    # Qwen3-MoE: QK-norm, softmax router, top-k renormalised (norm_topk_prob); head_dim 64 with
    # 8 heads: n_head * head_dim = 512 != n_embd 256 (real 30B-A3B: 32 * 128 != 2048).
    "qwen3moe": dict(
        arch="qwen3moe", seed=12, n_embd=256, n_layer=2, n_head=8, n_head_kv=2, head_dim=64,
        n_expert=8, n_expert_used=2, n_ff_exp=128, n_ff=512, n_ctx_train=40960, eps=1e-6,
        rope_base=1000000.0, pre="qwen2", router_gain=5.0,
        specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        bos="<|endoftext|>", eos="<|im_end|>", add_bos=False,
    ),
    # Qwen2-MoE (Qwen1.5-MoE / Qwen2-57B-A14B): q/k/v biases, softmax router, top-k NOT
    # renormalised, a shared expert scaled by sigmoid(ffn_gate_inp_shexp . x).
    "qwen2moe": dict(
        arch="qwen2moe", seed=13, n_embd=128, n_layer=3, n_head=4, n_head_kv=2, head_dim=32,
        n_expert=8, n_expert_used=2, n_ff_exp=64, n_ff_shexp=128, n_ff=256,
        n_ctx_train=32768, eps=1e-6, rope_base=1000000.0, pre="qwen2", router_gain=5.0,
        specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        bos="<|endoftext|>", eos="<|im_end|>", add_bos=False,
    ),
    # Mixtral: llama with expert_count (normal, not NEOX, rope), softmax router, top-2
    # renormalised, the expert size in feed_forward_length.
    "mixtral": dict(
        arch="llama", seed=14, n_embd=128, n_layer=3, n_head=4, n_head_kv=2, head_dim=32,
        n_expert=8, n_expert_used=2, n_ff=128, n_ctx_train=32768, eps=1e-5,
        rope_base=1000000.0, pre="llama-bpe", router_gain=5.0,
        specials=["<s>", "</s>"], bos="<s>", eos="</s>", add_bos=True,
    ),
}

# prompt lengths (before any generated token), all longer than gpt-oss's window of 8; with the
# 48 generated tokens each teacher-forced batch has >= 64 tokens, where ggml's flash attention
# takes its F32 (tiled) path rather than the one that rounds Q to F16 and sums V in F16
PROMPT_LENS = [16, 21, 29, 40, 57]


class Weights:
    def __init__(self, seed):
        self.rng = np.random.Generator(np.random.PCG64(seed))

    def uniform(self, shape, std):
        # uniform in [-a, a) has standard deviation a / sqrt(3)
        a = std * np.sqrt(3.0)
        return ((self.rng.random(shape) * 2.0 - 1.0) * a).astype(np.float32)

    def matrix(self, rows, cols, gain=1.0, lead=()):
        """A ggml [cols, rows(, lead...)] matrix: numpy shape (*lead, rows, cols)."""
        return self.uniform((*lead, rows, cols), gain / np.sqrt(cols))

    def norm(self, n):
        return (1.0 + (self.rng.random(n) * 2.0 - 1.0) * 0.2).astype(np.float32)

    def bias(self, shape, std):
        return self.uniform(shape, std)


def build(name, c, out_dir: Path):
    arch = c["arch"]
    tokens, merges, types, first_special = vocab(c["specials"])
    n_vocab = len(tokens)
    E, D, H, KV, hd = c["n_embd"], c["n_layer"], c["n_head"], c["n_head_kv"], c["head_dim"]
    w = Weights(c["seed"])
    path = out_dir / f"{name}-f32.gguf"
    g = gguf.GGUFWriter(str(path), arch)
    k = lambda key: f"{arch}.{key}"
    g.add_string("general.name", f"tiny random {name}")
    g.add_uint32("general.file_type", 0)
    g.add_uint32(k("context_length"), c["n_ctx_train"])
    g.add_uint32(k("embedding_length"), E)
    g.add_uint32(k("block_count"), D)
    n_ff = c.get("n_ff", c.get("n_ff_exp"))
    g.add_uint32(k("feed_forward_length"), n_ff)
    g.add_uint32(k("attention.head_count"), H)
    g.add_uint32(k("attention.head_count_kv"), KV)
    g.add_uint32(k("attention.key_length"), hd)
    g.add_uint32(k("attention.value_length"), hd)
    g.add_float32(k("attention.layer_norm_rms_epsilon"), c["eps"])
    g.add_float32(k("rope.freq_base"), c["rope_base"])
    g.add_uint32(k("expert_count"), c["n_expert"])
    g.add_uint32(k("expert_used_count"), c["n_expert_used"])
    if "n_ff_exp" in c:
        g.add_uint32(k("expert_feed_forward_length"), c["n_ff_exp"])
    if "n_ff_shexp" in c:
        g.add_uint32(k("expert_shared_feed_forward_length"), c["n_ff_shexp"])
    if arch == "gpt-oss":
        g.add_uint32(k("attention.sliding_window"), c["sliding_window"])
        g.add_string(k("rope.scaling.type"), "yarn")
        g.add_float32(k("rope.scaling.factor"), 32.0)
        g.add_uint32(k("rope.scaling.original_context_length"), 4096)
    g.add_string("tokenizer.ggml.model", "gpt2")
    g.add_string("tokenizer.ggml.pre", c["pre"])
    g.add_array("tokenizer.ggml.tokens", tokens)
    g.add_array("tokenizer.ggml.token_type", types)
    g.add_array("tokenizer.ggml.merges", merges)
    g.add_uint32("tokenizer.ggml.bos_token_id", tokens.index(c["bos"]))
    g.add_uint32("tokenizer.ggml.eos_token_id", tokens.index(c["eos"]))
    g.add_bool("tokenizer.ggml.add_bos_token", c["add_bos"])

    q, kv = H * hd, KV * hd
    NE, ff = c["n_expert"], c.get("n_ff_exp", n_ff)
    t = g.add_tensor
    t("token_embd.weight", w.uniform((n_vocab, E), 1.0))
    t("output_norm.weight", w.norm(E))
    t("output.weight", w.matrix(n_vocab, E, gain=2.5))
    for il in range(D):
        n = lambda x: f"blk.{il}.{x}"
        t(n("attn_norm.weight"), w.norm(E))
        t(n("attn_q.weight"), w.matrix(q, E))
        t(n("attn_k.weight"), w.matrix(kv, E))
        t(n("attn_v.weight"), w.matrix(kv, E))
        t(n("attn_output.weight"), w.matrix(E, q))
        if arch in ("gpt-oss", "qwen2moe"):
            t(n("attn_q.bias"), w.bias(q, 0.3))
            t(n("attn_k.bias"), w.bias(kv, 0.3))
            t(n("attn_v.bias"), w.bias(kv, 0.3))
        if arch == "qwen3moe":
            t(n("attn_q_norm.weight"), w.norm(hd))
            t(n("attn_k_norm.weight"), w.norm(hd))
        if arch == "gpt-oss":
            t(n("attn_output.bias"), w.bias(E, 0.3))
            # a learned logit per head in the softmax's denominator
            t(n("attn_sinks.weight"), w.bias(H, 1.5))
            t(n("post_attention_norm.weight"), w.norm(E))
        else:
            t(n("ffn_norm.weight"), w.norm(E))
        t(n("ffn_gate_inp.weight"), w.matrix(NE, E, gain=c["router_gain"]))
        up_gain = 3.0 if arch == "gpt-oss" else 1.0
        t(n("ffn_gate_exps.weight"), w.matrix(ff, E, gain=up_gain, lead=(NE,)))
        t(n("ffn_up_exps.weight"), w.matrix(ff, E, gain=up_gain, lead=(NE,)))
        t(n("ffn_down_exps.weight"), w.matrix(E, ff, gain=0.5 if arch == "gpt-oss" else 1.0, lead=(NE,)))
        if arch == "gpt-oss":
            t(n("ffn_gate_inp.bias"), w.bias(NE, 0.5))
            t(n("ffn_gate_exps.bias"), w.bias((NE, ff), 0.5))
            t(n("ffn_up_exps.bias"), w.bias((NE, ff), 0.5))
            t(n("ffn_down_exps.bias"), w.bias((NE, E), 0.3))
        if arch == "qwen2moe":
            sh = c["n_ff_shexp"]
            t(n("ffn_gate_inp_shexp.weight"), w.uniform(E, 2.0 / np.sqrt(E)))
            t(n("ffn_gate_shexp.weight"), w.matrix(sh, E))
            t(n("ffn_up_shexp.weight"), w.matrix(sh, E))
            t(n("ffn_down_shexp.weight"), w.matrix(E, sh))
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()

    # prompts: random ordinary tokens (bytes and merges), after the BOS where the model adds one
    bos = [tokens.index(c["bos"])] if c["add_bos"] else []
    prompts = [{"ids": bos + [int(x) for x in w.rng.integers(0, first_special, L)]}
               for L in PROMPT_LENS]
    (out_dir / f"{name}-prompts.json").write_text(json.dumps(prompts) + "\n")
    return path


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, c in MODELS.items():
        print(build(name, c, out))


if __name__ == "__main__":
    main()
