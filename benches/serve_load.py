#!/usr/bin/env python3
"""Load generator for OpenAI-compatible completion servers, with vLLM's serving-benchmark
metric definitions (benchmarks/benchmark_serving.py):

  TTFT   time to first token: from sending the request to the first chunk carrying text
  TPOT   time per output token, excluding the first: (E2EL - TTFT) / (output tokens - 1),
         per request with more than one output token
  ITL    inter-token latency: the time between successive text-carrying chunks, pooled
         over all requests
  E2EL   end-to-end latency of a request
  output throughput   generated tokens / benchmark duration
  request throughput  completed requests / benchmark duration
each as mean, median and p99 (ms).

Requests arrive as a Poisson process at --rate requests/s (inf: all at once) with at most
--concurrency in flight; prompts are seeded synthetic text of mixed lengths (uniform in
--min-input..--max-input tokens, made exact with the server's /tokenize and /detokenize);
every request asks for --max-tokens output tokens with "ignore_eos": true so outputs have a
fixed length. Requests stream /v1/completions (stream_options.include_usage: output tokens
come from the final usage chunk when the server sends one, else one per text chunk).

Modes:
  --url URL     against a server already running (loopback addresses only)
  --compare     starts `superinfer serve` and llama-server (benches/build-llama-cpp.sh) on
                the same model with the same threads, slots and per-sequence context, runs
                --rounds rounds alternating them, prints a table and the ratios
                superinfer / llama-server (output tok/s, TTFT p99) and stops both.

Examples:
  benches/serve_load.py --url http://127.0.0.1:8080 --num-prompts 32 --concurrency 8
  benches/serve_load.py --compare -m qwen2.5-0.5b --concurrency 1,8 --rounds 3 --json-out out.json
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import math
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

try:
    import httpx
except ImportError:  # pragma: no cover
    sys.exit("serve_load.py needs httpx: python3 -m pip install httpx "
             "(pinned in tests/server/requirements.txt)")

REPO = Path(__file__).resolve().parents[1]

WORDS = (
    "the of and to in is was for on that with as by at from his her they this had not are but "
    "which have one were all their there been has more when who will can would said time about "
    "into other than some could them these two may first then only its new over also after any "
    "most made where many before must through back years much way well down should because each "
    "just those people how too little state good very make world still own see men work long get "
    "here between both life being under never day same another know while last might great old "
    "year off come since against go came right used take three river garden window market paper "
    "mountain engine silver kitchen winter letter morning village harbor lantern forest bridge "
    "station teacher doctor music storm island signal number answer question reason season"
).split()


# -- prompts -------------------------------------------------------------------------------

@dataclass
class Prompt:
    text: str
    tokens: int  # as the server tokenizes it, without special tokens


def synthetic_text(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    # sentences of 8-20 words, so the text looks like prose to the tokenizer
    out, i = [], 0
    while i < len(words):
        k = rng.randint(8, 20)
        s = " ".join(words[i:i + k])
        out.append(s[:1].upper() + s[1:] + ".")
        i += k
    return " ".join(out)


def make_prompts(base: str, n: int, lo: int, hi: int, seed: int, timeout: float) -> list[Prompt]:
    """n prompts of lengths uniform in [lo, hi] tokens, exact by the server's tokenizer.
    Each starts with a distinct numbered line, so no two share a cached prefix."""
    rng = random.Random(seed)
    prompts = []
    with httpx.Client(base_url=base, timeout=timeout) as c:
        for i in range(n):
            want = rng.randint(lo, hi)
            text = f"Document {seed}-{i}. " + synthetic_text(rng, int(want * 1.3) + 16)
            toks = c.post("/tokenize", json={"content": text, "add_special": False}).raise_for_status().json()["tokens"]
            if len(toks) < want:
                raise RuntimeError(f"synthetic text too short: {len(toks)} < {want} tokens")
            toks = toks[:want]
            text = c.post("/detokenize", json={"tokens": toks}).raise_for_status().json()["content"]
            prompts.append(Prompt(text, want))
    return prompts


# -- one request ---------------------------------------------------------------------------

@dataclass
class Result:
    ok: bool = False
    error: str = ""
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft: float = 0.0
    e2el: float = 0.0
    itl: list[float] = field(default_factory=list)
    start: float = 0.0


async def one_request(client: httpx.AsyncClient, model: str, prompt: Prompt, args) -> Result:
    body = {
        "model": model, "prompt": prompt.text, "max_tokens": args.max_tokens, "stream": True,
        "temperature": args.temperature, "stream_options": {"include_usage": True},
    }
    if args.ignore_eos:
        body["ignore_eos"] = True
    res = Result(prompt_tokens=prompt.tokens)
    chunks, usage = 0, None
    st = time.perf_counter()
    res.start = st
    last = st
    try:
        async with client.stream("POST", "/v1/completions", json=body) as r:
            if r.status_code != 200:
                res.error = f"HTTP {r.status_code}: {(await r.aread())[:200]!r}"
                return res
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                ev = json.loads(data)
                if ev.get("usage"):
                    usage = ev["usage"]
                choices = ev.get("choices") or []
                if choices and choices[0].get("text"):
                    now = time.perf_counter()
                    if chunks == 0:
                        res.ttft = now - st
                    else:
                        res.itl.append(now - last)
                    last = now
                    chunks += 1
        res.e2el = time.perf_counter() - st
    except (httpx.HTTPError, json.JSONDecodeError) as e:
        res.error = repr(e)
        return res
    res.output_tokens = int(usage["completion_tokens"]) if usage and "completion_tokens" in usage else chunks
    if usage and "prompt_tokens" in usage:
        res.prompt_tokens = int(usage["prompt_tokens"])
    res.ok = chunks > 0
    if not res.ok:
        res.error = "no text in the stream"
    return res


async def run_benchmark(base: str, model: str, prompts: list[Prompt], concurrency: int, args) -> dict:
    """Send every prompt (Poisson arrivals at args.rate, at most `concurrency` in flight)."""
    rng = random.Random(args.seed + 7919)
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    timeout = httpx.Timeout(args.request_timeout, connect=10.0)
    async with httpx.AsyncClient(base_url=base, timeout=timeout, limits=limits) as client:
        async def limited(p):
            async with sem:
                return await one_request(client, model, p, args)

        tasks = []
        t0 = time.perf_counter()
        for p in prompts:
            tasks.append(asyncio.create_task(limited(p)))
            if math.isfinite(args.rate) and args.rate > 0:
                await asyncio.sleep(rng.expovariate(args.rate))
        results = await asyncio.gather(*tasks)
        duration = time.perf_counter() - t0
    return summarize(results, duration, concurrency, args)


# -- metrics ---------------------------------------------------------------------------------

def pct(values: list[float], p: float) -> float:
    """Percentile with linear interpolation (numpy's default)."""
    if not values:
        return float("nan")
    v = sorted(values)
    k = (len(v) - 1) * p / 100.0
    f, c = math.floor(k), math.ceil(k)
    return v[f] + (v[c] - v[f]) * (k - f)


def stats_ms(values: list[float]) -> dict:
    ms = [x * 1e3 for x in values]
    return {"mean": statistics.fmean(ms) if ms else float("nan"),
            "median": pct(ms, 50), "p99": pct(ms, 99)}


def summarize(results: list[Result], duration: float, concurrency: int, args) -> dict:
    ok = [r for r in results if r.ok]
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens for r in ok)
    tpots = [(r.e2el - r.ttft) / (r.output_tokens - 1) for r in ok if r.output_tokens > 1]
    short = [r.output_tokens for r in ok if r.output_tokens != args.max_tokens]
    errors = [r.error for r in results if not r.ok]
    return {
        "concurrency": concurrency,
        "rate": args.rate,
        "completed": len(ok),
        "failed": len(errors),
        "errors": errors[:5],
        "short_outputs": len(short),
        "duration_s": duration,
        "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
        "request_throughput": len(ok) / duration if duration > 0 else 0.0,
        "output_throughput": out_tokens / duration if duration > 0 else 0.0,
        "total_token_throughput": (in_tokens + out_tokens) / duration if duration > 0 else 0.0,
        "ttft_ms": stats_ms([r.ttft for r in ok]),
        "tpot_ms": stats_ms(tpots),
        "itl_ms": stats_ms([x for r in ok for x in r.itl]),
        "e2el_ms": stats_ms([r.e2el for r in ok]),
        # kept so rounds can be pooled
        "_ttft": [r.ttft for r in ok], "_tpot": tpots, "_itl": [x for r in ok for x in r.itl],
        "_e2el": [r.e2el for r in ok],
    }


