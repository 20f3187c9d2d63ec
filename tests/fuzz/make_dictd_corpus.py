#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_dictd (tests/fuzz/corpus/dictd/): each file is a dictd index,
one NUL byte, then the body (plain or gzip). "valid_*" must be read, "bad_*" rejected with
loom::Error. Plain Python, no dependencies: python3 tests/fuzz/make_dictd_corpus.py"""
import gzip
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "dictd")
DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64(n):
    s = ""
    while True:
        s = DIGITS[n % 64] + s
        n //= 64
        if n == 0:
            return s


DEFS = [
    ("00databaseinfo", "00-database-info\nA test dictionary\n"),
    ("slope", "slope /sl\u02c8\u0259\u028ap/\nAbdachung <fem>, Schr\u00e4ge <fem>\n"
              "      \"side slope of a dam\"  - seitliche Abdachung eines Damms\n"
              "   Synonym: {talus}\n\n"),
    ("arrangement", "arrangement /x/\nVereinbarung <fem> [econ.]\n"
                    "      \"by arrangement\"  - nach Vereinbarung; laut Absprache\n\n"),
    ("odd", "odd [unclosed <also\n\"\"  - \n      \"x\"  - \n"),
]


def dictionary():
    body, index, at = "", "", 0
    for word, text in DEFS:
        raw = text.encode()
        index += f"{word}\t{b64(at)}\t{b64(len(raw))}\n"
        body += text
        at += len(raw)
    return index.encode(), body.encode()


def main():
    os.makedirs(OUT, exist_ok=True)
    index, body = dictionary()
    gz = gzip.compress(body, mtime=0)
    cases = {
        "valid_plain": index + b"\0" + body,
        "valid_gzip": index + b"\0" + gz,
        "valid_empty": b"",
        "valid_index_with_original_headword": b"w\tA\tB\tW\n\0" + b"x",
        "bad_truncated_body": index + b"\0" + body[:-5],
        "bad_truncated_gzip": index + b"\0" + gz[: len(gz) // 2],
        "bad_field_count": b"word\tA\n\0" + body,
        "bad_digit": b"word\tA*\tB\n\0" + body,
        "bad_offset_past_end": b"word\t" + b64(len(body) + 1).encode() + b"\tA\n\0" + body,
        "bad_length_overflow": b"w\tB\t" + b64((1 << 63) - 1).encode() + b"\n\0" + body,
        "bad_too_many_digits": b"w\tAAAAAAAAAAAA\tA\n\0" + body,
        "bad_gzip_bomb": index + b"\0" + gzip.compress(b"\0" * (2 << 20), mtime=0),
    }
    for name, data in cases.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(cases)} files to {OUT}")


if __name__ == "__main__":
    main()
