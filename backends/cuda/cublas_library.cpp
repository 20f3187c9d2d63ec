// cuBLAS, loaded at a program's first cuBLAS call rather than when the program starts.
//
// libcublas.so needs libcublasLt.so (540 MB in CUDA 13), and loading that library ran its
// static initialisers and faulted in its pages at the start of every program linked with loom's
// CUDA backend, whether it used a GPU or not: about 0.5 s of each start on a 2-core machine
// (0.57 s for `test_core --list-test-cases`, of which the loader's relocations took 4 ms), paid
// by each of the test suite's thousand processes and by every example. loom calls seven cuBLAS
// functions. This file defines each of them, under cuBLAS's own name, as a call through a
// pointer that dlsym finds in libcublas at the first call; the library is opened once, by its
// path in the toolkit loom was built with, else by its soname through the usual search
// (LD_LIBRARY_PATH, the loader's cache). loom_cuda does not link cuBLAS, so these are the
// definitions the linker finds.
//
// The CUDA emulator (tests/cuda/emulator) defines these functions itself and skips this file.
#include <cublas_v2.h>
#include <dlfcn.h>

#include "core/error.h"

namespace {

// The library, opened at the first call (thread-safe: a function's static). A failure throws
// and leaves the static to be tried again at the next call.
void* open_cublas() {
  for (const char* name : {LOOM_CUBLAS_LIBRARY, LOOM_CUBLAS_SONAME})
    if (void* library = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return library;
  const char* why = dlerror();
  LOOM_FAIL("cuBLAS: cannot load {} nor {}: {} (set LD_LIBRARY_PATH to the CUDA toolkit's "
            "libraries)",
            LOOM_CUBLAS_LIBRARY, LOOM_CUBLAS_SONAME, why ? why : "no reason given");
}

void* cublas_function(const char* name) {
  static void* const library = open_cublas();
  void* function = dlsym(library, name);
  if (function == nullptr)
    LOOM_FAIL("cuBLAS: the library loaded has no function {}: {}", name, dlerror());
  return function;
}

}  // namespace

// The exported name of a cuBLAS function: cublas_v2.h renames some (cublasCreate is
// cublasCreate_v2), and the name is expanded before it is quoted.
#define LOOM_QUOTED(name) #name
#define LOOM_EXPORTED_NAME(name) LOOM_QUOTED(name)

// cuBLAS's function `name` (return type `type`, parameters `params`), defined as a call of the
// library's own with `args`, looked up once.
#define LOOM_CUBLAS_FORWARD(type, name, params, args)                                  \
  type CUBLASWINAPI name params {                                                      \
    using Function = type(*) params;                                                   \
    static const auto real =                                                           \
        reinterpret_cast<Function>(cublas_function(LOOM_EXPORTED_NAME(name)));         \
    return real args;                                                                  \
  }

LOOM_CUBLAS_FORWARD(cublasStatus_t, cublasCreate, (cublasHandle_t * handle), (handle))
LOOM_CUBLAS_FORWARD(cublasStatus_t, cublasSetStream, (cublasHandle_t handle, cudaStream_t stream),
                    (handle, stream))
LOOM_CUBLAS_FORWARD(cublasStatus_t, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode),
                    (handle, mode))
LOOM_CUBLAS_FORWARD(cublasStatus_t, cublasSetWorkspace,
                    (cublasHandle_t handle, void* workspace, size_t bytes),
                    (handle, workspace, bytes))
LOOM_CUBLAS_FORWARD(const char*, cublasGetStatusString, (cublasStatus_t status), (status))
LOOM_CUBLAS_FORWARD(cublasStatus_t, cublasSgemmStridedBatched,
                    (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                     int m, int n, int k, const float* alpha, const float* A, int lda,
                     long long int strideA, const float* B, int ldb, long long int strideB,
                     const float* beta, float* C, int ldc, long long int strideC, int batch),
                    (handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB,
                     beta, C, ldc, strideC, batch))
LOOM_CUBLAS_FORWARD(cublasStatus_t, cublasGemmStridedBatchedEx,
                    (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                     int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                     int lda, long long int strideA, const void* B, cudaDataType Btype, int ldb,
                     long long int strideB, const void* beta, void* C, cudaDataType Ctype,
                     int ldc, long long int strideC, int batch, cublasComputeType_t compute,
                     cublasGemmAlgo_t algo),
                    (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype,
                     ldb, strideB, beta, C, Ctype, ldc, strideC, batch, compute, algo))
