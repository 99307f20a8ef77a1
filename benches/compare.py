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
                       [--depths 0,2048] [--cache-types f16,q8_0,f32] [--isa avx2|avx-vnni]

--models also takes GGUF files by path (any name ending in .gguf), run as they are: e.g. the
synthetic MoE shapes of benches/src/bin/synth-model.rs.

--isa avx2 pits superinfer forced to its AVX2 kernels (SUPERINFER_ISA=avx2) against a second
llama.cpp build limited to AVX2 (build-llama-cpp.sh avx2): on an AVX-512 machine, a stand-in
for an AVX2-only CPU such as Zen 3 (same instruction sets, not the same core). --isa avx-vnni
does the same with AVX2 + AVX-VNNI on both sides (build-llama-cpp.sh avx-vnni): a laptop's
instruction sets (Alder Lake and later) where the machine has AVX-VNNI.

--depths runs each test with that many tokens already in the context (llama-bench -d);
--cache-types sets both the K and V cache type of both tools (llama-bench -ctk/-ctv).

Batched mode (--npl), mirroring llama.cpp's llama-batched-bench: NPL sequences at once, each
with a prompt of NPP tokens then NTG generated tokens; per model x format x thread count,
llama-batched-bench (-fa on, -b 2048 -ub 512) and `superinfer bench -np` alternately, ROUNDS
times each. One Markdown table per model/format/threads: per npl, the aggregate prompt t/s
(llama.cpp S_PP) and aggregate decode t/s (S_TG) of both, their ratios, superinfer's decode t/s
per sequence and its decode scaling tg@npl / tg@npl=1 (llama.cpp's alongside); medians over rounds.

    benches/compare.py --npl 1,8 [--npp 128] [--ntg 128] [--threads 2] [--rounds 3] [--reps 3]
                       [--models ...] [--formats ...] [--isa avx2] [--json-out FILE]
    benches/compare.py --npl 1,8 --npp 128 --ntg 128 --threads 2 --models qwen2.5-0.5b --formats shipped,Q4_0

--json-out writes the raw medians and samples (default: compare-last.json, or
compare-batched-last.json with --npl, in the cache); --no-build runs target/release/superinfer
as it is instead of `cargo build --release` first.
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
    """(name, format, path) per model and format: fetch-models.sh's names, each in every
    format; a name ending in .gguf is a file taken as it is (format "file")."""
    out = []
    for name in [n for n in names if n.endswith(".gguf")]:
        path = Path(name).expanduser()
        if not path.is_file():
            log(f"error: no model file {path}")
            sys.exit(1)
        out.append((path.stem, "file", path))
    names = [n for n in names if not n.endswith(".gguf")]
    if not names:
        return out
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
              "-ctk", cache, "-ctv", cache, "-fa", "on", "-o", "json"],
             stderr=subprocess.DEVNULL)
    rows = json.loads(out)
    return rows[0]["avg_ts"]


def superinfer_bench(exe, model, threads, p, n, reps, depth, cache):
    out = sh([str(exe), "bench", "-m", str(model), "-t", str(threads), "-p", str(p),
              "-n", str(n), "-r", str(reps), "-d", str(depth), "--ctk", cache, "--ctv", cache,
              "--json"])
    row = json.loads(out)[0]
    return row["avg_ts"], row["bytes_per_token"], row["isa"]


class BenchError(Exception):
    pass


def tail(text, n=6):
    return "\n".join("    " + l for l in text.strip().splitlines()[-n:])


