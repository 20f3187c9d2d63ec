#!/usr/bin/python3
"""Prints the OPENBLAS_CORETYPE a measuring script should set on this machine, or nothing.

    /usr/bin/python3 scripts/openblas_core.py             # e.g. "SkylakeX", or an empty line
    /usr/bin/python3 scripts/openblas_core.py --narrower  # see narrower_than_cpu below

OpenBLAS (Debian's is built for every x86 family) picks its kernels by CPU model when it loads.
A model newer than the library, such as the Intel Xeon of family 6 model 207 (Emerald Rapids)
with Debian 12's OpenBLAS 0.3.21, is not in its table, and it falls back to its oldest kernels,
"Prescott" (SSE3): its sgemm then runs at 60 GFLOP/s on two cores where its AVX-512 kernels run
at 300. That would make the sgemm peak of a sitting (bench_sitting.py) loom's own product, and
PyTorch's side, which calls the same OpenBLAS (`libblas.so.3`), several times slower than the
machine allows. So where OpenBLAS has fallen back and the CPU's flags say which kernels it
can run, this prints the family to name in OPENBLAS_CORETYPE (which OpenBLAS reads when it
loads): SkylakeX with AVX-512 (F, CD, BW, DQ, VL), Haswell with AVX2 and FMA. It prints nothing
where the variable is already set (the caller's choice stands), where OpenBLAS knew the CPU, or
where the library cannot be loaded.
"""
import ctypes
import os


def openblas_corename():
    """The kernel family OpenBLAS chose in this process, or None without the library."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
    except OSError:
        return None
    lib.openblas_get_corename.restype = ctypes.c_char_p
    return lib.openblas_get_corename().decode()


def cpu_flags():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            line = next((l for l in f if l.startswith("flags")), "")
    except OSError:
        return set()
    return set(line.split(":", 1)[-1].split())


def widest_coretype():
    """The family of OpenBLAS's widest kernels this CPU runs: SkylakeX, Haswell or ""."""
    flags = cpu_flags()
    if {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return ""


def suggested_coretype():
    """The family for OPENBLAS_CORETYPE where OpenBLAS fell back to Prescott, else ""."""
    if os.environ.get("OPENBLAS_CORETYPE") or openblas_corename() != "Prescott":
        return ""
    return widest_coretype()


# OpenBLAS's families of AVX2 kernels (256-bit vectors).
AVX2_FAMILIES = {"haswell", "zen"}


def narrower_than_cpu(coretype):
    """The wider family this CPU runs where `coretype` (OPENBLAS_CORETYPE as set) names AVX2
    kernels on a CPU with AVX-512, else "": an environment may hold OpenBLAS to AVX2 (some of
    this project's machines do), which halves PyTorch's products where OpenBLAS's AVX-512
    kernels run (on a Zen 5 EPYC, cblas_sgemm 170-180 GFLOP/s against 310-330)."""
    widest = widest_coretype()
    return widest if coretype.lower() in AVX2_FAMILIES and widest == "SkylakeX" else ""


if __name__ == "__main__":
    import sys
    if sys.argv[1:] == ["--narrower"]:  # the wider family, where the environment holds to AVX2
        print(narrower_than_cpu(os.environ.get("OPENBLAS_CORETYPE", "")))
    else:
        print(suggested_coretype())
