// loom::generation — decoding for any model that predicts the next token: sampling rules, the
// sampling loop, greedy and beam search (included by loom.h).
#pragma once

#include "generation/beam_search.h"
#include "generation/sampling.h"