def batched_ctx(npl, npp, ntg):
    return -(-max(npl) * (npp + ntg) // 256) * 256


def llama_batched_jsonl(exe):
    r = subprocess.run([exe, "--help"], text=True, capture_output=True)
    return "jsonl" in r.stdout + r.stderr


def llama_batched(bin_dir, model, threads, npp, ntg, npl):
    """{npl: (S_PP, S_TG)} from one llama-batched-bench run."""
    exe = str(Path(bin_dir) / "llama-batched-bench")
    cmd = [exe, "-m", str(model), "-c", str(batched_ctx(npl, npp, ntg)), "-b", "2048", "-ub", "512",
           "-npp", str(npp), "-ntg", str(ntg), "-npl", ",".join(map(str, npl)),
           "-t", str(threads), "-tb", str(threads), "-fa", "on"]
    if llama_batched_jsonl(exe):
        cmd += ["--output-format", "jsonl"]
    r = subprocess.run(cmd, text=True, capture_output=True)
    if r.returncode:
        raise BenchError(f"`{' '.join(cmd)}` failed (exit {r.returncode}):\n{tail(r.stderr)}")
    rows = {}
    for line in (r.stdout + "\n" + r.stderr).splitlines():
        line = line.strip()
        if line.startswith("{") and '"speed_tg"' in line:  # --output-format jsonl
            j = json.loads(line)
            rows[j["pl"]] = (j["speed_pp"], j["speed_tg"])
        elif line.startswith("|"):  # |PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s|
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) == 10 and cells[2].isdigit():
                rows[int(cells[2])] = (float(cells[5]), float(cells[7]))
    missing = [b for b in npl if b not in rows]
    if missing:
        raise BenchError(f"`{' '.join(cmd)}` gave no result for npl {missing}:\n{tail(r.stdout + r.stderr)}")
    return rows


def parse_superinfer_batched(text, npl):
    """{npl: (pp t/s, tg t/s, tg t/s per sequence)} from `superinfer bench -np ... --json`."""
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as e:
        raise BenchError(f"superinfer bench --json printed no JSON ({e}):\n{tail(text)}")
    out = {}
    for row in rows:
        d = out.setdefault(row.get("n_parallel", 1), {})
        if row.get("n_prompt") and not row.get("n_gen"):
            d["pp"] = row["avg_ts"]
        elif row.get("n_gen") and not row.get("n_prompt"):
            d["tg"] = row["avg_ts"]
            d["tg_seq"] = row.get("per_seq_ts", row["avg_ts"] / row.get("n_parallel", 1))
    missing = [b for b in npl if "pp" not in out.get(b, {}) or "tg" not in out.get(b, {})]
    if missing:
        raise BenchError(f"superinfer bench --json has no prompt and decode rows with n_parallel "
                         f"in {missing} (does this binary support -np?)")
    return {b: (out[b]["pp"], out[b]["tg"], out[b]["tg_seq"]) for b in npl}


def superinfer_batched(exe, model, threads, npp, ntg, npl, reps):
    cmd = [str(exe), "bench", "-m", str(model), "-np", ",".join(map(str, npl)), "-p", str(npp),
           "-n", str(ntg), "-t", str(threads), "-r", str(reps), "--json"]
    r = subprocess.run(cmd, text=True, capture_output=True)
    if r.returncode:
        raise BenchError(f"`{' '.join(cmd)}` failed (exit {r.returncode}); does this superinfer "
                         f"binary support batched bench (-np) yet?\n{tail(r.stderr)}")
    return parse_superinfer_batched(r.stdout, npl)


