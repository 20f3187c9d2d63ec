// loom::models — complete transformer models built from nn (included by loom.h), and the
// generation loop they share.
#pragma once

#include "models/bert.h"
#include "models/gpt.h"
#include "models/sampling.h"
#include "models/swin.h"
#include "models/vit.h"
