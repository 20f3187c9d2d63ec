// loom::optim — optimizers, learning-rate schedules and gradient clipping (included by loom.h).
#pragma once

#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/optimizer.h"
#include "optim/param_group.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
