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

# 07-encoder-decoder.md: write gnmt_length_penalty (generation/beam_search.cpp) from GNMT's eq. 14.
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

# 05-attention.md: write the unfused path of scaled_dot_product_attention and causal_mask
# (nn/functional_attention.cpp) from Vaswani et al. 2017, eq. 1 and sec. 3.2.3.
set_tests_properties(
  [==[nn:causal_mask blocks exactly the future positions]==]
  [==[nn:causal_mask(T_q, T_k, offset) blocks key j exactly when j > offset + i]==]
  [==[nn:scaled_dot_product_attention is softmax(QK^T/sqrt(d))V with weights and masks]==]
  [==[nn:scaled_dot_product_attention's causal flag equals the explicit causal mask]==]
  [==[nn:a query offset gives exactly the rows of the full causal attention (KV cache)]==]
  [==[nn:gradcheck: scaled_dot_product_attention through the causal path]==]
  [==[nn:MultiheadAttention self-attention matches PyTorch with causal and padding masks]==]
  [==[nn:MultiheadAttention cross-attention matches PyTorch with a per-head float mask]==]
  PROPERTIES LABELS exercise-attention)

# 06-gpt-bpe.md: write BPETokenizer::train's merge loop (data/bpe_train.cpp) and merge_pair
# (data/pair_merges.cpp) from Sennrich et al. 2016, Algorithm 1.
set_tests_properties(
  [==[data:BPETokenizer::train: same merges as recounting every pair after every merge]==]
  [==[data:BPETokenizer::train: the first merge is the most frequent adjacent pair]==]
  [==[data:BPETokenizer::train: stops early when no pair is left, and checks vocab_size]==]
  [==[data:BPE training never makes a token longer than load() accepts]==]
  [==[data:WordPieceTokenizer::train learns whole words and ## continuations]==]
  PROPERTIES LABELS exercise-bpe-merges)

# 08-bert.md: write mask_tokens (data/bert_pretraining.cpp), BERT's 80/10/10 rule.
set_tests_properties(
  [==[data:mask_tokens predicts min(20, max(1, round(15% of the length))) positions]==]
  [==[data:mask_tokens: 80% [MASK], 10% random, 10% unchanged, positions uniform]==]
  PROPERTIES LABELS exercise-mask-tokens)

# 09-vit.md: write PatchEmbed::forward (models/vit.cpp) as ViT's eq. 1, without the Conv2d.
set_tests_properties(
  [==[models:PatchEmbed is eq. 1: each patch, flattened (channel, row, column), times E plus b]==]
  [==[models:gradcheck: PatchEmbed in the images, E and b]==]
  [==[models:ViT logits, attention probabilities, loss and gradients match PyTorch]==]
  [==[models:ViT gradients match finite differences]==]
  PROPERTIES LABELS exercise-patchify)

# 11-detr.md: write cost_matrix (models/detr_loss.cpp), the matching cost of DETR's eq. 1.
set_tests_properties(
  [==[models:hungarian_match minimises DETR's matching cost over every assignment, term by term]==]
  [==[models:detr_loss: batched matching equals per-image matching]==]
  PROPERTIES LABELS exercise-cost-matrix)

# 12-optimizers.md: write noam_lr (optim/schedule.cpp) from Vaswani et al. 2017, eq. 3.
set_tests_properties(
  [==[optim:noam_lr matches Vaswani et al.'s formula]==]
  [==[optim:Adam under noam_lr follows PyTorch for 10 steps]==]
  PROPERTIES LABELS exercise-noam)
