// The nn layer: modules, layers, functional ops and losses, and initialisation (files are io/,
// the training loop's services train/).
#pragma once

#include "nn/activation.h"
#include "nn/batch_norm.h"
#include "nn/frozen_batch_norm.h"
#include "nn/container.h"
#include "nn/conv2d.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/feed_forward.h"
#include "nn/functional.h"
#include "nn/init.h"
#include "nn/kv_cache.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/multihead_attention.h"
#include "nn/pooling.h"
#include "nn/positional_encoding.h"
#include "nn/transformer_layer.h"
#include "nn/drop_path.h"
