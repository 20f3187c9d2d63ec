// nn::KVCache and causal_attention: attending through the cache step by step gives the full
// causal attention's rows; the layer views write into the cache; beam reordering; errors.
#include "nn_golden.h"

using namespace loom;
using namespace loom::testing;

namespace {

// q, k, v (B, nh, T, hs) split from one (B, T, 3 * nh * hs) projection, as GPT's c_attn.
std::vector<Tensor> split_heads(const Tensor& qkv, int64_t heads) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  std::vector<Tensor> out;
  for (const Tensor& t : qkv.split(C, 2))
    out.push_back(t.view({B, T, heads, C / heads}).transpose(1, 2));
  return out;
}

}  // namespace

TEST_CASE("causal_attention through a KV cache gives the full causal attention, step by step") {
  manual_seed(41);
  NoGradGuard no_grad;
  const Tensor qkv = randn({2, 7, 3 * 8});  // B 2, T 7, 2 heads of 4
  const std::vector<Tensor> all = split_heads(qkv, 2);
  const Tensor full = nn::causal_attention(all[0], all[1], all[2]);  // (2, 2, 7, 4)
  nn::KVCache cache(/*layers=*/1, /*batch=*/2, /*heads=*/2, /*capacity=*/9, /*head_dim=*/4);
  // A 3-position prefill, one position, then three with only the last query computed.
  int64_t done = 0;
  for (const auto& [count, last_only] : std::vector<std::pair<int64_t, bool>>{
           {3, false}, {1, false}, {3, true}}) {
    const std::vector<Tensor> part = split_heads(qkv.narrow(1, done, count), 2);
    const Tensor q = last_only ? part[0].narrow(2, count - 1, 1) : part[0];
    const Tensor y = nn::causal_attention(q, part[1], part[2], cache.layer(0));
    const int64_t from = last_only ? done + count - 1 : done;
    check_close(y, full.narrow(2, from, y.size(2)), 1e-5f, 1e-6f,
                "positions from " + std::to_string(from));
    cache.advance(count);
    done += count;
  }
  CHECK(cache.length() == 7);
  // Keys and values split from one projection were written with one copy into the halves.
  check_close(cache.keys(0).narrow(2, 0, 7), all[1], 0.0f, 0.0f, "keys");
  check_close(cache.values(0).narrow(2, 0, 7), all[2], 0.0f, 0.0f, "values");
}

