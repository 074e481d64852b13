// bfloat16 and float16 reductions on host backends (MPI, in-process), above the backend's moves.
//
// kNative: member r receives block r of every member's input as 16-bit pieces (one all-to-all),
// sums the n pieces in float32 in member order and rounds once; all_reduce splits its count
// evenly, does that, and all-gathers the rounded blocks. Per rank this moves exactly what the
// traffic model's reduce-scatter (+ all-gather) moves, in 2-byte elements, and every result
// element is round(p_0 + p_1 + ... + p_{n-1}), the float32 sum in member order: the same bits on
// every rank and for every backend (docs/communicators.md, "16-bit reductions").
// kFloat32Wire: the input widened to float32 (exact), the backend's float32 reduction, one rounding.
#include <algorithm>
#include <vector>

#include "spsd/comm/communicator.hpp"
#include "spsd/layout/split.hpp"

namespace spsd {

namespace {

template <class T>
std::vector<float> widened(const void* src, int64_t n) {
  const T* p = static_cast<const T*>(src);
  return std::vector<float>(p, p + n);  // exact: every 16-bit value is a float
}

template <class T>
void narrow_into(void* dst, const float* src, int64_t n) {
  T* out = static_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) out[i] = T(src[i]);
}

// The 16-bit dtypes only: the callers checked is_half(t).
template <class F>
void visit_half(DType t, F&& f) {
  if (t == DType::kBFloat16) f.template operator()<bfloat16>();
  else f.template operator()<float16>();
}

bool uniform(std::span<const int64_t> counts) {
  return std::adjacent_find(counts.begin(), counts.end(), std::not_equal_to<>()) == counts.end();
}

}  // namespace

void Communicator::reduce_scatter_halves(const void* send, void* recv, std::span<const int64_t> counts, DType t,
                                         DType wire, ReduceOp op) {
  visit_half(t, [&]<class T>() {
    const int64_t mine = counts[rank_];
    if (wire == DType::kFloat32) {
      const std::vector<float> in = widened<T>(send, traffic::total(counts));
      std::vector<float> out(mine);
      do_reduce_scatter(in.data(), out.data(), counts, DType::kFloat32, op);
      return narrow_into<T>(recv, out.data(), mine);
    }
    // pieces[m * mine + i]: element i of my block in member m's input. The counts list is the
    // same on every member, so all of them make the same (uniform or v) all-to-all call.
    std::vector<T> pieces(size() * mine);
    const std::vector<int64_t> from_each(size(), mine);
    do_all_to_all(send, counts, pieces.data(), from_each, t, uniform(counts));
    std::vector<float> sum = widened<T>(pieces.data(), mine);
    for (int64_t m = 1; m < size(); ++m) combine_into(sum.data(), pieces.data() + m * mine, mine, op);
    narrow_into<T>(recv, sum.data(), mine);
  });
}

void Communicator::all_reduce_halves(const void* send, void* recv, int64_t count, DType t, DType wire, ReduceOp op) {
  visit_half(t, [&]<class T>() {
    if (wire == DType::kFloat32) {
      std::vector<float> buffer = widened<T>(send, count);
      do_all_reduce(buffer.data(), buffer.data(), count, DType::kFloat32, op);
      return narrow_into<T>(recv, buffer.data(), count);
    }
    // The traffic model's all-reduce: a reduce-scatter over the balanced split, then an all-gather.
    const std::vector<int64_t> chunks = balanced_split(count, size());
    std::vector<T> block(chunks[rank_]);
    reduce_scatter_halves(send, block.data(), chunks, t, wire, op);
    do_all_gather(block.data(), recv, chunks, t);
  });
}

}  // namespace spsd
