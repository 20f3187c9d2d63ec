// LOOM_HOST_DEVICE marks a function that is compiled for both the host and the GPU: the
// random-number generator (core/rng.h) and the unary math table (backends/unary_math.h) are
// written once and run on either device. Outside nvcc it is a plain inline function.
#pragma once

#if defined(__CUDACC__)
#define LOOM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define LOOM_HOST_DEVICE inline
#endif
