// loom::models — complete transformer models built from nn (included by loom.h); the decoding
// they share is generation/.
#pragma once

#include "models/bert.h"
#include "models/gpt.h"
#include "models/swin.h"
#include "models/swin_window.h"
#include "models/vit.h"
#include "models/detr.h"
#include "models/detr_boxes.h"
#include "models/detr_loss.h"
#include "models/beam_search.h"
#include "models/transformer.h"
