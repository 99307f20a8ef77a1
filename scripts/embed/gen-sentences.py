#!/usr/bin/env python3
"""Writes tests/fixtures/embed/sentences.txt: the sentences the embedding test checks, one per
line. Hand-written lines first, then lines composed from small hand-written parts so that
lengths, numbers, punctuation, scripts and code vary. Deterministic (no randomness).

    python3 scripts/embed/gen-sentences.py > tests/fixtures/embed/sentences.txt
"""

HAND = r"""The cat sat on the mat.
A quick brown fox jumps over the lazy dog!
Where is the nearest train station?
I can't believe it's already November.
She said: "Don't touch that button."
Hello, world.
ok
Yes.
Embeddings map sentences to vectors; similar meanings land close together.
The meeting was moved from 3:30 pm to 4:15 pm on Tuesday, 2024-03-12.
Pi is approximately 3.14159, and e is about 2.71828.
Call +1 (555) 010-2030 or e-mail support@example.com before 9 a.m.
Revenue grew 17.5% year over year to $4.2 billion.
The café on Rue de l'Église serves crème brûlée and a naïve soufflé.
Über den Wolken muss die Freiheit wohl grenzenlos sein.
¿Dónde está la biblioteca? ¡Está allí!
Москва — столица России.
Η γλώσσα είναι ελληνική.
東京は日本の首都です。
我喜欢用中文写程序。
北京欢迎你
한국어 문장도 테스트합니다.
مرحبا بالعالم
שלום עולם
नमस्ते दुनिया
The emoji 😀 and the heart ❤️ are not in the vocabulary.
Math: ∑ x_i² ≥ 0, ∀ x ∈ ℝ, and √2 ≈ 1.414.
fn main() { println!("Hello, {}!", name); }
for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }
def f(x): return x ** 2 + 3 * x - 7  # a quadratic
SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name;
<div class="header"><a href="/home">Home</a></div>
{"key": "value", "list": [1, 2, 3], "nested": {"ok": true}}
git commit -m "fix: handle empty input" && git push origin main
The URL is https://example.org/path?query=1&lang=en#section-2.
C:\Users\Public\Documents\report_final_v2.docx
Tabs	between	words	and   several   spaces.
Punctuation!!! Lots of it??? Maybe... or maybe not---who knows.
(Parentheses), [brackets], {braces}, <angles>, and "quotes" with 'apostrophes'.
Hyphenated-words, under_scores, CamelCaseIdentifiers and snake_case_names.
ALL CAPS SENTENCES SHOULD BE LOWERCASED BY THE TOKENIZER.
MiXeD cAsE iS aLsO fInE.
Numbers like 1,000,000 and 0.000001 and 1e-9 and -42.
The year 1969 saw the first moon landing; 2001 was a space odyssey.
Version 3.11.7 fixed bug #4521 in module foo.bar.baz.
antidisestablishmentarianism is a very long word
Pneumonoultramicroscopicsilicovolcanoconiosis is even longer.
supercalifragilisticexpialidocious
The mitochondria is the powerhouse of the cell.
Photosynthesis converts light energy into chemical energy stored in glucose.
Quantum entanglement links the states of two particles regardless of distance.
The stock market fell sharply after the central bank raised interest rates.
A recipe: whisk two eggs, add flour, milk and a pinch of salt, then fry.
The defendant pleaded not guilty to all charges.
Please restart your computer to complete the installation.
The battery is at 15%; connect the charger.
Our flight was delayed by three hours because of fog.
He plays the violin beautifully, although he never took lessons.
Rain is expected tomorrow afternoon in the northern regions.
The library closes at eight on weekdays and at five on Saturdays.
Machine learning models can overfit when trained on small datasets.
Gradient descent updates parameters in the direction of the negative gradient.
Transformers use self-attention to weigh the importance of each token.
What is the capital of Australia? It's Canberra, not Sydney.
I love this product, it works perfectly!
This is the worst movie I have ever seen.
The service was okay, nothing special.
Can you help me reset my password?
How do I convert Celsius to Fahrenheit?
Water boils at 100 °C at sea level.
The speed of light is 299,792,458 m/s.
Mount Everest is 8,849 metres tall.
A dozen is twelve; a gross is a dozen dozens.
Shakespeare wrote Hamlet around 1600.
The Great Wall of China is visible in many photographs.
Dogs are loyal companions.
Cats are independent animals.
A man is playing a guitar.
A woman is slicing an onion.
Two children are playing in the park.
The children play in the garden.
The weather is lovely today.
It is sunny and warm outside.
I need to buy groceries: milk, eggs, bread, and cheese.
The invoice total is €1.234,56 including VAT.
¥500 or £3.50 or ₹250 — prices vary.
50°N 14°E is near Prague.
H₂O and CO₂ are molecules; E = mc².
The ratio was 3:2 and the score ended 21–17.
one two three four five six seven eight nine ten
a b c d e f g h i j k l m n o p q r s t u v w x y z
.
...
?!
-- -- --
"
12345
3.14
[CLS] and [SEP] written as text
[MASK] is a special token in BERT.
Control characters like a bell are dropped.
Zero width joiner here and non‑breaking hyphen.
Ligatures: ﬁ ﬂ and full-width ＡＢＣ１２３.
Accents: àáâãäå çèéêë ìíîï ñòóôõö ùúûü ýÿ.
Nordic: Ærøskøbing, Ålesund, Þórshöfn.
Polish: Zażółć gęślą jaźń.
Turkish: İstanbul, ığdır, şeker.
Vietnamese: Tiếng Việt có dấu.
Thai: ภาษาไทย
Japanese kana: ひらがな カタカナ
Mixed: English 中文 日本語 한국어 русский.""".split("\n")

