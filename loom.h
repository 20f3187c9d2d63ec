// loom: the whole public API in one include.
//   #include "loom.h"
//   using namespace loom;
#pragma once

// One header per layer, in the order they build on each other (README.md, "What is where").
#include "core/bfloat16.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "backends/backend.h"
#include "backends/graph.h"
#include "autograd/autocast.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "generation/generation.h"
#include "data/data.h"
#include "io/io.h"
#include "report/report.h"
#include "distributed/data_parallel.h"
#include "distributed/distributed.h"
#include "distributed/distributed_data_parallel.h"
#include "train/train.h"
#include "models/models.h"
#include "metrics/metrics.h"
