// Fused scaled-dot-product attention as one recorded op: the backend's FlashAttention-2 kernels
// (Backend::attention_forward / attention_backward) forward and backward. The forward saves the
// log-sum-exp of each query's scores, from which the backward recomputes the probabilities, so
// no [T_q, T_k] matrix is kept. nn::functional::scaled_dot_product_attention decides when it
// runs; its unfused path (matmul, softmax, matmul) is the reference the kernels are tested
// against.
#include "autograd/internal.h"

namespace loom {

Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                       const AttentionArgs& args) {
  // q [n, T_q, d], k and v [n, T_k, d] -> [n, T_q, d]
  Tensor out = Tensor::empty({args.n, args.q_len, args.head_dim}, q.dtype(), q.device());
  Tensor lse = Tensor::empty({args.n, args.q_len}, DType::Float32, q.device());  // [n, T_q]
  const Tensor qd = q.detach(), kd = k.detach(), vd = v.detach();
  backend(q.device()).attention_forward(qd, kd, vd, mask, args, out, lse);
  if (!autograd::any_requires_grad({q, k, v})) return out;
  const Tensor saved_out = out.detach();
  // q, k and v with their places in the graph: what a second derivative would depend on.
  const std::vector<Tensor> ins{detail::saved(q), detail::saved(k), detail::saved(v)};
  return autograd::record(
      "scaled_dot_product_attention", {q, k, v}, out,
      [qd, kd, vd, mask, saved_out, lse, args, ins](const Tensor& g) {
        const Tensor grad = (g.dtype() == qd.dtype() ? g : g.to(qd.dtype())).contiguous();
        Tensor dq = Tensor::empty(qd.shape(), qd.dtype(), qd.device());
        Tensor dk = Tensor::empty(kd.shape(), kd.dtype(), kd.device());
        Tensor dv = Tensor::empty(vd.shape(), vd.dtype(), vd.device());
        backend(qd.device())
            .attention_backward(grad, qd, kd, vd, mask, saved_out, lse, args, dq, dk, dv);
        // Under create_graph the kernels' gradients cannot be differentiated again: they come
        // back as outputs of a node that raises if a second backward reaches it.
        const std::vector<Tensor> from{g, ins[0], ins[1], ins[2]};
        const char* op = "scaled_dot_product_attention";
        return std::vector<Tensor>{autograd::not_differentiable_twice(op, dq, from),
                                   autograd::not_differentiable_twice(op, dk, from),
                                   autograd::not_differentiable_twice(op, dv, from)};
      },
      {qd, kd, vd, saved_out});
}

}  // namespace loom
