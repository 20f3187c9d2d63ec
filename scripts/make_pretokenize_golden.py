#!/usr/bin/env python3
"""Writes tests/data/pretokenize_golden.txt: the chunks GPT-2's pre-tokenizer regex makes of a
set of tricky inputs, as the reference for data/pretokenize.cpp.

GPT-2 (openai/gpt-2 encoder.py) splits text with
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
loom works on bytes and counts every byte >= 0x80 as a letter (so UTF-8 characters never
split); with \\p{L}, \\p{N} and \\s spelled out as those byte classes, Python's own `re` runs
the same expression over the input decoded as Latin-1 (one character per byte).

Each output line is "<input as hex> <chunk lengths, comma-separated>" ("-" for no chunks).
Usage: /usr/bin/python3 scripts/make_pretokenize_golden.py
"""
import os
import random
import re

LETTER = r"A-Za-z\x80-\xff"
DIGIT = r"0-9"
SPACE = r" \t\n\x0b\x0c\r"
PATTERN = re.compile(
    rf"""'s|'t|'re|'ve|'m|'ll|'d| ?[{LETTER}]+| ?[{DIGIT}]+| ?[^{SPACE}{LETTER}{DIGIT}]+"""
    rf"""|[{SPACE}]+(?![^{SPACE}])|[{SPACE}]+""")

CASES = [
    b"",
    b"Hello world",
    b"Hello  world!  ",
    b"It's a dog's life; we'll see, they've said, I'm sure you'd agree.",
    b"'s 'S 'tis don't DON'T rock'n'roll ''s",
    b"x = 3.14159 + 42*y; // 2024-01-01",
    b"line one\nline two\n\n  indented\n\t\ttabbed\r\nwindows\r\n",
    b"   leading spaces and trailing   ",
    b"\n\n\n",
    b"a\n b\n  c",
    b"?!... --- ***  ((()))  $$$100",
    "Grüße, 世界! Привет мир 🙂 café-au-lait".encode("utf-8"),
    b"\xff\xfe invalid \x80\x81 utf8 \xc0\xaf \xed\xa0\x80 end\xe2\x82",
    b"\x00\x01 control\x7f bytes\x1b[0m",
]


def random_cases(count, seed=1234):
    """Inputs drawn from an alphabet full of boundary cases (spaces, quotes, digits, bytes)."""
    rng = random.Random(seed)
    alphabet = [b" ", b"  ", b"\n", b"\t", b"'", b"s", b"t", b"re", b"ll", b"a", b"Z", b"7",
                b"!", b".", b"-", b"\xc3\xa9", b"\xff", b"\x80", b"\r\n", b"%"]
    return [b"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
            for _ in range(count)]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_path = os.path.join(root, "tests", "data", "pretokenize_golden.txt")
    with open(out_path, "w") as out:
        for case in CASES + random_cases(200):
            chunks = PATTERN.findall(case.decode("latin-1"))
            assert "".join(chunks) == case.decode("latin-1")
            lengths = ",".join(str(len(c)) for c in chunks) or "-"
            out.write(f"{case.hex() or '-'} {lengths}\n")
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
