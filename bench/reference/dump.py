"""The flags that shaped a dump of bench/dump_data (loom's data of a run, for the translation and
bert twins), taken by the twin too so that scripts/reproduce.sh can hand one list of flags to
loom's trainer, dump_data and the twin: each defaults to the dump's and, when given, must equal
the value dump_data recorded in the dump's metadata under the flag's name ("--max-tokens").
No torch here: train.py declares the flags before torch loads.
"""
import sys

TRANSLATION = [("--dict", str), ("--pairs", str), ("--max-words", int), ("--bpe-vocab", int),
               ("--max-tokens", int), ("--valid-fraction", float), ("--test-fraction", float),
               ("--model", str), ("--d-model", int), ("--n-head", int), ("--layers", int),
               ("--d-ff", int), ("--norm-first", bool)]
BERT = [("--fortunes", str), ("--vocab-size", int), ("--max-seq-len", int),
        ("--val-fraction", float)]


def add_flags(p, flags):
    """Each flag of `flags`, absent (None) unless given; --norm-first is a switch."""
    for flag, kind in flags:
        if kind is bool:
            p.add_argument(flag, action="store_true", default=None, help="must be the dump's")
        else:
            p.add_argument(flag, type=kind, default=None, help="must be the dump's")


def check_flags(args, meta, flags, task):
    """Exits naming the first flag given with another value than the dump was made with."""
    for flag, kind in flags:
        given = getattr(args, flag[2:].replace("-", "_"))
        dumped = meta[flag] == "1" if kind is bool else kind(meta[flag])
        if given is not None and given != dumped:
            sys.exit(f"train.py {task}: {flag} {given}, but the dump in {args.data_dir} was "
                     f"made with {flag} {meta[flag]}: dump again with the same flags")
