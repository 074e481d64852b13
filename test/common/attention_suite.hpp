#pragma once
// scaled_dot_product_attention against a single-process reference written with plain loops and
// a materialized softmax per row (in double, from the inputs as the tested type holds them), in
// layout combinations of q, k and v on any placement: the sim tests (meshes {1, 2, 4, 2x2})
// and the mpi tests (the world's mesh, 2x2 under -np 4) share it.
//
// The layout combinations (L: every NdSbp of a 4-d tensor on the mesh, S(0..3), B, P(sum),
// P(max), P(min) per mesh axis): (L, L, L), (L, B, B), (B, L, L) and a rotating mix (L, L', L''),
// so every signature's own layouts occur (batch, heads, the query split, all B) and so do layouts
// the resolver must box first (head_dim and key-sequence splits, partials). The problems have
// uneven splits (2 batches, 3 heads or 5 queries on 4 ranks), seq_q != seq_k both ways, and
// causal masks that start inside a piece of the queries.
#include <array>
#include <string>
#include <vector>

#include "failures.hpp"

namespace spsd_test {

struct AttentionProblem {
  spsd::Shape q, kv;
  bool causal;
  std::string text() const;
};
const std::vector<AttentionProblem>& attention_problems();

// Host values of a problem: q, k, v and an output gradient g, uniform in [-2, 2].
struct AttentionHost {
  std::vector<double> q, k, v, g;
};
AttentionHost attention_host(const AttentionProblem& p, uint64_t seed);

// The reference: out, and with g the gradients through the materialized softmax.
struct AttentionReference {
  std::vector<double> out, dq, dk, dv;
};
AttentionReference attention_reference(const AttentionProblem& p, const std::vector<double>& q,
                                       const std::vector<double>& k, const std::vector<double>& v,
                                       const std::vector<double>* g);

// v as a T tensor of shape s, and v as T holds it (back in double).
template <class T>
spsd::Tensor<T> as_tensor(const spsd::Shape& s, const std::vector<double>& v);
template <class T>
std::vector<double> held(const std::vector<double>& v);
// t.full() in double.
template <class T>
std::vector<double> whole(const spsd::GlobalTensor<T>& t);

// Records up to 3 elements where |got - want| > abs + rel |want|.
void expect_near(Failures& f, const std::string& what, const std::vector<double>& got, const std::vector<double>& want,
                 double abs, double rel);

// The layout combinations above, every stride-th from phase.
std::vector<std::array<spsd::NdSbp, 3>> attention_layouts(const spsd::Shape& mesh, int64_t stride = 1,
                                                          int64_t phase = 0);

// The forward on every problem and sampled layout combination on placement p (collective over
// p; ranks outside it return at once), within abs + rel |want|.
template <class T>
void run_attention_forward_suite(const spsd::Placement& p, int64_t stride, double abs, double rel, Failures& f);

// dq, dk, dv (float64) from backward(out, g) with q, k, v in the sampled layouts, within 1e-10.
void run_attention_backward_suite(const spsd::Placement& p, int64_t stride, Failures& f);

}  // namespace spsd_test
