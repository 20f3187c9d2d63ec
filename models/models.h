// loom::models — complete transformer models built from nn (included by loom.h).
#pragma once

#include "models/gpt.h"
