#!/usr/bin/env python3
"""Tiny random dense models of the architectures beyond the llama family's plain shape, one
per architecture, for the agreement fixtures (tests/tests/arch_fixtures.rs).

Writes, for each model, an all-F32 GGUF (`<name>-f32.gguf`) and the prompts of its fixture
(`<name>-prompts.json`, random token ids) into OUT_DIR; `scripts/archs/make-fixtures.sh`
quantizes each with the pinned `llama-quantize` and records llama.cpp's outputs on it. The
metadata keys and tensor names are those the pinned llama.cpp reads (src/models/<arch>.cpp):
a file with a tensor llama.cpp does not load is refused by it, so each model holds exactly
the tensors its architecture loads.

    PYTHONPATH=<llama.cpp>/gguf-py python3 scripts/archs/make-tiny.py OUT_DIR

The vocabulary, the weight scales and the prompt lengths are scripts/moe/make-tiny.py's
(matrices uniform with std 1/sqrt(fan-in), norms 1 +- 0.2, an output matrix 2.5x larger so
most positions are decisive). Each model turns on what its architecture adds, at strengths
where it changes the result (caps and scales well inside the values the random weights
reach), and widths that are whole blocks of the quantized type. Deterministic (fixed seeds).
"""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import gguf

_spec = importlib.util.spec_from_file_location(
    "moe_tiny", Path(__file__).resolve().parent.parent / "moe" / "make-tiny.py")
moe_tiny = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(moe_tiny)
vocab, Weights, PROMPT_LENS = moe_tiny.vocab, moe_tiny.Weights, moe_tiny.PROMPT_LENS

QWEN_SPECIALS = dict(specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                     bos="<|endoftext|>", eos="<|im_end|>", add_bos=False, pre="qwen2")
LLAMA_SPECIALS = dict(specials=["<s>", "</s>"], bos="<s>", eos="</s>", add_bos=True,
                      pre="llama-bpe")

