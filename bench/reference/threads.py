"""CPU thread setup for timing PyTorch fairly; call before_torch() BEFORE `import torch`.

    import threads
    threads.before_torch(threads=2, blas_threads=None, omp_wait="passive")
    import torch
    blas = threads.after_torch(torch, threads=2)    # OpenBLAS's thread count, or None

torch.set_num_threads(T) only sizes ATen's OpenMP pool. Debian's PyTorch does its matrix
products in OpenBLAS (the pthreads build), which keeps a pool of its own that defaults to every
core, so that pool is sized too: OPENBLAS_NUM_THREADS before `import torch` loads the library,
openblas_set_num_threads after it (the variable alone does not hold in Debian's build). With
T = 2 on 2 cores the two pools oversubscribe: idle libgomp workers spin while OpenBLAS's run,
and steps get 2-5x slower. OMP_WAIT_POLICY=PASSIVE makes idle libgomp workers sleep instead
("default" leaves libgomp's out-of-the-box spinning, to reproduce it).
"""
import ctypes
import os
import sys

OMP_WAIT = ["passive", "default", "active"]


def before_torch(threads, blas_threads=None, omp_wait="passive"):
    """Set the environment libgomp and OpenBLAS read when `import torch` loads them."""
    if "torch" in sys.modules:
        raise RuntimeError("threads.before_torch: torch is already imported; call it first")
    os.environ["OPENBLAS_NUM_THREADS"] = str(blas_threads or threads)
    os.environ.pop("OMP_WAIT_POLICY", None)
    if omp_wait != "default":
        os.environ["OMP_WAIT_POLICY"] = omp_wait.upper()


def after_torch(torch, threads, blas_threads=None):
    """Size ATen's pool and OpenBLAS's (through its API too: once torch is loaded the
    environment variable alone does not hold); return OpenBLAS's thread count, or None if
    torch does not use OpenBLAS."""
    torch.set_num_threads(threads)
    try:
        openblas = ctypes.CDLL("libopenblas.so.0")
    except OSError:
        return None
    openblas.openblas_set_num_threads(blas_threads or threads)
    return openblas.openblas_get_num_threads()
