# The exercises of docs/learn/: `ctest -L exercise-<name>` runs exactly the tests that check one
# (the reference solution is the code in the tree). The doctest cases are discovered when their
# binary is built, so ctest includes this file after them (tests/CMakeLists.txt adds it) and the
# labels are set here; "docs: every exercise label selects its tests" fails if a test named here
# is renamed, so a label cannot silently select nothing.

# 02-autograd.md: write roll (autograd/ops_shape.cpp) again, with or without its own backward.
set_tests_properties(
  [==[autograd:gradcheck: roll by any shift, along one dim or several, on strided inputs]==]
  [==[autograd:golden: roll by any shift, along one dim or several, matches PyTorch]==]
  [==[core:roll rejects out-of-range dims and shifts that do not match the dims]==]
  PROPERTIES LABELS exercise-roll)

# 03-kernels.md: add GELU's tanh form (backends/unary_math.h) back to the unary table.
set_tests_properties(
  [==[autograd:gradcheck: unary functions on contiguous and strided inputs]==]
  [==[autograd:golden: unary elementwise functions match PyTorch]==]
  [==[core:cpu unary ops match the reference on contiguous, transposed and broadcast inputs]==]
  [==[core:cpu unary_backward matches numerical derivatives of the reference ops]==]
  [==[core:every op of the unary table (backends/unary_math.h) has a reference case here]==]
  PROPERTIES LABELS exercise-gelu-tanh)

# 04-modules.md: write the pre-norm branch of TransformerEncoderLayer::forward.
set_tests_properties(
  [==[nn:TransformerEncoderLayer matches PyTorch, norm_first both ways]==]
  [==[nn:gradcheck: encoder and decoder layers]==]
  PROPERTIES LABELS exercise-prenorm)

# 10-swin.md: write shifted_window_mask (models/swin_window.cpp) from the paper's figure 4.
set_tests_properties(
  [==[nn:relative_position_index and shifted_window_mask equal the official buffers]==]
  [==[models:Window attention with relative bias and shift mask: gradcheck]==]
  [==[models:Swin loads the official state_dict (with its buffers) and matches PyTorch's logits]==]
  PROPERTIES LABELS exercise-swin-mask)

# 12-optimizers.md: write warmup_cosine_lr (optim/schedule.cpp).
set_tests_properties(
  [==[optim:warmup_cosine_lr matches linear warmup + half-cosine decay]==]
  [==[optim:warmup == total decays straight to the end value]==]
  [==[optim:schedules reject invalid arguments with loom::Error]==]
  [==[optim:AdamW under warmup_cosine_lr follows PyTorch for 10 steps]==]
  PROPERTIES LABELS exercise-schedule)

# 07-encoder-decoder.md: write gnmt_length_penalty (models/beam_search.cpp) from GNMT's eq. 14.
set_tests_properties(
  [==[models:gnmt_length_penalty is GNMT's eq. 14 and beam scores are log P / lp(|Y| + eos)]==]
  [==[models:Decoding stops at max_len when eos is never produced, and at eos otherwise]==]
  [==[models:translate_batch equals translating each sentence alone, greedy and beam]==]
  PROPERTIES LABELS exercise-length-penalty)

# 11-detr.md: write giou (models/detr_boxes.cpp), generalized IoU, from Rezatofighi et al. 2019.
set_tests_properties(
  [==[nn:generalized IoU and IoU match DETR's box_ops, with gradients]==]
  [==[nn:box invariants: identical boxes have GIoU 1, conversions round-trip]==]
  [==[nn:gradcheck: smooth_l1, bce with logits, generalized IoU]==]
  [==[models:box conversions round-trip and GIoU of a box with itself is 1]==]
  [==[models:GIoU loss and detr_loss gradients match finite differences]==]
  [==[models:detr_loss matches PyTorch's SetCriterion: terms, scipy's matching and gradients]==]
  PROPERTIES LABELS exercise-giou)

# 05b-build-gpt.md: write causal_softmax and Head::forward (examples/learn/tiny_gpt.h), the
# masked softmax and one head of self-attention.
set_tests_properties(
  [==[models:tiny GPT: its last stage gives models::GPT's logits for the same weights]==]
  [==[models:tiny GPT: every stage is causal, a later byte leaves earlier logits unchanged]==]
  [==[models:tiny GPT: causal_softmax spreads row t over 0..t only, evenly from zero scores]==]
  PROPERTIES LABELS exercise-attention-head)
