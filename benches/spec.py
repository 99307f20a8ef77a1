#!/usr/bin/env python3
"""Speculative decoding: superinfer against llama.cpp's llama-lookup and llama-speculative.

Fixed prompt sets in benches/spec_prompts/ (chat-formatted for the Qwen2.5-Coder models):
  edit-*      a function given in the prompt, asked back with a small change   -> prompt lookup
  summary-*   a text given in the prompt, asked to be summarized with quotes    -> prompt lookup
  complete-*  code written from a description                                  -> draft model
Each prompt is decoded greedily for -n tokens (256) at --threads (2) by
  - `superinfer bench -f PROMPT --lookup-ngram N | --model-draft DRAFT`, which decodes the
    prompt plainly and speculatively, alternated, and checks both give the same tokens;
  - llama-lookup (-f PROMPT --spec-draft-n-max K) or llama-speculative (-md DRAFT
    --spec-draft-n-max K --spec-draft-p-min P), same files, same threads, greedy;
alternately, --rounds times. Prints one Markdown table: median t/s of our plain and
speculative decoding, our speedup, llama.cpp's tool's t/s, our speculative t/s over it, and
both acceptance rates (accepted / drafted). llama.cpp from benches/build-llama-cpp.sh.

    benches/spec.py [--target qwen2.5-1.5b] [--draft qwen2.5-0.5b] [--threads 2] [-n 256]
                    [--rounds 3] [--kinds edit,complete,summary] [--draft-max 16]
                    [--llama-draft-max 16] [--lookup-ngram 3] [--draft-format Q4_0]
                    [--draft-vocab N] [--isa avx2|avx-vnni] [--no-build] [--json-out FILE]

`--draft-format Q4_0` drafts with a copy of the draft model requantized by llama-quantize
(cached under ~/.cache/superinfer/models/derived), for both engines: a draft that reads fewer
bytes per token drafts faster. `--draft-vocab N` has our draft score only the first N tokens
of its vocabulary (`superinfer --draft-vocab`; llama.cpp has no such setting).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("SUPERINFER_CACHE", Path.home() / ".cache" / "superinfer"))
PROMPTS = ROOT / "benches" / "spec_prompts"


def sh(cmd):
    r = subprocess.run(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        sys.exit(f"error: {' '.join(map(str, cmd))} failed:\n{r.stderr[-2000:]}")
    return r.stdout, r.stderr


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def model_path(name):
    out, _ = sh([ROOT / "scripts" / "fetch-models.sh", "--path", name])
    return out.strip().splitlines()[-1]


def requantized(bin_dir, name, path, fmt):
    """A copy of the model at `path` in `fmt`, made once by llama-quantize."""
    dst = CACHE / "models" / "derived" / f"{name}-{fmt}.gguf"
    if not dst.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        log(f"quantizing {name} to {fmt}")
        tmp = dst.with_suffix(".tmp")
        subprocess.run([str(bin_dir / "llama-quantize"), "--allow-requantize", path, str(tmp), fmt],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tmp.rename(dst)
    return dst


def ours(exe, target, draft, prompt, a):
    cmd = [exe, "bench", "-m", target, "-t", str(a.threads), "-n", str(a.n), "-r", "1",
           "-f", prompt, "--json", "--draft-max", str(a.draft_max)]
    if draft:
        cmd += ["--model-draft", draft, "--draft-p-min", str(a.p_min)]
        if a.draft_vocab:
            cmd += ["--draft-vocab", str(a.draft_vocab)]
    else:
        cmd += ["--lookup-ngram", str(a.lookup_ngram)]
    out, _ = sh(cmd)
    plain, spec = json.loads(out)
    steps = spec["n_accepted"] / spec["mean_accepted"] if spec["mean_accepted"] else 0
    return {"plain": plain["avg_ts"], "spec": spec["avg_ts"], "n_gen": spec["n_gen"],
            "acceptance": spec["acceptance_rate"], "mean_accepted": spec["mean_accepted"],
            "drafted_per_step": spec["n_drafted"] / steps if steps else 0.0}


def llama(bin_dir, target, draft, prompt, a):
    common = ["-m", target, "-f", prompt, "-n", str(a.n), "--temp", "0", "-t", str(a.threads),
              "-c", "4096", "-fa", "on", "--spec-draft-n-max", str(a.llama_draft_max)]
    if draft:
        cmd = [bin_dir / "llama-speculative", *common, "-md", draft,
               "--spec-draft-p-min", str(a.p_min)]
    else:
        cmd = [bin_dir / "llama-lookup", *common]
    _, err = sh(cmd)
    speed = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s", err)
    drafted = re.search(r"n_drafted\s*=\s*(\d+)", err)
    accepted = re.search(r"n_accept\s*=\s*(\d+)", err)
    if not speed:
        sys.exit(f"error: no speed line from {cmd[0]}:\n{err[-2000:]}")
    d, acc = int(drafted.group(1)), int(accepted.group(1))
    return {"ts": float(speed.group(3)), "n_gen": int(speed.group(1)),
            "acceptance": acc / d if d else 0.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="qwen2.5-1.5b")
    ap.add_argument("--draft", default="qwen2.5-0.5b")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-n", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kinds", default="edit,complete,summary")
    ap.add_argument("--draft-max", type=int, default=16)
    ap.add_argument("--llama-draft-max", type=int, default=16)
    ap.add_argument("--p-min", type=float, default=0.75)
    ap.add_argument("--lookup-ngram", type=int, default=3)
    ap.add_argument("--draft-format", default="shipped",
                    help="a llama-quantize type (Q4_0, Q8_0, ...) for the draft, or 'shipped'")
    ap.add_argument("--draft-vocab", type=int, default=0,
                    help="ours only: the draft scores the first N tokens of its vocabulary (0: all)")
    ap.add_argument("--isa", choices=["native", "avx2", "avx-vnni"], default="native",
                    help="force our kernels to this ISA (SUPERINFER_ISA) against a llama.cpp "
                         "built for it (benches/build-llama-cpp.sh ISA)")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--json-out", default=str(CACHE / "spec-last.json"))
    a = ap.parse_args()
    if a.isa != "native":
        os.environ["SUPERINFER_ISA"] = a.isa

    if not a.no_build:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "superinfer-cli"], cwd=ROOT, check=True)
    exe = ROOT / "target" / "release" / "superinfer"
    bin_dir = Path(sh([ROOT / "benches" / "build-llama-cpp.sh", a.isa])[0].strip().splitlines()[-1])
    target, draft = model_path(a.target), model_path(a.draft)
    if a.draft_format != "shipped":
        draft = str(requantized(bin_dir, a.draft, draft, a.draft_format))
    kinds = a.kinds.split(",")
    prompts = sorted(p for p in PROMPTS.glob("*.txt") if p.name.split("-")[0] in kinds)
    results = {p.name: {"ours": [], "llama": []} for p in prompts}
    for r in range(a.rounds):
        for p in prompts:
            d = draft if p.name.startswith("complete") else None
            log(f"round {r + 1}/{a.rounds}: {p.name} ({'draft model' if d else 'prompt lookup'})")
            results[p.name]["ours"].append(ours(exe, target, d, p, a))
            results[p.name]["llama"].append(llama(bin_dir, target, d, p, a))

    med = statistics.median
    vocab = f" (ours: --draft-vocab {a.draft_vocab})" if a.draft_vocab else ""
    print(f"target {Path(target).name}, draft {Path(draft).name}{vocab}, {a.threads} threads, "
          f"greedy, -n {a.n}, medians of {a.rounds} alternated rounds\n")
    print("| prompt | method | tokens | ours plain t/s | ours spec t/s | speedup | accept | "
          "drafted/step | llama.cpp t/s | accept | ours spec / llama.cpp |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    summary = {}
    for p in prompts:
        o, l = results[p.name]["ours"], results[p.name]["llama"]
        plain, spec, lts = med(x["plain"] for x in o), med(x["spec"] for x in o), med(x["ts"] for x in l)
        method = "draft 0.5B" if p.name.startswith("complete") else f"lookup"
        print(f"| {p.stem} | {method} | {o[0]['n_gen']} | {plain:.2f} | {spec:.2f} | {spec / plain:.2f}x | "
              f"{100 * o[0]['acceptance']:.0f}% | {med(x['drafted_per_step'] for x in o):.2f} | {lts:.2f} | {100 * l[0]['acceptance']:.0f}% | {spec / lts:.2f}x |")
        summary.setdefault(p.name.split("-")[0], []).append((spec / plain, spec / lts))
    print()
    for kind, v in summary.items():
        print(f"- {kind}: median speedup over our plain decode {med(x[0] for x in v):.2f}x, "
              f"over llama.cpp's tool {med(x[1] for x in v):.2f}x")
    Path(a.json_out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json_out).write_text(json.dumps({"args": vars(a), "results": results}, indent=1))
    log(f"raw results: {a.json_out}")


if __name__ == "__main__":
    main()