def pool(summaries: list[dict]) -> dict:
    """Several rounds as one: durations and tokens add up, latency samples are pooled."""
    dur = sum(s["duration_s"] for s in summaries)
    out = sum(s["total_output_tokens"] for s in summaries)
    inp = sum(s["total_input_tokens"] for s in summaries)
    done = sum(s["completed"] for s in summaries)
    cat = lambda k: [x for s in summaries for x in s[k]]
    return {
        "concurrency": summaries[0]["concurrency"], "rate": summaries[0]["rate"],
        "completed": done, "failed": sum(s["failed"] for s in summaries),
        "errors": [e for s in summaries for e in s["errors"]][:5],
        "short_outputs": sum(s["short_outputs"] for s in summaries),
        "duration_s": dur, "total_input_tokens": inp, "total_output_tokens": out,
        "request_throughput": done / dur, "output_throughput": out / dur,
        "total_token_throughput": (inp + out) / dur,
        "ttft_ms": stats_ms(cat("_ttft")), "tpot_ms": stats_ms(cat("_tpot")),
        "itl_ms": stats_ms(cat("_itl")), "e2el_ms": stats_ms(cat("_e2el")),
        "_ttft": cat("_ttft"), "_tpot": cat("_tpot"), "_itl": cat("_itl"), "_e2el": cat("_e2el"),
        "output_throughput_per_round": [s["output_throughput"] for s in summaries],
    }