def run_batched(args, bin_dir, exe, models, threads):
    npl = [int(b) for b in args.npl.split(",")]
    p, n = args.npp, args.ntg
    med = lambda xs: statistics.median(xs) if xs else None
    fmt = lambda x, f="{:.2f}": "-" if x is None else f.format(x)
    div = lambda a, b: None if a is None or b is None else a / b
    results, ours_failed = [], None
    for name, form, path in models:
        for t in threads:
            theirs, ours = {b: [] for b in npl}, {b: [] for b in npl}
            for r in range(args.rounds):
                try:
                    lr = llama_batched(bin_dir, path, t, p, n, npl)
                except BenchError as e:
                    log(f"error: llama.cpp: {e}")
                    sys.exit(1)
                for b in npl:
                    theirs[b].append(lr[b])
                if ours_failed is None:
                    try:
                        sr = superinfer_batched(exe, path, t, p, n, npl, args.reps)
                        for b in npl:
                            ours[b].append(sr[b])
                    except BenchError as e:
                        ours_failed = str(e)
                        log(f"error: superinfer: {e}\n(continuing with llama.cpp alone)")
                log(f"{name} {form} t={t} round {r + 1}: " + "; ".join(
                    f"npl {b}: llama.cpp pp {theirs[b][-1][0]:.1f} tg {theirs[b][-1][1]:.1f}"
                    + (f", superinfer pp {ours[b][-1][0]:.1f} tg {ours[b][-1][1]:.1f}" if len(ours[b]) > r else "")
                    for b in npl))
            for b in npl:
                row = dict(model=name, format=form, threads=t, npl=b, npp=p, ntg=n,
                           llama_pp=med([x[0] for x in theirs[b]]), llama_tg=med([x[1] for x in theirs[b]]),
                           superinfer_pp=med([x[0] for x in ours[b]]), superinfer_tg=med([x[1] for x in ours[b]]),
                           superinfer_tg_per_seq=med([x[2] for x in ours[b]]),
                           samples_llama=theirs[b], samples_superinfer=ours[b])
                row["pp_ratio"] = div(row["superinfer_pp"], row["llama_pp"])
                row["tg_ratio"] = div(row["superinfer_tg"], row["llama_tg"])
                results.append(row)
            one = next((x for x in results[-len(npl):] if x["npl"] == 1), None)
            for x in results[-len(npl):]:
                x["superinfer_tg_scaling"] = div(x["superinfer_tg"], one and one["superinfer_tg"])
                x["llama_tg_scaling"] = div(x["llama_tg"], one and one["llama_tg"])

    for i in range(0, len(results), len(npl)):
        g = results[i:i + len(npl)]
        print(f"### {g[0]['model']} {g[0]['format']}, {g[0]['threads']} thread{'s' if g[0]['threads'] > 1 else ''}: "
              f"pp {p} + tg {n} per sequence (median of {args.rounds} round{'s' if args.rounds > 1 else ''})")
        print()
        print("| npl | llama.cpp S_PP t/s | superinfer pp t/s | ratio | llama.cpp S_TG t/s | superinfer tg t/s | ratio "
              "| superinfer tg/seq t/s | superinfer tg@npl / tg@1 | llama.cpp tg@npl / tg@1 |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for x in g:
            print(f"| {x['npl']} | {fmt(x['llama_pp'])} | {fmt(x['superinfer_pp'])} | {fmt(x['pp_ratio'])} "
                  f"| {fmt(x['llama_tg'])} | {fmt(x['superinfer_tg'])} | {fmt(x['tg_ratio'])} "
                  f"| {fmt(x['superinfer_tg_per_seq'])} | {fmt(x['superinfer_tg_scaling'])} "
                  f"| {fmt(x['llama_tg_scaling'])} |")
        print()
    out = Path(args.json_out) if args.json_out else CACHE / "compare-batched-last.json"
    out.write_text(json.dumps(dict(npl=npl, npp=p, ntg=n, rows=results, superinfer_error=ours_failed), indent=1))
    log(f"raw results: {out}")
    if ours_failed:
        log("error: superinfer was not measured (its failure is above); the table has llama.cpp alone")
        sys.exit(1)


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
    ap.add_argument("--isa", choices=["native", "avx2", "avx-vnni"], default="native")
    ap.add_argument("--npl", help="batched mode: numbers of parallel sequences, e.g. 1,8")
    ap.add_argument("--npp", type=int, default=128, help="batched mode: prompt tokens per sequence")
    ap.add_argument("--ntg", type=int, default=128, help="batched mode: generated tokens per sequence")
    ap.add_argument("--json-out", help="where to write the raw medians")
    ap.add_argument("--no-build", action="store_true", help="no cargo build; run target/release/superinfer as it is")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]

    bin_dir = sh([str(ROOT / "benches" / "build-llama-cpp.sh"), args.isa]).strip().splitlines()[-1]
    if args.isa != "native":
        os.environ["SUPERINFER_ISA"] = args.isa
    exe = ROOT / "target" / "release" / "superinfer"
    if not args.no_build:
        log("building superinfer (release)")
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "superinfer-cli"], cwd=ROOT, check=True)
    elif not exe.exists():
        log(f"error: --no-build but {exe} does not exist")
        sys.exit(1)
    quantize = sh([str(ROOT / "benches" / "build-llama-cpp.sh")]).strip().splitlines()[-1]
    models = model_paths(args.models.split(","), args.formats.split(","),
                         str(Path(quantize) / "llama-quantize"))
    if args.npl:
        return run_batched(args, bin_dir, exe, models, threads)
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
    out = Path(args.json_out) if args.json_out else CACHE / "compare-last.json"
    out.write_text(json.dumps(dict(stream=bw, rows=rows), indent=1))
    log(f"raw results: {out}")


if __name__ == "__main__":
    main()
