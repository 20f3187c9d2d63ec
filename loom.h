// loom: the whole public API in one include.
//   #include "loom.h"
//   using namespace loom;
#pragma once

#include "core/bfloat16.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/graph.h"
#include "core/rng.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "autograd/autocast.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "backends/backend.h"
#include "distributed/distributed.h"
#include "distributed/data_parallel.h"
#if __has_include("nn/nn.h")
#include "nn/nn.h"
#endif
#if __has_include("optim/optim.h")
#include "optim/optim.h"
#endif
#if __has_include("data/data.h")
#include "data/data.h"
#endif
#if __has_include("models/models.h")
#include "models/models.h"
#endif
#if __has_include("metrics/metrics.h")
#include "metrics/metrics.h"
#endif
