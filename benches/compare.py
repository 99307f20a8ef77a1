#!/usr/bin/env python3
"""superinfer vs llama.cpp, side by side on this machine.

Builds llama.cpp's llama-bench from the pinned llama-cpp-python sdist (benches/build-llama-cpp.sh),
fetches the models (scripts/fetch-models.sh), makes Q4_0 and Q8_0 copies with llama-quantize
(cached next to the models), measures the machine's STREAM triad bandwidth (benches/stream.c),
then for every model x format x thread count runs llama-bench and `superinfer bench`
alternately, ROUNDS times each, and prints a Markdown table of median t/s, the ratio
superinfer / llama.cpp, and for tg the weight bandwidth reached as a share of STREAM triad.

    benches/compare.py [--tests tg128,pp512] [--threads 1,2] [--rounds 3] [--reps 3]
                       [--models qwen2.5-0.5b,gemma3-270m,qwen2.5-1.5b] [--formats shipped,Q4_0,Q8_0]
                       [--depths 0,2048] [--cache-types f16,q8_0,f32] [--isa avx2]

--isa avx2 pits superinfer forced to its AVX2 kernels (SUPERINFER_ISA=avx2) against a second
llama.cpp build limited to AVX2 (build-llama-cpp.sh avx2): on an AVX-512 machine, a stand-in
for an AVX2-only CPU such as Zen 3 (same instruction sets, not the same core).

--depths runs each test with that many tokens already in the context (llama-bench -d);
--cache-types sets both the K and V cache type of both tools (llama-bench -ctk/-ctv).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("SUPERINFER_CACHE", Path.home() / ".cache" / "superinfer"))
MODELS = Path(os.environ.get("SUPERINFER_MODELS", CACHE / "models"))


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, stdout=subprocess.PIPE, **kw).stdout


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def stream_bandwidth(threads):
    exe = CACHE / "stream"
    src = ROOT / "benches" / "stream.c"
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        sh(["gcc", "-O3", "-march=native", "-fopenmp", str(src), "-o", str(exe)])
    return {t: float(sh([str(exe), str(t)], stderr=subprocess.DEVNULL)) for t in threads}


def model_paths(names, formats, quantize):
    out = []
    for line in sh([str(ROOT / "scripts" / "fetch-models.sh")] + names).splitlines():
        name, path = line.split(" ", 1)
        for fmt in formats:
            if fmt == "shipped":
                out.append((name, "shipped", Path(path)))
                continue
            dst = MODELS / "derived" / f"{name}-{fmt}.gguf"
            if not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                log(f"quantizing {name} to {fmt}")
                tmp = dst.with_suffix(".tmp")
                subprocess.run([quantize, "--allow-requantize", path, str(tmp), fmt], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                tmp.rename(dst)
            out.append((name, fmt, dst))
    return out


def llama_bench(bin_dir, model, threads, p, n, reps, depth, cache):
    out = sh([str(Path(bin_dir) / "llama-bench"), "-m", str(model), "-t", str(threads),
              "-p", str(p), "-n", str(n), "-r", str(reps), "-d", str(depth),
              "-ctk", cache, "-ctv", cache, "-o", "json"],
             stderr=subprocess.DEVNULL)
    rows = json.loads(out)
    return rows[0]["avg_ts"]


def superinfer_bench(exe, model, threads, p, n, reps, depth, cache):
    out = sh([str(exe), "bench", "-m", str(model), "-t", str(threads), "-p", str(p),
              "-n", str(n), "-r", str(reps), "-d", str(depth), "--ctk", cache, "--ctv", cache,
              "--json"])
    row = json.loads(out)[0]
    return row["avg_ts"], row["bytes_per_token"], row["isa"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", default="tg128")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--models", default="qwen2.5-0.5b,gemma3-270m,qwen2.5-1.5b")
    ap.add_argument("--formats", default="shipped,Q4_0,Q8_0")
    ap.add_argument("--depths", default="0")
    ap.add_argument("--cache-types", default="f16")
    ap.add_argument("--isa", choices=["native", "avx2"], default="native")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]

    bin_dir = sh([str(ROOT / "benches" / "build-llama-cpp.sh"), args.isa]).strip().splitlines()[-1]
    if args.isa != "native":
        os.environ["SUPERINFER_ISA"] = args.isa
    log("building superinfer (release)")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "superinfer-cli"], cwd=ROOT, check=True)
    exe = ROOT / "target" / "release" / "superinfer"
    quantize = sh([str(ROOT / "benches" / "build-llama-cpp.sh")]).strip().splitlines()[-1]
    models = model_paths(args.models.split(","), args.formats.split(","),
                         str(Path(quantize) / "llama-quantize"))
    bw = stream_bandwidth(threads)
    log("STREAM triad GB/s: " + ", ".join(f"{t} thread(s) {v:.1f}" for t, v in bw.items()))

    rows = []
    for name, fmt, path in models:
        for t in threads:
            for test, depth, cache in [(x, int(d), c) for x in args.tests.split(",")
                                       for d in args.depths.split(",")
                                       for c in args.cache_types.split(",")]:
                p, n = (int(test[2:]), 0) if test.startswith("pp") else (0, int(test[2:]))
                label = test + (f" @ d{depth}" if depth else "") + (f" kv {cache}" if cache != "f16" else "")
                ours, theirs = [], []
                for r in range(args.rounds):
                    theirs.append(llama_bench(bin_dir, path, t, p, n, args.reps, depth, cache))
                    ts, bpt, isa = superinfer_bench(exe, path, t, p, n, args.reps, depth, cache)
                    ours.append(ts)
                    log(f"{name} {fmt} t={t} {label} round {r + 1}: llama.cpp {theirs[-1]:.2f}  superinfer {ts:.2f} t/s")
                lo, so = statistics.median(theirs), statistics.median(ours)
                row = dict(model=name, format=fmt, threads=t, test=label, llama_ts=lo,
                           superinfer_ts=so, ratio=so / lo, isa=isa,
                           samples_llama=theirs, samples_superinfer=ours)
                if n:
                    row["gbps"] = bpt * so / 1e9
                    row["pct_stream"] = 100 * row["gbps"] / bw[t]
                    row["llama_pct_stream"] = 100 * bpt * lo / 1e9 / bw[t]
                rows.append(row)

    print(f"STREAM triad: " + ", ".join(f"{v:.1f} GB/s ({t} thread{'s' if t > 1 else ''})" for t, v in bw.items()))
    print()
    print("| model | format | threads | test | llama.cpp t/s | superinfer t/s | ratio | superinfer GB/s (% STREAM) | llama.cpp % STREAM |")
    print("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        bwcol = f"{r['gbps']:.1f} ({r['pct_stream']:.0f}%)" if "gbps" in r else "-"
        lbw = f"{r['llama_pct_stream']:.0f}%" if "gbps" in r else "-"
        print(f"| {r['model']} | {r['format']} | {r['threads']} | {r['test']} | {r['llama_ts']:.2f} | "
              f"{r['superinfer_ts']:.2f} | {r['ratio']:.2f} | {bwcol} | {lbw} |")
    out = CACHE / "compare-last.json"
    out.write_text(json.dumps(dict(stream=bw, rows=rows), indent=1))
    log(f"raw results: {out}")


if __name__ == "__main__":
    main()