def public(s: dict) -> dict:
    return {k: v for k, v in s.items() if not k.startswith("_")}


def print_result(title: str, s: dict) -> None:
    w = 50
    print(f"{' ' + title + ' ':=^{w}}")
    rows = [
        ("Successful requests:", s["completed"]), ("Failed requests:", s["failed"]),
        ("Maximum request concurrency:", s["concurrency"]), ("Request rate (req/s):", s["rate"]),
        ("Benchmark duration (s):", f"{s['duration_s']:.2f}"),
        ("Total input tokens:", s["total_input_tokens"]),
        ("Total generated tokens:", s["total_output_tokens"]),
        ("Request throughput (req/s):", f"{s['request_throughput']:.2f}"),
        ("Output token throughput (tok/s):", f"{s['output_throughput']:.2f}"),
        ("Total Token throughput (tok/s):", f"{s['total_token_throughput']:.2f}"),
    ]
    for k, v in rows:
        print(f"{k:<40}{v!s:<10}")
    for key, name in (("ttft_ms", "Time to First Token"), ("tpot_ms", "Time per Output Token (excl. 1st token)"),
                      ("itl_ms", "Inter-token Latency"), ("e2el_ms", "End-to-end Latency")):
        short = key.split("_")[0].upper()
        print(f"{name:-^{w}}")
        print(f"{'Mean ' + short + ' (ms):':<40}{s[key]['mean']:<10.2f}")
        print(f"{'Median ' + short + ' (ms):':<40}{s[key]['median']:<10.2f}")
        print(f"{'P99 ' + short + ' (ms):':<40}{s[key]['p99']:<10.2f}")
    if s["failed"]:
        print("errors:", *s["errors"], sep="\n  ")
    if s["short_outputs"]:
        print(f"warning: {s['short_outputs']} requests got fewer output tokens than --max-tokens "
              "(does the server honour ignore_eos?)")
    print("=" * w)


# -- servers ---------------------------------------------------------------------------------

