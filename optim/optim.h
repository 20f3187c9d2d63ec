// loom::optim — optimizers, learning-rate schedules, gradient clipping and the progress line
// of a training loop (included by loom.h).
#pragma once

#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/optimizer.h"
#include "optim/param_group.h"
#include "optim/progress.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
