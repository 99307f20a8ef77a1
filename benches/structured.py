#!/usr/bin/env python3
"""Structured output: decode speed with a JSON schema against the same requests without one,
and against llama-server with the same `json_schema`.

The schemas are real-world shapes in benches/structured/*.json (`name`, `prompt`, `schema`:
nested objects, arrays with bounds, enums, anyOf, string patterns, numbers with ranges). Both
servers load the same GGUF with the same threads and one slot; each round sends, for every
schema, in alternating order:

  ours-schema    superinfer, `response_format: {"type": "json_schema", ...}`
  ours-free      superinfer, the same prompt with no constraint
  llama-schema   llama-server, the same `response_format`
  llama-free     llama-server, no constraint

greedy (temperature 0), at most -n tokens. Reported per variant, median over rounds and
schemas: decode tokens/s (the servers' own `timings.predicted_per_second`), output tokens,
time to first token, and for the constrained variants whether every output parsed as JSON and
validated (with the `jsonschema` package when it is installed; an answer cut at -n tokens is
counted apart, not judged). A schema a server refuses (ours: a keyword it cannot enforce) is
reported and left out for both. Where our server reports the
constraint's per-token mask times (`timings.mask_ms`: median, p99, max) and its compile time
(`timings.grammar_ms`), they are printed too. The first request of each schema pays the
grammar compile (time to first mask): it is reported apart, and the rounds after it measure
the cached grammar.

    benches/structured.py [-m qwen2.5-1.5b] [--threads 2] [-n 192] [--rounds 3]
                          [--only superinfer] [--json-out FILE]

Run timed benchmarks on a quiet machine (`flock /tmp/superinfer-cpu.lock ...`). llama.cpp
from benches/build-llama-cpp.sh; our binary from `cargo build --release -p superinfer-cli`.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import Managed, llama_server_path, resolve_model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "benches" / "structured"


def load_cases(names: list[str] | None) -> list[dict]:
    cases = [json.loads(p.read_text()) for p in sorted(SCHEMAS.glob("*.json"))]
    if names:
        cases = [c for c in cases if c["name"] in names]
    if not cases:
        sys.exit(f"no schemas in {SCHEMAS} (or none named {names})")
    return cases


def validator():
    try:
        import jsonschema  # type: ignore
    except ImportError:
        return None
    return lambda inst, schema: jsonschema.validate(inst, schema)


def request(base: str, case: dict, constrained: bool, args) -> dict:
    body = {
        "messages": [
            {"role": "system", "content": "You answer with JSON only."},
            {"role": "user", "content": case["prompt"]},
        ],
        "max_tokens": args.n,
        "temperature": 0,
        "seed": 1,
    }
    if constrained:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": case["name"], "schema": case["schema"], "strict": True},
        }
    t0 = time.perf_counter()
    ttft = None
    text = []
    final = None
    finish = None
    with httpx.Client(base_url=base, timeout=args.request_timeout) as c:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
        with c.stream("POST", "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                r.read()
                raise RuntimeError(f"{base}: HTTP {r.status_code}: {r.text[:500]}")
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                for ch in chunk.get("choices") or []:
                    finish = ch.get("finish_reason") or finish
                    piece = (ch.get("delta") or {}).get("content") or ""
                    if piece and ttft is None:
                        ttft = time.perf_counter() - t0
                    text.append(piece)
                if chunk.get("usage"):
                    final = chunk
    final = final or {}
    timings = final.get("timings") or {}
    usage = final.get("usage") or {}
    return {
        "text": "".join(text),
        "finish": finish,
        "tps": timings.get("predicted_per_second"),
        "tokens": usage.get("completion_tokens", timings.get("predicted_n")),
        "ttft_ms": 1e3 * ttft if ttft is not None else None,
        "mask_ms": timings.get("mask_ms"),
        "grammar_ms": timings.get("grammar_ms"),
    }


def check(out: dict, case: dict, validate) -> str | None:
    if out.get("finish") == "length":
        return None  # cut at -n: not judged (counted apart as truncated)
    try:
        inst = json.loads(out["text"])
    except json.JSONDecodeError as e:
        return f"not JSON ({e}): {out['text'][:120]!r}"
    if validate:
        try:
            validate(inst, case["schema"])
        except Exception as e:  # jsonschema.ValidationError
            return f"invalid: {str(e).splitlines()[0]}"
    return None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default="qwen2.5-1.5b")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-n", type=int, default=192, help="max tokens per answer")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--schemas", help="comma-separated schema names (default: all)")
    ap.add_argument("--only", choices=["superinfer", "llama-server"])
    ap.add_argument("--superinfer", default=str(ROOT / "target" / "release" / "superinfer"))
    ap.add_argument("--llama-server")
    ap.add_argument("--startup-timeout", type=float, default=180)
    ap.add_argument("--request-timeout", type=float, default=600)
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)

    cases = load_cases(args.schemas.split(",") if args.schemas else None)
    model = resolve_model(args.model)
    validate = validator()
    if validate is None:
        print("note: `jsonschema` is not installed: outputs are checked to parse, not validated",
              file=sys.stderr)
    names = [args.only] if args.only else ["superinfer", "llama-server"]
    cmds = {
        "superinfer": lambda port: [args.superinfer, "serve", "-m", model, "--host", "127.0.0.1",
                                    "--port", str(port), "-np", "1", "-c", str(args.ctx),
                                    "-t", str(args.threads)],
    }
    if "llama-server" in names:
        ls = llama_server_path(args.llama_server)
        cmds["llama-server"] = lambda port: [ls, "-m", model, "--host", "127.0.0.1", "--port", str(port),
                                             "-np", "1", "-c", str(args.ctx), "-t", str(args.threads),
                                             "-tb", str(args.threads), "-fa", "on", "--jinja"]
    servers: dict[str, Managed] = {}
    variants = [(n, c) for n in names for c in (True, False)]
    results: dict[str, list[dict]] = {f"{n}-{'schema' if c else 'free'}": [] for n, c in variants}
    first: dict[str, list[dict]] = {n: [] for n in names}
    failures: list[str] = []
    try:
        for n in names:
            servers[n] = Managed(n, cmds[n])
        for s in servers.values():
            s.wait_ready(args.startup_timeout)
        # the first constrained request of each schema: compile + first mask. A schema a
        # server refuses (ours answers 400 for a keyword it cannot enforce, where llama-server
        # drops it silently) is reported and left out for both, so they run the same set.
        refused = set()
        for n in names:
            for case in cases:
                try:
                    first[n].append(request(servers[n].base, case, True, args))
                except RuntimeError as e:
                    if "HTTP 4" not in str(e):
                        raise
                    print(f"{n} refuses schema {case['name']}: {str(e)[:300]}", flush=True)
                    refused.add(case["name"])
        cases = [c for c in cases if c["name"] not in refused]
        if not cases:
            sys.exit("every schema was refused")
        for rnd in range(args.rounds):
            order = variants if rnd % 2 == 0 else variants[::-1]
            for case in cases:
                for n, constrained in order:
                    out = request(servers[n].base, case, constrained, args)
                    key = f"{n}-{'schema' if constrained else 'free'}"
                    out["case"] = case["name"]
                    if constrained:
                        err = check(out, case, validate)
                        if err:
                            failures.append(f"{key} {case['name']}: {err}")
                        if out.get("finish") != "length":
                            out["valid"] = err is None
                    results[key].append(out)
                    print(f"[round {rnd + 1}/{args.rounds}] {key:<20} {case['name']:<10} "
                          f"{out['tokens'] or 0:>4} tok  {out['tps'] or 0:7.2f} tok/s", flush=True)
    finally:
        for s in servers.values():
            s.stop()

    print()
    print("mask ms: median of the requests' medians / median and max of their p99s / max")
    print(f"{'variant':<20}{'tok/s':>8}{'tokens':>8}{'TTFT ms':>9}{'valid':>8}{'cut':>5}"
          f"{'mask p50/p99/p99max/max':>28}")
    summary = {}
    for key, outs in results.items():
        tps = med(o["tps"] for o in outs)
        valid = [o.get("valid") for o in outs if "valid" in o]
        cut = sum(1 for o in outs if o.get("finish") == "length")
        masks = [o["mask_ms"] for o in outs if o.get("mask_ms")]
        mask = ""
        if masks:
            mask = (f"{med(m['median'] for m in masks):.3f}/{med(m['p99'] for m in masks):.3f}/"
                    f"{max(m['p99'] for m in masks):.3f}/{max(m['max'] for m in masks):.3f}")
        summary[key] = {"tps": tps, "tokens": med(o["tokens"] for o in outs),
                        "ttft_ms": med(o["ttft_ms"] for o in outs),
                        "valid": f"{sum(valid)}/{len(valid)}" if valid else "-", "cut": cut,
                        "mask_ms": mask}
        s = summary[key]
        print(f"{key:<20}{s['tps']:>8.2f}{s['tokens']:>8.0f}{s['ttft_ms']:>9.1f}{s['valid']:>8}"
              f"{cut:>5}{mask:>28}")
    for n in names:
        ttft = med(o["ttft_ms"] for o in first[n])
        grammar = med(o["grammar_ms"] for o in first[n])
        print(f"{n}: first request per schema (grammar compile + first mask): TTFT median {ttft:.1f} ms"
              + (f", grammar {grammar:.1f} ms" if grammar == grammar else ""))
    ratios = {}
    if "superinfer" in names:
        ratios["schema_over_free"] = summary["superinfer-schema"]["tps"] / summary["superinfer-free"]["tps"]
        print(f"ours: schema / free tok/s = {ratios['schema_over_free']:.3f}")
    if len(names) == 2:
        ratios["ours_over_llama_schema"] = (summary["superinfer-schema"]["tps"]
                                            / summary["llama-server-schema"]["tps"])
        print(f"schema: ours / llama-server tok/s = {ratios['ours_over_llama_schema']:.2f}x")
    for f in failures:
        print(f"FAILED {f}", file=sys.stderr)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"model": model, "threads": args.threads, "n": args.n,
                                                   "rounds": args.rounds, "summary": summary,
                                                   "ratios": ratios, "failures": failures,
                                                   "results": results, "first": first}, indent=1))
    return 1 if any(f.startswith("superinfer") for f in failures) else 0


if __name__ == "__main__":
    sys.exit(main())