def check_loopback(url: str) -> str:
    u = urlparse(url)
    host = u.hostname or ""
    ok = host == "localhost"
    try:
        ok = ok or ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    if not ok or u.scheme != "http":
        sys.exit(f"--url must be http:// on a loopback address (127.0.0.0/8, localhost, [::1]): {url}")
    return url.rstrip("/").removesuffix("/v1")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resolve_model(m: str) -> str:
    if Path(m).is_file():
        return str(Path(m).resolve())
    out = subprocess.run([str(REPO / "scripts" / "fetch-models.sh"), "--path", m],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def llama_server_path(arg: str | None) -> str:
    if arg:
        return arg
    out = subprocess.run([str(REPO / "benches" / "build-llama-cpp.sh")], check=True,
                         capture_output=True, text=True)
    return str(Path(out.stdout.strip().splitlines()[-1]) / "llama-server")


class Managed:
    """A server process on a loopback port; its output goes to a temp log."""

    def __init__(self, name: str, cmd_for_port):
        self.name = name
        self.port = free_port()
        self.cmd = cmd_for_port(self.port)
        self.log = tempfile.NamedTemporaryFile(prefix=f"serve_load-{name}-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.base = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}):\n{self.tail()}")
            try:
                if httpx.get(self.base + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name}: /health not 200 within {timeout} s:\n{self.tail()}")

    def tail(self, n: int = 3000) -> str:
        return Path(self.log.name).read_text(errors="replace")[-n:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        os.unlink(self.log.name)


def model_id(base: str) -> str:
    r = httpx.get(base + "/v1/models", timeout=30).raise_for_status().json()
    return r["data"][0]["id"]


def warm_up(base: str, model: str, args) -> None:
    with httpx.Client(base_url=base, timeout=args.request_timeout) as c:
        for i in range(2):
            c.post("/v1/completions", json={"model": model, "prompt": f"Warm-up {i}: hello",
                                            "max_tokens": 4, "temperature": 0}).raise_for_status()


# -- main ------------------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--url", help="a running server, e.g. http://127.0.0.1:8080 (loopback only)")
    mode.add_argument("--compare", action="store_true",
                      help="start superinfer serve and llama-server and compare them")
    p.add_argument("--num-prompts", type=int, default=64, help="requests per run (default 64)")
    p.add_argument("--rate", type=float, default=float("inf"),
                   help="Poisson arrival rate, requests/s (default inf: all at once)")
    p.add_argument("--concurrency", default="8",
                   help="most requests in flight; a comma list runs each (default 8)")
    p.add_argument("--max-tokens", type=int, default=128, help="output tokens per request (default 128)")
    p.add_argument("--min-input", type=int, default=32, help="shortest prompt, tokens (default 32)")
    p.add_argument("--max-input", type=int, default=1024, help="longest prompt, tokens (default 1024)")
    p.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false",
                   help="let requests stop at end of generation (outputs then vary in length)")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0)")
    p.add_argument("--seed", type=int, default=0, help="prompt and arrival seed (default 0)")
    p.add_argument("--request-timeout", type=float, default=600.0, help="seconds per request")
    p.add_argument("--json-out", help="write every result as JSON here")
    c = p.add_argument_group("--compare")
    c.add_argument("-m", "--model", default="qwen2.5-0.5b",
                   help="GGUF path or scripts/fetch-models.sh name (default qwen2.5-0.5b)")
    c.add_argument("--rounds", type=int, default=3, help="rounds per server, alternated (default 3)")
    c.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1,
                   help="threads of both servers (default: all cores)")
    c.add_argument("-np", "--parallel", dest="parallel", type=int, default=8,
                   help="slots of both servers (default 8)")
    c.add_argument("-c", "--ctx", type=int, default=2048,
                   help="context per sequence (default 2048; llama-server gets -c ctx×np, "
                        "since it splits its context among slots)")
    c.add_argument("--superinfer", default=str(REPO / "target" / "release" / "superinfer"),
                   help="superinfer binary (default target/release/superinfer)")
    c.add_argument("--llama-server", help="llama-server binary (default: from benches/build-llama-cpp.sh)")
    c.add_argument("--only", choices=["superinfer", "llama-server"], help="run just one of the two")
    c.add_argument("--startup-timeout", type=float, default=300.0)
    args = p.parse_args(argv)
    args.concurrency = [int(x) for x in str(args.concurrency).split(",") if x]
    if args.min_input < 1 or args.max_input < args.min_input:
        p.error("need 1 <= --min-input <= --max-input")
    if args.compare and args.ctx < args.max_input + args.max_tokens + 8:
        p.error(f"-c {args.ctx} cannot hold a {args.max_input}-token prompt and {args.max_tokens} tokens")
    if min(args.concurrency) < 1 or args.num_prompts < 1:
        p.error("--concurrency and --num-prompts must be >= 1")
    return args


def run_url(args) -> dict:
    base = check_loopback(args.url)
    model = model_id(base)
    out = {"mode": "url", "url": base, "model": model, "runs": []}
    for conc in args.concurrency:
        prompts = make_prompts(base, args.num_prompts, args.min_input, args.max_input,
                               args.seed + conc, args.request_timeout)
        s = asyncio.run(run_benchmark(base, model, prompts, conc, args))
        print_result(f"{model} @ concurrency {conc}", s)
        out["runs"].append(public(s))
    return out