MODELS = {
    # Phi-3 / Phi-4-mini: fused QKV (`attn_qkv`), gate and up fused in `ffn_up` (gate first),
    # partial rotary dims (Phi-4-mini: 96 of 128; here 24 of 32) with LongRoPE's factor
    # tables and attention factor; the original context (256) is below the fixtures' 512, so
    # llama.cpp takes the long factors. The sliding window is written, as Phi-3's converter
    # does, and llama.cpp ignores it.
    "phi3": dict(arch="phi3", seed=21, n_embd=128, n_layer=3, n_head=4, n_head_kv=2,
                 head_dim=32, n_rot=24, n_ff=256, n_ctx_train=8192, n_ctx_orig=256,
                 eps=1e-5, rope_base=10000.0, sliding_window=16, attn_factor=1.19,
                 # llama.cpp sets attributes of these by name in a model named phi3
                 specials=["<unk>", "<s>", "</s>", "<|endoftext|>", "<|end|>"], bos="<s>",
                 eos="<|endoftext|>", add_bos=True, pre="llama-bpe"),
    # Gemma 2: embeddings scaled by sqrt(n_embd), GeGLU, post-attention and post-FFN norms,
    # sliding window on even layers, attention and final logit soft-capping (caps that bite:
    # the real 50 / 30 meet much larger scores), tied output, n_head * head_dim = 256 !=
    # n_embd (as Gemma-2-2B: 8 * 256 != 2304).
    "gemma2": dict(arch="gemma2", seed=22, n_embd=128, n_layer=4, n_head=4, n_head_kv=2,
                   head_dim=64, n_ff=256, n_ctx_train=8192, eps=1e-6, rope_base=10000.0,
                   sliding_window=8, attn_softcap=3.0, final_softcap=5.0, **QWEN_SPECIALS),
    # Granite 3: embedding, residual, attention and logit scales (Granite-3's own: 12, 0.22,
    # 1/128 (here 0.25 against the default 1/sqrt(64)), 8), an output bias on attention;
    # widths of 256 for Q4_K.
    "granite": dict(arch="granite", seed=23, n_embd=256, n_layer=2, n_head=4, n_head_kv=2,
                    head_dim=64, n_ff=256, n_ctx_train=8192, eps=1e-5, rope_base=10000.0,
                    embedding_scale=12.0, residual_scale=0.22, attention_scale=0.25,
                    logit_scale=8.0, **LLAMA_SPECIALS),
    # OLMo 2 (and OLMo 3's sliding window, every 4th layer global): no pre-norms, norms after
    # attention and FFN, QK-norm over the whole q / k projection.
    "olmo2": dict(arch="olmo2", seed=24, n_embd=128, n_layer=4, n_head=4, n_head_kv=2,
                  head_dim=32, n_ff=256, n_ctx_train=8192, eps=1e-6, rope_base=500000.0,
                  sliding_window=8, **QWEN_SPECIALS),
    # The llama graph under other names, each a rename plus its RoPE layout: EXAONE 3/3.5
    # (NeoX RoPE; here with llama-3-style `rope_freqs` factors, as EXAONE 3.5 has them),
    # InternLM2 (its converter splits wqkv into q/k/v) and XVERSE (normal RoPE).
    "exaone": dict(arch="exaone", seed=25, n_embd=64, n_layer=2, n_head=4, n_head_kv=2,
                   head_dim=16, n_ff=128, n_ctx_train=8192, eps=1e-5, rope_base=10000.0,
                   rope_freqs=True, **QWEN_SPECIALS),
    "internlm2": dict(arch="internlm2", seed=26, n_embd=64, n_layer=2, n_head=4, n_head_kv=2,
                      head_dim=16, n_ff=128, n_ctx_train=8192, eps=1e-5, rope_base=1000000.0,
                      **LLAMA_SPECIALS),
    "xverse": dict(arch="xverse", seed=27, n_embd=64, n_layer=2, n_head=4, n_head_kv=4,
                   head_dim=16, n_ff=128, n_ctx_train=8192, eps=1e-6, rope_base=10000.0,
                   **LLAMA_SPECIALS),
}