SUBJECTS = ["The engineer", "My neighbour", "A small robot", "The committee", "Every student",
            "The old lighthouse keeper", "Our team", "The database", "A curious child", "The orchestra"]
VERBS = ["reviewed", "rebuilt", "ignored", "celebrated", "measured", "described", "painted",
         "optimised", "questioned", "translated"]
OBJECTS = ["the quarterly report", "an ancient map", "the new compiler", "three broken chairs",
           "the results of experiment 7", "a poem about winter", "the server logs",
           "a 12-page proposal", "the migration plan", "twenty-one photographs"]
TAILS = ["", " yesterday.", " before lunch!", " in under 5 minutes.", " (again).",
         " — twice.", ", and nobody noticed.", " on 2025-01-31.", "; it took 3.5 hours.",
         ", didn't they?"]

CODE = ["let x = vec![1, 2, 3];", "x.iter().map(|v| v * 2).sum::<i32>()", "if (a && !b) return -1;",
        "print(f'{name:>10}')", "#include <stdio.h>", "const y = await fetch(url);",
        "SELECT * FROM t;", "ls -la | grep .rs", "x += 1  # increment", "return {'a': 1};"]

TOPICS = ["climate change", "the history of Rome", "protein folding", "jazz improvisation",
          "database indexing", "marathon training", "medieval castles", "solar panels",
          "coffee brewing", "black holes", "tax law", "vegan baking"]


def composed():
    out = []
    for i in range(100):
        s, v, o, t = SUBJECTS[i % 10], VERBS[(i * 3) % 10], OBJECTS[(i * 7) % 10], TAILS[(i // 10) % 10]
        out.append(f"{s} {v} {o}{t}" if t else f"{s} {v} {o}")
    for i in range(40):
        a, b = CODE[i % 10], CODE[(i * 3 + 1) % 10]
        out.append(f"Snippet {i}: {a} then {b}")
    for i, topic in enumerate(TOPICS * 3):
        n = 1 + (i % 4)
        out.append(" ".join([f"Paragraph {i} is about {topic}."] +
                            [f"Sentence {k} adds detail number {k * 17 + i} about {topic}, with some "
                             f"commas, numbers like {k}.{i} and words." for k in range(n)]))
    for i in range(20):
        out.append(f"Q{i}: what is {i} × {i + 3}? A: {i * (i + 3)}.")
    # long inputs: one beyond sentence-transformers' 256 tokens (truncated the same way)
    out.append(" ".join(f"word{k} and more text" for k in range(80)))
    out.append("Long sentence: " + ", ".join(f"item number {k}" for k in range(40)) + ".")
    return out


if __name__ == "__main__":
    lines = [l for l in HAND if l.strip()] + composed()
    print("\n".join(lines))
