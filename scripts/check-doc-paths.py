#!/usr/bin/env python3
"""Checks that every file or folder a document names exists in the repository.

    scripts/check-doc-paths.py [DOC.md ...]     (default: docs/ARCHITECTURE.md)

A name is a `code span` that looks like a path: it ends in a source or document extension
(.rs .md .sh .py .mjs .js .ts .toml .c .json .txt) or in `/`. Documents name files relative
to the section they are in (`model/forward.rs` inside core), so a name passes when some
tracked file (or folder, for a trailing `/`) ends with it at a path boundary. A name may list
alternatives (`a.rs`, `b.rs` are separate spans). Exit status 1 when one does not exist.
"""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXT = (".rs", ".md", ".sh", ".py", ".mjs", ".js", ".ts", ".toml", ".c", ".json", ".txt")
SPAN = re.compile(r"`([^`\s]+)`")
# a path in plain text (a code block's listing): words joined by `/`, ending in an extension
PLAIN = re.compile(r"(?<![\w`/.-])((?:[\w.-]+/)*[\w-]+\.(?:rs|md|sh|py|mjs|toml))(?![\w`])")
# names of files that are made, not tracked (built packages, caches) or live outside the repo
MADE = {"superinfer.wasm", "superinfer-threads.wasm", "superinfer-relaxed.wasm",
        "superinfer-relaxed-threads.wasm", "variants.js",
        # the files of a Hugging Face model directory, and llama.cpp's own converter
        "config.json", "tokenizer.json", "vocab.txt", "modules.json", "1_Pooling/config.json",
        "sentence_bert_config.json", "convert_lora_to_gguf.py", "convert_hf_to_gguf.py"}


def tracked():
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    files = [f for f in out.stdout.decode().split("\0") if f]
    dirs = set()
    for f in files:
        parts = f.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]) + "/")
    return files, dirs


def exists(name, files, dirs):
    name = name.lstrip("./")
    pool = dirs if name.endswith("/") else files
    return any(p == name or p.endswith("/" + name) for p in pool)


def main():
    docs = sys.argv[1:] or ["docs/ARCHITECTURE.md"]
    files, dirs = tracked()
    bad = 0
    for doc in docs:
        text = (ROOT / doc).read_text()
        for lineno, line in enumerate(text.splitlines(), 1):
            for name in SPAN.findall(line) + PLAIN.findall(SPAN.sub("", line)):
                name = name.rstrip(",.;:)")
                if "://" in name or name.startswith("~") or name.startswith("$") or "*" in name:
                    continue
                if not (name.endswith(EXT) or (name.endswith("/") and len(name) > 1)):
                    continue
                if name in MADE or exists(name, files, dirs):
                    continue
                print(f"{doc}:{lineno}: `{name}` names no file or folder of the repository")
                bad += 1
    if bad:
        print(f"{bad} missing path(s): fix the document (or the name)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