TEST_CASE("KVCache: separate keys and values, device positions, beam reordering") {
  manual_seed(42);
  NoGradGuard no_grad;
  nn::KVCache cache(2, 3, 1, 4, 2);  // 2 layers, 3 rows, 1 head, capacity 4, head_dim 2
  const Tensor k = randn({3, 1, 2, 2}), v = randn({3, 1, 2, 2});  // two separate tensors
  auto [keys, values] = cache.layer(1).append(k, v);
  check_close(keys, k, 0.0f, 0.0f, "keys so far");
  check_close(cache.values(1).narrow(2, 0, 2), v, 0.0f, 0.0f, "values written");
  cache.advance(2);
  // A step at a device position writes there and returns the whole storage.
  const Tensor k1 = randn({3, 1, 1, 2}), v1 = randn({3, 1, 1, 2});
  const nn::KVCache at = cache.at_position(tensor_i64({2}, {1}), zeros({4}));
  const auto [all_keys, all_values] = at.layer(1).append(k1, v1);
  CHECK(all_keys.shape() == Shape{3, 1, 4, 2});
  check_close(cache.keys(1).narrow(2, 2, 1), k1, 0.0f, 0.0f, "written at the device position");
  // Row i continues from row rows[i].
  const Tensor before = cache.keys(1).clone();
  cache.reorder(tensor_i64({2, 2, 0}, {3}));
  check_close(cache.keys(1).narrow(0, 0, 1), before.narrow(0, 2, 1), 0.0f, 0.0f, "row 0");
  check_close(cache.keys(1).narrow(0, 2, 1), before.narrow(0, 0, 1), 0.0f, 0.0f, "row 2");
  check_close(cache.layer(1).keys, cache.keys(1), 0.0f, 0.0f, "layer views follow");
  // Only the filled positions (length() = 2): the same rows there, in one gather on the CPU.
  nn::KVCache twin(2, 3, 2, 4, 2);  // 2 heads this time: (kv, row, head) move together
  for (int64_t l = 0; l < 2; ++l) {
    twin.keys(l).copy_(randn({3, 2, 4, 2}));
    twin.values(l).copy_(randn({3, 2, 4, 2}));
  }
  twin.advance(2);
  const Tensor twin_before = twin.keys(0).clone(), values_before = twin.values(1).clone();
  twin.reorder(tensor_i64({1, 1, 0}, {3}), twin.length());
  check_close(twin.keys(0).narrow(2, 0, 2),
              index_select(twin_before, 0, tensor_i64({1, 1, 0}, {3})).narrow(2, 0, 2), 0.0f,
              0.0f, "filled keys moved");
  check_close(twin.values(1).narrow(2, 0, 2),
              index_select(values_before, 0, tensor_i64({1, 1, 0}, {3})).narrow(2, 0, 2), 0.0f,
              0.0f, "filled values moved");
  // In place: two rows that swap (each the other's source, set aside first), one that continues
  // itself, one that copies another; the positions past the filled ones are not touched.
  nn::KVCache beams(1, 4, 2, 5, 3);  // 1 layer, 4 rows, 2 heads, capacity 5, head_dim 3
  beams.keys(0).copy_(randn({4, 2, 5, 3}));
  beams.values(0).copy_(randn({4, 2, 5, 3}));
  beams.advance(3);
  const Tensor keys_then = beams.keys(0).clone(), values_then = beams.values(0).clone();
  const Tensor swap = tensor_i64({1, 0, 2, 1}, {4});
  beams.reorder(swap, beams.length());
  check_close(beams.keys(0).narrow(2, 0, 3), index_select(keys_then, 0, swap).narrow(2, 0, 3),
              0.0f, 0.0f, "keys, rows swapped in place");
  check_close(beams.values(0).narrow(2, 0, 3),
              index_select(values_then, 0, swap).narrow(2, 0, 3), 0.0f, 0.0f, "values");
  check_close(beams.keys(0).narrow(2, 3, 2), keys_then.narrow(2, 3, 2), 0.0f, 0.0f, "unfilled");
  beams.reorder(tensor_i64({0, 1, 2, 3}, {4}), beams.length());  // nobody moves
  check_close(beams.keys(0).narrow(2, 0, 3), index_select(keys_then, 0, swap).narrow(2, 0, 3),
              0.0f, 0.0f, "keys, every row continuing itself");
  check_error([&] { twin.reorder(tensor_i64({0, 1, 3}, {3}), 2); },
              {"KVCache::reorder", "row 2", "from row 3"});
  check_error([&] { twin.reorder(tensor_i64({0, 1, 2}, {3}), 5); },
              {"KVCache::reorder", "positions 5", "capacity 4"});
  CHECK_FALSE(nn::LayerCache{}.defined());
  check_error([&] { cache.layer(2); }, {"KVCache", "layer 2"});
  check_error([&] { cache.advance(3); }, {"KVCache", "3 more", "capacity 4"});
  check_error([&] { cache.layer(0).append(randn({3, 1, 3, 2}), randn({3, 1, 3, 2})); },
              {"KVCache", "3 more", "after 2"});
  check_error([&] { cache.reorder(tensor_i64({0, 1}, {2})); }, {"KVCache::reorder", "[3]", "[2]"});
  check_error([] { nn::KVCache(1, 0, 1, 4, 2); }, {"KVCache", "batch 0"});
  const Tensor two = randn({1, 1, 2, 2});  // more queries than keys
  check_error([&] { nn::causal_attention(randn({1, 1, 3, 2}), two, two); },
              {"causal_attention", "[1,1,3,2]", "[1,1,2,2]"});
}
