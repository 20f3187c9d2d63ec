// loom::models — complete transformer models built from nn (included by loom.h), and the
// generation loop they share.
#pragma once

#include "models/gpt.h"
#include "models/sampling.h"
#include "models/swin.h"
#include "models/vit.h"
#include "models/beam_search.h"
#include "models/transformer.h"