def run_compare(args) -> dict:
    model_path = resolve_model(args.model)
    names = [args.only] if args.only else ["superinfer", "llama-server"]
    cmds = {
        "superinfer": lambda port: [args.superinfer, "serve", "-m", model_path, "--host", "127.0.0.1",
                                    "--port", str(port), "-np", str(args.parallel), "-c", str(args.ctx),
                                    "-t", str(args.threads)],
    }
    if "llama-server" in names:
        ls = llama_server_path(args.llama_server)
        cmds["llama-server"] = lambda port: [ls, "-m", model_path, "--host", "127.0.0.1",
                                             "--port", str(port), "-np", str(args.parallel),
                                             "-c", str(args.ctx * args.parallel), "-t", str(args.threads),
                                             "-tb", str(args.threads), "-fa", "on"]
    servers: dict[str, Managed] = {}
    try:
        for n in names:
            servers[n] = Managed(n, cmds[n])
        for s in servers.values():
            s.wait_ready(args.startup_timeout)
        models = {n: model_id(s.base) for n, s in servers.items()}
        for n, s in servers.items():
            warm_up(s.base, models[n], args)
        first = servers[names[0]]
        results = {n: {c: [] for c in args.concurrency} for n in names}
        for conc in args.concurrency:
            for rnd in range(args.rounds):
                # fresh prompts each round (none cached from an earlier one), the same for both
                prompts = make_prompts(first.base, args.num_prompts, args.min_input, args.max_input,
                                       args.seed + 1000 * rnd + conc, args.request_timeout)
                order = names if rnd % 2 == 0 else names[::-1]
                for n in order:
                    s = asyncio.run(run_benchmark(servers[n].base, models[n], prompts, conc, args))
                    results[n][conc].append(s)
                    print(f"[c={conc} round {rnd + 1}/{args.rounds}] {n:<13} "
                          f"out {s['output_throughput']:8.2f} tok/s  TTFT p99 {s['ttft_ms']['p99']:9.1f} ms  "
                          f"TPOT median {s['tpot_ms']['median']:7.2f} ms  failed {s['failed']}", flush=True)
    finally:
        for s in servers.values():
            s.stop()

    out = {"mode": "compare", "model": model_path, "threads": args.threads, "parallel": args.parallel,
           "ctx": args.ctx, "num_prompts": args.num_prompts, "max_tokens": args.max_tokens,
           "input_range": [args.min_input, args.max_input], "rate": args.rate, "rounds": args.rounds,
           "results": {}, "ratios": {}}
    print()
    print(f"{'server':<14}{'conc':>5}{'out tok/s':>11}{'req/s':>8}{'TTFT med':>10}{'TTFT p99':>10}"
          f"{'TPOT med':>10}{'ITL p99':>9}{'E2EL p99':>10}{'failed':>8}")
    for conc in args.concurrency:
        pooled = {}
        for n in names:
            p = pool(results[n][conc])
            pooled[n] = p
            out["results"].setdefault(n, {})[str(conc)] = {
                "all_rounds": public(p), "rounds": [public(s) for s in results[n][conc]]}
            print(f"{n:<14}{conc:>5}{p['output_throughput']:>11.2f}{p['request_throughput']:>8.2f}"
                  f"{p['ttft_ms']['median']:>10.1f}{p['ttft_ms']['p99']:>10.1f}{p['tpot_ms']['median']:>10.2f}"
                  f"{p['itl_ms']['p99']:>9.2f}{p['e2el_ms']['p99']:>10.1f}{p['failed']:>8}")
        if len(names) == 2:
            a, b = pooled["superinfer"], pooled["llama-server"]
            ratio = {"output_throughput": a["output_throughput"] / b["output_throughput"],
                     "ttft_p99": a["ttft_ms"]["p99"] / b["ttft_ms"]["p99"],
                     "tpot_median": a["tpot_ms"]["median"] / b["tpot_ms"]["median"]}
            out["ratios"][str(conc)] = ratio
            print(f"{'ours/llama':<14}{conc:>5}{ratio['output_throughput']:>10.2f}x{'':>18}"
                  f"{ratio['ttft_p99']:>9.2f}x{ratio['tpot_median']:>9.2f}x")
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    out = run_url(args) if args.url else run_compare(args)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, indent=2, default=str) + "\n")
        print(f"wrote {args.json_out}")
    failed = sum(r["failed"] for r in out.get("runs", [])) + sum(
        v["all_rounds"]["failed"] for srv in out.get("results", {}).values() for v in srv.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
