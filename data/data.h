// The data layer: tokenizers, corpus readers, datasets and the DataLoader.
#pragma once

#include "data/bert_pretraining.h"
#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "data/fashion_mnist.h"
#include "data/fashion_mnist_scenes.h"
#include "data/fortunes.h"
#include "data/image.h"
#include "data/pretokenize.h"
#include "data/splitmix.h"
#include "data/text_file.h"
#include "data/tokenizer.h"
#include "data/transforms.h"
#include "data/wordpiece_tokenizer.h"
