#!/usr/bin/env python3
"""Compares `superinfer tokenize` with llama.cpp's `llama-tokenize` on a varied corpus.

    scripts/compare-tokenize.py --llama-bin DIR --superinfer target/release/superinfer MODEL...

DIR holds llama-tokenize (built from the llama-cpp-python 0.3.36 sources). Every text is
tokenized with and without special-token parsing; mismatches are printed with both id lists.
Exit status 1 if any text differs.
"""
import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def corpus():
    texts = [
        # (llama-tokenize refuses an empty prompt, so "" is covered by the unit tests only)
        " ", "  ", "\n", "\t", "a", "Hello world", " Hello", "Hello  world", "hello\n\nworld\n",
        "I'm sure they'll say we've done it, but you'd've known. DON'T SHOUT. 'tis 'S 'T",
        "1 12 123 1234 12345 123456 3.14159 -0.5e-10 0x1F 1,000,000 1e9 ½ ² ³ ٣ ५",
        "Café naïve façade — “quotes” and ‘single’ … résumé Ångström",
        "日本語のテキスト 中文字符 한국어 텍스트 ไทย हिन्दी বাংলা العربية עברית Ελληνικά русский",
        "😀🚀👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ ✔︎ 🇫🇷",
        "e\u0301 a\u0308 \u200b zero\u200bwidth \u00a0nbsp\u00a0 \u3000ideographic\u3000 \u2028\u2029 \x0b\x0c",
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
        "<start_of_turn>user\nhello<end_of_turn>\n<start_of_turn>model\n",
        "<bos><eos><pad><unk><mask>[multimodal]<h1>Title</h1><table><tr><td>x</td></tr></table>",
        "<|endoftext|><|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
        "    def forward(self, x):\n        return self.proj(F.gelu(self.fc(x)))  # residual   ",
        "fn main() {\n\tlet v: Vec<u32> = (0..10).collect();\n\tprintln!(\"{:?}\", v);\n}\n",
        "x=1;y=2\r\nz = x+y\r\n\r\n",
        "                  many spaces                   ",
        "\n\n\n\n\n\n\n\n",
        "\t\t\t\ttabs\t\t",
        "a  \n  b \n\n  c\t \n",
        "!!!??? ... --- ___ +++ === ### @@@ $$$ %%% ^^^ &&& *** ((( ))) [[[ ]]] {{{ }}}",
        "https://example.com/path?query=1&x=y#frag user@example.com C:\\Windows\\path",
        "ALLCAPS lowercase MiXeD CamelCaseWord snake_case_word kebab-case-word",
        "The quick brown fox jumps over the lazy dog. " * 8,
    ]
    gpl = ROOT / "tests/fixtures/texts/gpl-3.txt"
    if gpl.exists():
        paras = gpl.read_text().split("\n\n")
        texts += paras[:40]
    for p in sorted((ROOT / "core/src").rglob("*.rs"))[:15]:
        texts.append(p.read_text()[:1500])
    rng = random.Random(7)
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
              (0xE00, 0xE7F), (0x3040, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0x1F300, 0x1F64F),
              (0x2000, 0x206F), (0x300, 0x36F)]
    for _ in range(60):
        n = rng.randint(1, 40)
        s = []
        for _ in range(n):
            lo, hi = rng.choice(ranges)
            s.append(chr(rng.randint(lo, hi)))
            if rng.random() < 0.2:
                s.append(rng.choice([" ", "  ", "\n", "\t", "'s", "1", "123", "<|im_end|>", "<end_of_turn>"]))
        texts.append("".join(s))
    return texts


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return "ERROR: " + out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "ERROR"
    line = [l for l in out.stdout.splitlines() if l.strip().startswith("[")]
    return json.loads(line[-1]) if line else "NO OUTPUT"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-bin", required=True)
    ap.add_argument("--superinfer", default=str(ROOT / "target/release/superinfer"))
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    bad = total = 0
    for model in a.models:
        for text in corpus():
            for special in (True, False):
                llama = [f"{a.llama_bin}/llama-tokenize", "-m", model, "-p", text, "--ids", "--log-disable"]
                ours = [a.superinfer, "tokenize", "-m", model, "-p", text]
                if not special:
                    llama.append("--no-parse-special")
                    ours.append("--no-parse-special")
                want, got = run(llama), run(ours)
                total += 1
                if want != got:
                    bad += 1
                    print(f"MISMATCH {Path(model).name} special={special} text={text[:80]!r}\n  llama.cpp {want}\n  ours      {got}")
    print(f"{total - bad} of {total} tokenizations identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