def build(name, c, out_dir: Path):
    arch = c["arch"]
    tokens, merges, types, first_special = vocab(c["specials"])
    n_vocab = len(tokens)
    E, D, H, KV, hd, F = c["n_embd"], c["n_layer"], c["n_head"], c["n_head_kv"], c["head_dim"], c["n_ff"]
    w = Weights(c["seed"])
    path = out_dir / f"{name}-f32.gguf"
    g = gguf.GGUFWriter(str(path), arch)
    k = lambda key: f"{arch}.{key}"
    g.add_string("general.name", f"tiny random {name}")
    g.add_uint32("general.file_type", 0)
    g.add_uint32(k("context_length"), c["n_ctx_train"])
    g.add_uint32(k("embedding_length"), E)
    g.add_uint32(k("block_count"), D)
    g.add_uint32(k("feed_forward_length"), F)
    g.add_uint32(k("attention.head_count"), H)
    g.add_uint32(k("attention.head_count_kv"), KV)
    if arch in ("gemma2",):
        g.add_uint32(k("attention.key_length"), hd)
        g.add_uint32(k("attention.value_length"), hd)
    g.add_float32(k("attention.layer_norm_rms_epsilon"), c["eps"])
    g.add_float32(k("rope.freq_base"), c["rope_base"])
    if "n_rot" in c:
        g.add_uint32(k("rope.dimension_count"), c["n_rot"])
    if "sliding_window" in c:
        g.add_uint32(k("attention.sliding_window"), c["sliding_window"])
    if "n_ctx_orig" in c:
        g.add_uint32(k("rope.scaling.original_context_length"), c["n_ctx_orig"])
    if "attn_factor" in c:
        g.add_float32(k("rope.scaling.attn_factor"), c["attn_factor"])
    if "attn_softcap" in c:
        g.add_float32(k("attn_logit_softcapping"), c["attn_softcap"])
        g.add_float32(k("final_logit_softcapping"), c["final_softcap"])
    if arch == "granite":
        g.add_float32(k("embedding_scale"), c["embedding_scale"])
        g.add_float32(k("residual_scale"), c["residual_scale"])
        g.add_float32(k("attention.scale"), c["attention_scale"])
        g.add_float32(k("logit_scale"), c["logit_scale"])
    g.add_string("tokenizer.ggml.model", "gpt2")
    g.add_string("tokenizer.ggml.pre", c["pre"])
    g.add_array("tokenizer.ggml.tokens", tokens)
    g.add_array("tokenizer.ggml.token_type", types)
    g.add_array("tokenizer.ggml.merges", merges)
    g.add_uint32("tokenizer.ggml.bos_token_id", tokens.index(c["bos"]))
    g.add_uint32("tokenizer.ggml.eos_token_id", tokens.index(c["eos"]))
    g.add_bool("tokenizer.ggml.add_bos_token", c["add_bos"])

    q, kv = H * hd, KV * hd
    t = g.add_tensor
    if arch == "gemma2":
        # tied output: the embeddings are the output matrix (gain 2.5 over the sqrt(E)-long
        # normed rows), scaled up by sqrt(E) on input
        t("token_embd.weight", w.uniform((n_vocab, E), 2.5 / np.sqrt(E)))
    else:
        t("token_embd.weight", w.uniform((n_vocab, E), 1.0))
    t("output_norm.weight", w.norm(E))
    if arch != "gemma2":
        # granite divides the logits by logit_scale
        gain = 2.5 * c.get("logit_scale", 1.0)
        t("output.weight", w.matrix(n_vocab, E, gain=gain))
    if c.get("rope_freqs"):
        # llama 3's frequency divisors: 1 for the fast pairs, up to 8 for the slow ones
        t("rope_freqs.weight", np.linspace(1.0, 8.0, hd // 2).astype(np.float32))
    if arch == "phi3":
        half = c["n_rot"] // 2
        t("rope_factors_long.weight", (1.0 + w.rng.random(half) * 3.0).astype(np.float32))
        t("rope_factors_short.weight", (1.0 + w.rng.random(half) * 0.2).astype(np.float32))
    for il in range(D):
        n = lambda x: f"blk.{il}.{x}"
        if arch != "olmo2":
            t(n("attn_norm.weight"), w.norm(E))
        if arch == "phi3":
            t(n("attn_qkv.weight"), np.concatenate(
                [w.matrix(q, E), w.matrix(kv, E), w.matrix(kv, E)], axis=0))
        else:
            t(n("attn_q.weight"), w.matrix(q, E))
            t(n("attn_k.weight"), w.matrix(kv, E))
            t(n("attn_v.weight"), w.matrix(kv, E))
        t(n("attn_output.weight"), w.matrix(E, q))
        if arch == "granite":
            t(n("attn_output.bias"), w.bias(E, 0.3))
        if arch == "olmo2":
            t(n("attn_q_norm.weight"), w.norm(q))
            t(n("attn_k_norm.weight"), w.norm(kv))
        if arch in ("gemma2", "olmo2"):
            t(n("post_attention_norm.weight"), w.norm(E))
        if arch != "olmo2":
            t(n("ffn_norm.weight"), w.norm(E))
        if arch == "phi3":
            # [gate; up]: ggml_swiglu activates the first half
            t(n("ffn_up.weight"), np.concatenate([w.matrix(F, E), w.matrix(F, E)], axis=0))
        else:
            t(n("ffn_gate.weight"), w.matrix(F, E))
            t(n("ffn_up.weight"), w.matrix(F, E))
        t(n("ffn_down.weight"), w.matrix(E, F))
        if arch in ("gemma2", "olmo2"):
            t(n("post_ffw_norm.weight"), w.norm(E))
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()

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
