// loom::optim — optimizers, learning-rate schedules and gradient clipping (included by loom.h),
// and scipy.optimize's linear_sum_assignment.
#pragma once

#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/linear_sum_assignment.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "optim/param_group.h"
#include "optim/rmsprop.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
