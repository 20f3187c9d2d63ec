#!/usr/bin/python3
"""Golden WordPiece token ids for tests/data/test_wordpiece.cpp.

The reference below is google-research/bert's tokenization.py (FullTokenizer = BasicTokenizer +
WordpieceTokenizer) written out again with its exact semantics, on Python's unicodedata:
convert_to_unicode (bytes decoded as UTF-8, errors "ignore"), _clean_text, _tokenize_chinese_chars,
whitespace_tokenize (str.split), str.lower + _run_strip_accents (NFD, Mn removed),
_run_split_on_punc, then greedy longest-match-first WordPiece with max_input_chars_per_word 100
(Hugging Face's value; Google's is 200).

Writes next to this script:
    wordpiece_vocab.txt   the small vocabulary (one token a line, id = line number)
    wordpiece_golden.txt  one case a line: <lower_case 0|1> TAB <input as hex> TAB <ids, spaces>
    wordpiece_lower_golden.txt  every code point str.lower changes (Python 3.11, Unicode 14):
                          <code point hex> TAB <BasicTokenizer tokens with lower_case, UTF-8 hex>
Run: /usr/bin/python3 tests/golden/gen_wordpiece.py   (from anywhere)
"""

import os
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_CHARS = 100


def is_whitespace(ch):
    if ch in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(ch) == "Zs"


def is_control(ch):
    if ch in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(ch) in ("Cc", "Cf")


def is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_chinese_char(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def clean_text(text):
    out = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or is_control(ch):
            continue
        out.append(" " if is_whitespace(ch) else ch)
    return "".join(out)


def tokenize_chinese_chars(text):
    return "".join(" " + ch + " " if is_chinese_char(ord(ch)) else ch for ch in text)


def strip_accents(text):
    return "".join(c for c in unicodedata.normalize("NFD", text)
                   if unicodedata.category(c) != "Mn")


def split_on_punc(text):
    output, start_new = [], True
    for ch in text:
        if is_punctuation(ch):
            output.append([ch])
            start_new = True
        else:
            if start_new:
                output.append([])
            start_new = False
            output[-1].append(ch)
    return ["".join(x) for x in output]


def basic_tokenize(data, lower_case):
    text = data.decode("utf-8", "ignore")
    text = tokenize_chinese_chars(clean_text(text))
    split_tokens = []
    for token in text.strip().split():
        if lower_case:
            token = strip_accents(token.lower())
        split_tokens.extend(split_on_punc(token))
    return " ".join(split_tokens).strip().split()


def wordpiece(token, vocab):
    chars = list(token)
    if len(chars) > MAX_CHARS:
        return ["[UNK]"]
    start, pieces = 0, []
    while start < len(chars):
        end, cur = len(chars), None
        while start < end:
            sub = "".join(chars[start:end])
            if start > 0:
                sub = "##" + sub
            if sub in vocab:
                cur = sub
                break
            end -= 1
        if cur is None:
            return ["[UNK]"]
        pieces.append(cur)
        start = end
    return pieces


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB += list("abcdefghijklmnopqrstuvwxyz0123456789")
VOCAB += ["##" + c for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
VOCAB += list(".,!?;:'\"()[]{}-_/\\@#$%^&*+=<>`~|") + ["\u2014", "\u00bf", "\u3002", "\u00ab"]
VOCAB += ["the", "meaning", "of", "life", "is", "un", "##aff", "##able", "##ing", "##ed", "run",
          "cafe", "naive", "resume", "hello", "world", "straße", "strasse", "ὀδυσσεύς",
          "οδυσσευς", "οδος", "ΟΔΟΣ", "İstanbul", "istanbul", "ı", "Hello", "World", "The",
          "Café", "CAFÉ", "naïve", "日", "本", "語", "中", "文", "한", "##국", "##어", "カ", "##タ",
          "##カ", "##ナ", "ﬁ", "##ﬁ", "é", "##é", "ß", "ǅ", "ǆ", "##xx", "##xxx"]
assert len(set(VOCAB)) == len(VOCAB)

CASES = [
    b"",
    b"   \t\n ",
    b"The meaning of life is unaffable.",
    b"Hello, World!!! ... ?!?!",
    b"UNAFFABLE running runs",
    "Café naïve résumé CAFÉ".encode(),
    "Ὀδυσσεύς ΟΔΟΣ οδος".encode(),                                  # Greek accents, final sigma
    "İstanbul ISTANBUL ı İ".encode(),                              # U+0130: Python's lower
    "Straße STRASSE ß ẞ".encode(),
    "日本語のテキスト 中文, 한국어 カタカナ".encode(),                     # CJK vs Hangul/Kana
    "ﬁne ﬁ ǅ Ǆ ǆ".encode(),                                         # ligatures, titlecase
    b"tab\tnew\nline\rcr\x0bvt\x0cff end",
    "nbsp\u00a0here thin\u2009space ideo\u3000graphic line\u2028sep para\u2029sep".encode(),
    "zero\u200bwidth soft\u00adhyphen bom\ufeffmark rtl\u200fmark".encode(),
    b"nul\x00byte bell\x07 esc\x1b[0m del\x7f unit\x1fsep",
    "repl\ufffdchar \u0085nel".encode(),
    b"invalid \xff\xfe bytes \xc3( \xe2\x82 cut \xed\xa0\x80surrogate \xc0\xafoverlong end\xe2",
    b"x" * 100,
    b"x" * 101,
    b"a" + b"x" * 99,
    ("é" * 100 + " " + "é" * 101).encode(),
    b"$5 ^caret `tick` ~tilde |pipe| @at #hash",
    "\u00bfQu\u00e9? \u00abguillemets\u00bb em\u2014dash \u2018quotes\u2019 \u201cdouble\u201d".encode(),
    b"emoji \xf0\x9f\x98\x80 smile \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd thumbs",
    "combining e\u0301 a\u0308 alone \u0301 \u0301\u0302 x\u20dd".encode(),
    b"[MASK] [CLS] [SEP] [UNK] are plain text",
    b"don't can't it's o'clock",
    b"runrunrun xxxx xxxxxx abc123def",
    b"   leading and trailing   ",
    "Ångström ØRESUND Łódź Ærø".encode(),
    "𠀀 𪜀 丽 豈 \U0002f800".encode(),                                  # extension B, compat blocks
]


def main():
    vocab = {t: i for i, t in enumerate(VOCAB)}
    with open(os.path.join(HERE, "wordpiece_vocab.txt"), "w", encoding="utf-8") as f:
        for t in VOCAB:
            f.write(t + "\n")
    lines = []
    for lower in (1, 0):
        for data in CASES:
            ids = [vocab[p] for w in basic_tokenize(data, lower) for p in wordpiece(w, vocab)]
            lines.append(f"{lower}\t{data.hex()}\t{' '.join(map(str, ids))}")
    with open(os.path.join(HERE, "wordpiece_golden.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    # Every code point that str.lower changes, through BasicTokenizer with lower_case (lower, NFD,
    # Mn removed, punctuation split): <code point hex> TAB <tokens as UTF-8 hex, spaces>.
    lower = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or chr(cp).lower() == chr(cp):
            continue
        tokens = basic_tokenize(chr(cp).encode(), True)
        lower.append(f"{cp:x}\t{' '.join(t.encode().hex() for t in tokens)}")
    with open(os.path.join(HERE, "wordpiece_lower_golden.txt"), "w") as f:
        f.write("\n".join(lower) + "\n")
    print(f"wrote {len(VOCAB)} tokens, {len(lines)} cases and {len(lower)} lower-cased code points "
          f"to {HERE}")


if __name__ == "__main__":
    main()
