// Learning-rate schedules as pure functions of the step: call one each iteration and hand the
// result to Optimizer::set_lr. `step` counts optimizer updates from 0; computed in double.
#pragma once

#include <cstdint>

namespace loom::optim {

// Vaswani et al. 2017, section 5.3 ("Noam" schedule):
//   lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
// a linear warmup to its peak at step == warmup, then decay with 1/sqrt(step). Step 0 is taken
// as step 1 (as the Annotated Transformer does), since step^-0.5 is undefined there.
float noam_lr(int64_t step, int64_t d_model, int64_t warmup, float factor = 1.0f);

// Linear warmup from 0 to `peak` over `warmup` steps, then half a cosine from `peak` down to
// `floor` at step `total`, and `floor` after it (Loshchilov & Hutter 2017, SGDR, without
// restarts; the shape of Hugging Face's get_cosine_schedule_with_warmup and nanoGPT's get_lr):
//   step < warmup:           peak * step / warmup
//   warmup <= step < total:  floor + (peak - floor) * 0.5 * (1 + cos(pi * progress)),
//                            progress = (step - warmup) / (total - warmup)
//   step >= total:           floor
float warmup_cosine_lr(int64_t step, int64_t warmup, int64_t total, float peak, float floor = 0.0f);

// BERT's schedule (Devlin et al. 2019, appendix A.2; Hugging Face's
// get_linear_schedule_with_warmup): linear warmup from 0 to `peak` over `warmup` steps, then
// linear decay to 0 at step `total`, and 0 after it:
//   step < warmup:  peak * step / warmup
//   otherwise:      peak * max(0, (total - step) / (total - warmup))
float warmup_linear_lr(int64_t step, int64_t warmup, int64_t total, float peak);

}  // namespace loom::optim
