// gpu-ops: cuda placements give the results of cpu placements. On this process's ranks (1 rank:
// NCCL; several ranks under mpirun sharing a GPU: host-staged over MPI) and, when run alone, on
// 2 and 4 simulated ranks (host-staged, threads sharing the GPU):
//   - the op differential suite (test/common/op_suite.cpp) on a cuda placement, sampled;
//   - the boxing suite between cuda layouts, and between cpu and cuda layouts in both directions;
//   - every op on the same random inputs on a cpu and a cuda placement, compared element by
//     element (relative tolerance per op; a NaN where the cpu has none fails);
//   - gradients of a small model (every backward rule's helper op) equal to the cpu ones;
//   - rand/randn bit-equal to the cpu values;
//   - the fused optimizer steps (SGD, Adam, AdamW) giving the cpu parameters and state;
//   - a steady state of ops that makes no new device allocations;
//   - the examples' MLP trained 5 steps (data, tensor and, on even rank counts, 2-d parallel) on
//     cuda giving the cpu loss curve and first gradients;
//   - a steady training step (MLP with an embedding, cross-entropy, Adam) that touches the host
//     only to read its loss: no other host<->device copy, at most one synchronization, no
//     device allocation (device_traffic(), device_allocator_stats()).
// Every floating section also runs in bfloat16 and float16 (cuda vs cpu, each op's bound stated
// where it is checked), plus mixed precision: float32 masters, bfloat16 compute through cast.
// Exits 77 (meson: SKIP) only where the machine has no CUDA device (cuda_devices.hpp).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "../sim/sim_helpers.hpp"
#include "spsd/autograd/norm_grad.hpp"
#include "spsd/autograd/softmax_grad.hpp"
#include "boxing_suite.hpp"
#include "op_suite.hpp"
#include "gpt_suite.hpp"
#include "recompute_suite.hpp"
#include "train_suite.hpp"
#include "cuda_devices.hpp"

using namespace spsd;
using spsd_test::Failures;

namespace {

Placement on(const Placement& p, const char* type) { return Placement(type, p.ranks(), p.mesh()); }

template <class T>
void expect_close(Failures& f, const std::string& what, const std::vector<T>& got, const std::vector<T>& want,
                  double rtol) {
  if (got.size() != want.size()) {
    f.add(what + ": " + std::to_string(got.size()) + " elements, expected " + std::to_string(want.size()));
    return;
  }
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    const bool ok = std::isnan(w) ? std::isnan(g) : !std::isnan(g) && std::abs(g - w) <= rtol * (1 + std::abs(w));
    if (!ok && bad++ < 3)
      f.add(what + ": element " + std::to_string(i) + ": cuda " + spsd_test::show(got[i]) + ", cpu " +
            spsd_test::show(want[i]));
  }
}

// One op on inputs of T: x (6, 10), y (6, 10), w (10, 4), labels (6,) in [0, 10), ids (5,) in [0, 6).
template <class T>
struct Inputs {
  GlobalTensor<T> x, y, w;
  GlobalTensor<int64_t> labels, ids;
};
template <class T>
struct OpCase {
  std::string name;
  bool sums;  // a reduction, matmul or softmax: another summation order on each side
  std::function<GlobalTensor<T>(const Inputs<T>&)> run;
};

// The bound of an op's cuda result against the cpu's, relative to 1 + |cpu value|. float: a few
// ulps for element-wise ops, 1e-4 where the summation order differs. bfloat16/float16: both sides
// compute each op in float and round once, so an element-wise result may differ by the one
// rounding that a last-bit float difference flips (2 ulps of T over a chain of two ops), a sum by
// that plus float's order error, far below an ulp of T: 4 ulps (eps = 2^-7 bf16, 2^-10 fp16).
template <class T>
double op_rtol(bool sums) {
  if constexpr (is_half_v<T>) return (sums ? 4 : 2) * static_cast<double>(std::numeric_limits<T>::epsilon());
  else return sums ? 1e-4 : 1e-5;
}

// randn<T> (for 16-bit T: randn<float> rounded once, bit for bit).
template <class T>
Inputs<T> make_inputs(const Placement& p, const NdSbp& rows) {
  const NdSbp b(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast));
  Inputs<T> in{randn<T>({6, 10}, p, rows, 1), randn<T>({6, 10}, p, rows, 2), randn<T>({10, 4}, p, b, 3),
               GlobalTensor<int64_t>({6}, p, b, Tensor<int64_t>()), GlobalTensor<int64_t>({5}, p, b, Tensor<int64_t>())};
  in.labels = from_host(Tensor<int64_t>::from_vector({6}, {0, 3, 9, 1, 7, 3}), p, b);
  in.ids = from_host(Tensor<int64_t>::from_vector({5}, {5, 0, 2, 2, 4}), p, b);
  return in;
}

// scaled_dot_product_attention of q (2, 3, seq_q, head_dim) and k, v (2, 3, seq_k, head_dim)
// (randn, B, on x's placement), then, when grads, the gradients of sum(out * w) through the
// fused backward kernels (attention_lse, attention_grad_q, attention_grad_kv), all flattened and
// concatenated. seq 37 and 45 take a partial tile of 32; head_dim 10, 72 and 200 take 1, 4 and
// 8 columns per lane.
template <class T>
GlobalTensor<T> attention_case(const Inputs<T>& in, int64_t seq_q, int64_t seq_k, int64_t head_dim, bool causal,
                               bool grads) {
  const Placement& p = in.x.placement();
  const NdSbp b(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast));
  GlobalTensor<T> q = randn<T>({2, 3, seq_q, head_dim}, p, b, 11), k = randn<T>({2, 3, seq_k, head_dim}, p, b, 12),
                  v = randn<T>({2, 3, seq_k, head_dim}, p, b, 13);
  if (!grads) return scaled_dot_product_attention(q, k, v, causal);
  for (GlobalTensor<T>* t : {&q, &k, &v}) t->requires_grad_();
  const GlobalTensor<T> out = scaled_dot_product_attention(q, k, v, causal);
  backward(sum(out * randn<T>({2, 3, seq_q, head_dim}, p, b, 14)));
  std::vector<GlobalTensor<T>> parts;
  for (const GlobalTensor<T>& t : {out.detach(), q.grad(), k.grad(), v.grad()}) parts.push_back(reshape(t, {-1}));
  return concat(parts, 0);
}

template <class T>
std::vector<OpCase<T>> op_cases() {
  const bool e = false, r = true;  // element-wise; reductions, matmul and softmax (other summation order)
  using In = const Inputs<T>&;
  std::vector<OpCase<T>> cases = {
      {"add", e, [](In i) { return i.x + i.y; }},
      {"sub", e, [](In i) { return i.x - i.y; }},
      {"mul", e, [](In i) { return i.x * i.y; }},
      {"div", e, [](In i) { return i.x / (abs(i.y) + T(0.5f)); }},
      {"broadcast add", e, [](In i) { return i.x + sum(i.y, {0}, true); }},
      {"scalar forms", e, [](In i) { return (T(2) - i.x) * T(3) / T(4) + T(1); }},
      {"neg", e, [](In i) { return -i.x; }},
      {"relu", e, [](In i) { return relu(i.x); }},
      {"gelu", e, [](In i) { return gelu(i.x); }},
      {"exp", e, [](In i) { return exp(i.x); }},
      {"log", e, [](In i) { return log(abs(i.x) + T(0.1f)); }},
      {"tanh", e, [](In i) { return tanh(i.x); }},
      {"sigmoid", e, [](In i) { return sigmoid(i.x); }},
      {"sqrt", e, [](In i) { return sqrt(abs(i.x)); }},
      // issue 25: the new functions, pow, var, and the bool-valued kernels through cast and where
      {"gelu tanh", e, [](In i) { return gelu(i.x, GeluApproximation::kTanh); }},
      {"rsqrt", e, [](In i) { return rsqrt(abs(i.x) + T(0.1f)); }},
      {"erf", e, [](In i) { return erf(i.x); }},
      {"silu", e, [](In i) { return silu(i.x); }},
      {"pow", e, [](In i) { return pow(abs(i.x) + T(0.5f), i.y); }},
      {"pow scalar", e, [](In i) { return pow(abs(i.x), 1.5f); }},
      {"var", r, [](In i) { return var(i.x, {1}); }},
      {"where", e, [](In i) { return where(i.x > i.y, i.x, sum(i.y, {0}, true)); }},
      {"masked_fill", e, [](In i) { return masked_fill(i.x, sum(i.y, {0}) < 0.0f, 2.0f); }},
      {"comparisons", e, [](In i) {
         return cast<T>(i.x <= i.y) + cast<T>(i.x == i.x) + cast<T>(0.0f != i.y) + cast<T>(i.x >= 0.5f);
       }},
      {"logical", e, [](In i) { return cast<T>((i.x > 0.0f) & !(i.y < 0.0f)) + cast<T>((i.x > i.y) | (i.y > 1.0f)); }},
      {"argmax", e, [](In i) { return cast<T>(argmax(i.x, 1, true)) + cast<T>(argmin(i.x, 0, true)); }},
      {"sum rows", r, [](In i) { return sum(i.x, {1}); }},
      {"sum cols", r, [](In i) { return sum(i.x, {0}); }},
      {"sum all", r, [](In i) { return sum(i.x); }},
      {"mean", r, [](In i) { return mean(i.x, {1}, true); }},
      {"max", e, [](In i) { return max(i.x, {1}); }},
      {"min", e, [](In i) { return min(i.x, {0}); }},
      {"softmax rows", r, [](In i) { return softmax(i.x, 1); }},
      {"softmax cols", r, [](In i) { return softmax(i.x, 0); }},
      {"log_softmax", r, [](In i) { return log_softmax(i.x, 1); }},
      {"transpose", e, [](In i) { return transpose(i.x, 0, 1); }},
      {"permute 3-d", e, [](In i) { return permute(reshape(i.x, {3, 2, 10}), {2, 0, 1}); }},
      {"reshape", e, [](In i) { return reshape(i.x, {10, 6}); }},
      {"slice", e, [](In i) { return slice(i.x, 1, 2, 7); }},
      {"concat", e, [](In i) { return concat({i.x, i.y}, 1); }},
      {"matmul", r, [](In i) { return matmul(i.x, i.w); }},
      {"batched matmul", r, [](In i) { return matmul(reshape(i.x, {2, 3, 10}), i.w); }},
      {"embedding", e, [](In i) { return embedding(i.x, i.ids); }},
      {"pick", e, [](In i) { return pick(i.x, i.labels); }},
      {"cross_entropy", r, [](In i) { return cross_entropy(i.x, i.labels); }},
      // Backward-only forms (cuBLAS OP_T, the fused softmax / cross-entropy backward kernels).
      {"matmul a^T", r, [](In i) { return detail::matmul_transposed(i.x, i.y, true, false); }},
      {"matmul b^T", r, [](In i) { return detail::matmul_transposed(i.x, i.y, false, true); }},
      {"matmul a^T b^T", r, [](In i) { return detail::matmul_transposed(i.w, i.x, true, true); }},
      {"softmax_grad", r, [](In i) { return detail::softmax_grad(softmax(i.x, 1), i.y, 1); }},
      {"log_softmax_grad", r, [](In i) { return detail::log_softmax_grad(log_softmax(i.x, 0), i.y, 0); }},
      {"cross_entropy_grad", r, [](In i) { return detail::cross_entropy_grad(i.x, i.labels, sum(i.y)); }},
      {"attention", r, [](In i) { return attention_case(i, 5, 7, 10, false, false); }},
      {"attention causal, partial tiles", r, [](In i) { return attention_case(i, 37, 45, 72, true, false); }},
      {"attention head_dim 200", r, [](In i) { return attention_case(i, 45, 37, 200, true, false); }},
      // Normalization (weight and bias (10,) from y's column sums and means) and dropout (the
      // same mask from the same host-device code: exact).
      {"layer_norm", r, [](In i) { return layer_norm(i.x, sum(i.y, {0}), mean(i.y, {0})); }},
      {"rms_norm", r, [](In i) { return rms_norm(i.x, sum(i.y, {0})); }},
      {"layer_norm_grad", r, [](In i) { return detail::norm_grad_x<false>(i.x, sum(i.y, {0}), i.y, 1e-5); }},
      {"rms_norm_grad", r, [](In i) { return detail::norm_grad_x<true>(i.x, sum(i.y, {0}), i.y, 1e-6); }},
      {"layer_norm_weight_grad", r, [](In i) { return detail::norm_grad_weight<false>(i.x, i.y, 1e-5); }},
      {"dropout", e, [](In i) { return dropout(i.x, 0.3, 5); }},
  };
  // The fused attention backward in float and double: in 16 bits the cpu's and cuda's out may
  // differ by a rounding, which the gradients carry beyond the 4-ulp bound.
  if constexpr (!is_half_v<T>)
    cases.insert(cases.end(), {{"attention grads", r, [](In i) { return attention_case(i, 37, 45, 72, false, true); }},
                               {"attention grads causal", r, [](In i) { return attention_case(i, 45, 37, 10, true, true); }},
                               {"attention grads head_dim 200", r,
                                [](In i) { return attention_case(i, 9, 40, 200, true, true); }}});
  return cases;
}

template <class T>
void every_op_cpu_vs_cuda(const Placement& cuda, Failures& f) {
  const Placement cpu = on(cuda, "cpu");
  std::vector<NdSbp> layouts = {NdSbp(std::vector<Sbp>(cuda.mesh().ndim(), sbp::broadcast)),
                                NdSbp(std::vector<Sbp>(cuda.mesh().ndim(), sbp::split(0)))};
  for (const NdSbp& rows : layouts) {
    const Inputs<T> a = make_inputs<T>(cpu, rows), b = make_inputs<T>(cuda, rows);
    for (const OpCase<T>& c : op_cases<T>()) {
      const std::string what = c.name + " " + std::string(to_string(dtype_of<T>)) + " on " + cuda.to_string() + " " +
                               rows.to_string();
      try {
        GlobalTensor<T> want = c.run(a), got = c.run(b);
        if (got.placement() != cuda) f.add(what + ": result placed on " + got.placement().to_string());
        expect_close(f, what, got.full().to_vector(), want.full().to_vector(), op_rtol<T>(c.sums));
      } catch (const Error& e) {
        f.add(what + ": " + e.what());
      }
    }
  }
}

// Integers: exact.
void int_ops_cpu_vs_cuda(const Placement& cuda, Failures& f) {
  const Placement cpu = on(cuda, "cpu");
  const NdSbp s0(std::vector<Sbp>(cuda.mesh().ndim(), sbp::split(0)));
  auto ints = [&](const Placement& p) { return arange<int64_t>(24, p, s0); };
  auto int_ops = [](const GlobalTensor<int64_t>& v) {
    GlobalTensor<int64_t> m = reshape(v, {4, 6});
    return concat({sum(matmul(transpose(m, 0, 1), m) * int64_t{3}, {0}), sum(div(m * int64_t{7}, m + int64_t{1}), {0}),
                   sum(detail::matmul_transposed(m, m, true, false), {0}),
                   sum(detail::matmul_transposed(m, m, false, true), {0})},
                  0);
  };
  const std::vector<int64_t> want = int_ops(ints(cpu)).full().to_vector(), got = int_ops(ints(cuda)).full().to_vector();
  if (got != want) f.add("int64 ops on " + cuda.to_string() + ": cuda and cpu differ");
}

// Gradients of a small model (matmul, relu, sigmoid, max, sum, cross_entropy, embedding: every
// backward helper op) on a cuda placement against the same on the cpu.
template <class T>
void backward_cpu_vs_cuda(const Placement& cuda, Failures& f) {
  const NdSbp b(std::vector<Sbp>(cuda.mesh().ndim(), sbp::broadcast));
  const NdSbp s0(std::vector<Sbp>(cuda.mesh().ndim(), sbp::split(0)));
  auto grads = [&](const Placement& p) {
    GlobalTensor<T> x = randn<T>({6, 10}, p, s0, 1), w = randn<T>({10, 4}, p, b, 3), table = randn<T>({7, 10}, p, b, 4);
    w.requires_grad_();
    table.requires_grad_();
    const GlobalTensor<int64_t> labels = from_host(Tensor<int64_t>::from_vector({6}, {0, 3, 1, 2, 3, 0}), p, b);
    const GlobalTensor<int64_t> ids = from_host(Tensor<int64_t>::from_vector({6}, {6, 0, 2, 2, 5, 1}), p, b);
    const GlobalTensor<T> h = relu(x + embedding(table, ids));
    const GlobalTensor<T> logits = matmul(h, w) * sigmoid(matmul(x, w)) + max(h, {1}, true);
    backward(cross_entropy(logits, labels) + sum(logits) * T(0.01f));
    return std::make_pair(w.grad().full().to_vector(), table.grad().full().to_vector());
  };
  try {
    const auto want = grads(on(cuda, "cpu")), got = grads(cuda);
    // 16-bit: every op of the chain rounds on both sides; 8 ulps of T relative to 1 + |grad|.
    const double rtol = is_half_v<T> ? 8 * static_cast<double>(std::numeric_limits<T>::epsilon()) : 1e-4;
    const std::string t(to_string(dtype_of<T>));
    expect_close(f, "backward " + t + ": grad of w on " + cuda.to_string(), got.first, want.first, rtol);
    expect_close(f, "backward " + t + ": grad of the embedding table on " + cuda.to_string(), got.second, want.second,
                 rtol);
  } catch (const Error& e) {
    f.add("backward " + std::string(to_string(dtype_of<T>)) + " on " + cuda.to_string() + ": " + e.what());
  }
}

// SGD (Nesterov, weight decay), Adam and AdamW with weight decay, every floating type: 3 steps on
// the same gradients on a cpu and a cuda placement (a B and an S(0) parameter); parameters and
// state must agree (the cuda kernel may contract into fused multiply-adds: a few ulps; 16-bit
// parameters and state update in float and round once per step on both sides: 2 ulps of T).
template <class T>
void optimizers_cpu_vs_cuda(const Placement& cuda, Failures& f) {
  const NdSbp b(std::vector<Sbp>(cuda.mesh().ndim(), sbp::broadcast));
  const NdSbp s0(std::vector<Sbp>(cuda.mesh().ndim(), sbp::split(0)));
  const double rtol = is_half_v<T>                  ? 2 * static_cast<double>(std::numeric_limits<T>::epsilon())
                      : std::is_same_v<T, float> ? 1e-5
                                                 : 1e-12;
  // Parameters, then state tensors, as host vectors.
  auto train = [&](const Placement& p, int which) {
    std::vector<GlobalTensor<T>> params = {randn<T>({6, 5}, p, b, 1).requires_grad_(),
                                           randn<T>({7, 3}, p, s0, 2).requires_grad_()};
    SGD<T> sgd(params, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
    Adam<T> adam(params, {.lr = 0.01, .weight_decay = 0.01});
    AdamW<T> adamw(params, {.lr = 0.01, .weight_decay = 0.1});
    for (int t = 1; t <= 3; ++t) {
      for (size_t i = 0; i < params.size(); ++i)
        params[i].autograd_meta()->grad = randn<T>(params[i].shape(), p, params[i].nd_sbp(), 10 * t + i).data();
      which == 0 ? sgd.step() : which == 1 ? adam.step() : adamw.step();
    }
    std::vector<std::optional<GlobalTensor<T>>> state = sgd.state().momentum;
    if (which == 1) state = adam.state().exp_avg_sq;
    if (which == 2) state = adamw.state().exp_avg;
    std::vector<std::vector<T>> out;
    for (const GlobalTensor<T>& q : params) out.push_back(q.full().to_vector());
    for (const auto& s : state) out.push_back(s ? s->full().to_vector() : std::vector<T>{});
    return out;
  };
  for (int which = 0; which < 3; ++which) {
    const std::string what = std::string(which == 0 ? "SGD" : which == 1 ? "Adam" : "AdamW") + " " +
                             std::string(to_string(dtype_of<T>)) + " on " + cuda.to_string();
    try {
      const auto want = train(on(cuda, "cpu"), which), got = train(cuda, which);
      for (size_t i = 0; i < want.size(); ++i)
        expect_close(f, what + ": tensor " + std::to_string(i), got[i], want[i], rtol);
    } catch (const Error& e) {
      f.add(what + ": " + e.what());
    }
  }
}

void random_bit_equal(const Placement& cuda, Failures& f) {
  const Placement cpu = on(cuda, "cpu");
  const NdSbp s0(std::vector<Sbp>(cuda.mesh().ndim(), sbp::split(0)));
  auto same_bits = [&](const std::string& what, const auto& a, const auto& b) {
    const auto x = a.full().to_vector(), y = b.full().to_vector();
    if (x.size() != y.size() || std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) != 0)
      f.add(what + " on " + cuda.to_string() + ": cuda values are not bit-equal to the cpu values");
  };
  same_bits("randn float", randn<float>({33, 7}, cpu, s0, 42), randn<float>({33, 7}, cuda, s0, 42));
  same_bits("randn double", randn<double>({33, 7}, cpu, s0, 42), randn<double>({33, 7}, cuda, s0, 42));
  same_bits("rand float", rand<float>({33, 7}, cpu, s0, 7), rand<float>({33, 7}, cuda, s0, 7));
  // 16-bit: the float value of the same counter rounded once, so the cpu, the cuda kernel and a
  // cast of the float tensor all agree bit for bit, in every layout.
  const NdSbp b(std::vector<Sbp>(cuda.mesh().ndim(), sbp::broadcast));
  for (const NdSbp& layout : {s0, b}) {
    same_bits("randn bfloat16", randn<spsd::bfloat16>({33, 7}, cpu, layout, 42), randn<spsd::bfloat16>({33, 7}, cuda, layout, 42));
    same_bits("randn bfloat16 = cast of randn float", randn<spsd::bfloat16>({33, 7}, cuda, layout, 42),
              cast<spsd::bfloat16>(randn<float>({33, 7}, cuda, layout, 42)));
    same_bits("randn float16", randn<spsd::float16>({33, 7}, cpu, layout, 42), randn<spsd::float16>({33, 7}, cuda, layout, 42));
    same_bits("rand float16 = cast of rand float", rand<spsd::float16>({33, 7}, cuda, layout, 7),
              cast<spsd::float16>(rand<float>({33, 7}, cuda, layout, 7)));
  }
}

// Every layout pair on cuda, and a sample across memory spaces; a 16-bit T moves 2-byte elements.
template <class T>
void boxing_on(const Placement& cuda, Failures& f) {
  const Placement cpu = on(cuda, "cpu");
  const Tensor<T> whole = spsd_test::reference_tensor<T>(Shape{5, 7});
  const std::vector<NdSbp> layouts = spsd_test::all_nd_sbps(cuda.mesh().ndim(), 2);
  int64_t i = 0;
  for (const NdSbp& from : layouts)
    for (const NdSbp& to : layouts) {
      spsd_test::check_boxing(whole, {cuda, from}, {cuda, to}, f);
      // Across memory spaces, a sample (every third pair) in each direction.
      if (i++ % 3 == 0) {
        spsd_test::check_boxing(whole, {cpu, from}, {cuda, to}, f);
        spsd_test::check_boxing(whole, {cuda, from}, {cpu, to}, f);
      }
    }
}

// Mixed precision as a user writes it: float32 master weights, the model casts weights and
// activations to H, gradients flow back through the casts into float32, Adam steps the masters.
// 5 steps of a small MLP on cuda and cpu placements: the losses and the updated masters agree
// within 8 ulps of H relative to 1 + |value| (each side rounds every H op once; float elsewhere).
template <class H>
void mixed_precision_cpu_vs_cuda(const Placement& cuda, Failures& f) {
  const NdSbp s0(std::vector<Sbp>(cuda.mesh().ndim(), sbp::split(0)));
  const NdSbp b(std::vector<Sbp>(cuda.mesh().ndim(), sbp::broadcast));
  auto train = [&](const Placement& p) {
    GlobalTensor<float> w1 = randn<float>({32, 64}, p, b, 1) * 0.1f, w2 = randn<float>({64, 10}, p, b, 2) * 0.1f;
    w1.requires_grad_();
    w2.requires_grad_();
    Adam<float> adam({w1, w2}, {.lr = 1e-2});
    const GlobalTensor<float> x = randn<float>({64, 32}, p, s0, 4);
    std::vector<int64_t> label_values(64);
    for (int64_t i = 0; i < 64; ++i) label_values[i] = (i * 7) % 10;
    const GlobalTensor<int64_t> labels = from_host(Tensor<int64_t>::from_vector({64}, label_values), p, s0);
    std::vector<float> out;
    for (int t = 0; t < 5; ++t) {
      const GlobalTensor<H> h = gelu(matmul(cast<H>(x), cast<H>(w1)));
      const GlobalTensor<float> loss = cast<float>(cross_entropy(matmul(h, cast<H>(w2)), labels));
      backward(loss);
      adam.step();
      adam.zero_grad();
      out.push_back(loss.full().to_vector()[0]);
    }
    for (float v : w1.full().to_vector()) out.push_back(v);
    return out;
  };
  const std::string what = "mixed precision (" + std::string(to_string(dtype_of<H>)) + " compute, float32 masters) on " +
                           cuda.to_string() + ": losses, then w1";
  try {
    expect_close(f, what, train(cuda), train(on(cuda, "cpu")), 8 * static_cast<double>(std::numeric_limits<H>::epsilon()));
  } catch (const Error& e) {
    f.add(what + ": " + e.what());
  }
}

void steady_state_allocations(const Placement& cuda, Failures& f) {
  const NdSbp s0(std::vector<Sbp>(cuda.mesh().ndim(), sbp::split(0)));
  const NdSbp b(std::vector<Sbp>(cuda.mesh().ndim(), sbp::broadcast));
  GlobalTensor<float> x = randn<float>({64, 32}, cuda, s0, 5), w = randn<float>({32, 32}, cuda, b, 6);
  auto step = [&] { return sum(relu(matmul(x, w)) + x, {1}).full(); };
  step();
  const int64_t warm = device_allocator_stats().raw_allocations;
  for (int k = 0; k < 20; ++k) step();
  const int64_t after = device_allocator_stats().raw_allocations;
  if (after != warm)
    f.add("steady state on " + cuda.to_string() + ": " + std::to_string(after - warm) +
          " device allocations in 20 repeated steps (expected 0: the caching allocator reuses blocks)");
}

// memory_stats(cuda) is the caching allocator's count: checkpointing 8 (256, 256) layers lowers
// this rank's device peak below 0.9x the plain chain's (test/common/recompute_suite.hpp).
void checkpoint_lowers_device_peak(const Placement& cuda, Failures& f) {
  namespace rc = spsd_test::recompute;
  const int64_t plain = rc::peak_bytes_of(cuda, rc::Checkpointing::kNone);
  const int64_t ckpt = rc::peak_bytes_of(cuda, rc::Checkpointing::kEachLayer);
  if (rank() == 0)
    std::printf("  device peak of 8 (256, 256) layers on %s: plain %lld B, checkpointed %lld B\n",
                cuda.to_string().c_str(), static_cast<long long>(plain), static_cast<long long>(ckpt));
  if (!(static_cast<double>(ckpt) < 0.9 * static_cast<double>(plain)))
    f.add("checkpointing on " + cuda.to_string() + ": device peak " + std::to_string(ckpt) + " B, plain " +
          std::to_string(plain) + " B (expected below 0.9x)");
}

// Forward, backward, optimizer step and the loss read of a small MLP: after warm-up, the loss
// read is the only host<->device copy and the only host wait, and the caching allocator serves
// every block. Every backward helper op runs on the device (no host staging).
void training_step_stays_on_device(const Placement& cuda, Failures& f) {
  const NdSbp s0(std::vector<Sbp>(cuda.mesh().ndim(), sbp::split(0)));
  const NdSbp b(std::vector<Sbp>(cuda.mesh().ndim(), sbp::broadcast));
  GlobalTensor<float> w1 = randn<float>({32, 64}, cuda, b, 1) * 0.1f, b1 = zeros<float>({64}, cuda, b),
                      w2 = randn<float>({64, 10}, cuda, b, 2) * 0.1f, table = randn<float>({50, 64}, cuda, b, 3);
  for (GlobalTensor<float>* p : {&w1, &b1, &w2, &table}) p->requires_grad_();
  Adam<float> adam({w1, b1, w2, table}, AdamOptions{});
  const GlobalTensor<float> x = randn<float>({64, 32}, cuda, s0, 4);
  std::vector<int64_t> label_values(64), id_values(64);
  for (int64_t i = 0; i < 64; ++i) label_values[i] = (i * 7) % 10, id_values[i] = (i * 13) % 50;
  const GlobalTensor<int64_t> labels = from_host(Tensor<int64_t>::from_vector({64}, label_values), cuda, s0);
  const GlobalTensor<int64_t> ids = from_host(Tensor<int64_t>::from_vector({64}, id_values), cuda, s0);
  auto step = [&] {
    const GlobalTensor<float> h = gelu(matmul(x, w1) + b1) + embedding(table, ids);
    const GlobalTensor<float> loss = cross_entropy(matmul(tanh(h), w2), labels) + sum(max(h, {1})) * 1e-3f;
    backward(loss);
    adam.step();
    adam.zero_grad();
    return loss.full().to_vector()[0];  // the one read the step asks for
  };
  try {
    for (int k = 0; k < 3; ++k) step();
    synchronize();
    reset_device_traffic();
    const int64_t allocations = device_allocator_stats().raw_allocations;
    step();
    const DeviceTraffic t = device_traffic();
    const std::string where = "training step on " + cuda.to_string() + ": ";
    if (t.total.host_to_device_copies != 0 || t.total.device_to_host_copies != 1 || t.total.synchronizations > 1)
      f.add(where + "expected only the loss read (1 device->host copy, <= 1 synchronization), got " + t.to_string());
    for (const auto& [op, counts] : t.by_op)
      if (op != DeviceTraffic::kNoOp) f.add(where + "op " + op + " touched the host: " + counts.to_string());
    if (device_allocator_stats().raw_allocations != allocations)
      f.add(where + std::to_string(device_allocator_stats().raw_allocations - allocations) +
            " device allocations in a steady step (expected 0)");
  } catch (const Error& e) {
    f.add("training step on " + cuda.to_string() + ": " + e.what());
  }
}

// The examples' MLP trained for 5 steps on cuda and on cpu placements of the same ranks: the same
// loss curve and first gradients (float with SGD, double with Adam; the tolerances of sim-train).
void training_cpu_vs_cuda(const std::vector<int64_t>& ranks, Failures& f) {
  std::vector<std::string> modes = {"data", "tensor"};
  if (ranks.size() % 2 == 0) modes.push_back("2d");
  for (const std::string& mode : modes) {
    try {
      const auto want = spsd_test::train_trace<float>(mode, ranks, 5, "cpu");
      const auto got = spsd_test::train_trace<float>(mode, ranks, 5, "cuda");
      spsd_test::expect_same_training<float>(f, "training (" + mode + ", float, SGD) on cuda vs cpu", got, want);
      const auto want_d = spsd_test::train_trace<double>(mode, ranks, 5, "cpu");
      const auto got_d = spsd_test::train_trace<double>(mode, ranks, 5, "cuda");
      spsd_test::expect_same_training<double>(f, "training (" + mode + ", double, Adam) on cuda vs cpu", got_d, want_d);
    } catch (const Error& e) {
      f.add("training (" + mode + ") on cuda: " + e.what());
    }
  }
}

// examples/08's GPT (attention, layer norm, dropout, embedding, vocab-parallel loss) trained for
// 3 steps on cuda and on cpu placements of the same ranks, every mode: the same loss curve and
// first gradients (double: the tolerances of sim-gpt).
void gpt_cpu_vs_cuda(const std::vector<int64_t>& ranks, Failures& f) {
  std::vector<std::string> modes = {"data", "sequence", "tensor"};
  if (ranks.size() % 2 == 0) modes.push_back("2d");
  for (const std::string& mode : modes) {
    try {
      const auto want = spsd_test::gpt_trace<double>(mode, ranks, 3, false, "cpu");
      const auto got = spsd_test::gpt_trace<double>(mode, ranks, 3, false, "cuda");
      spsd_test::expect_same_training<double>(f, "GPT (" + mode + ", double) on cuda vs cpu", got, want);
    } catch (const Error& e) {
      f.add("GPT (" + mode + ") on cuda: " + e.what());
    }
  }
}

void run_all(int64_t world, Failures& f) {
  std::vector<int64_t> ranks(world);
  for (int64_t r = 0; r < world; ++r) ranks[r] = r;
  std::vector<Placement> placements = {Placement("cuda", ranks)};
  if (world == 4) placements.push_back(Placement("cuda", {{0, 1}, {2, 3}}));
  for (const Placement& p : placements) {
    spsd_test::OpSuiteOptions options;
    options.full_stride = 5;
    options.other_stride = 17;
    spsd_test::OpSuiteCounts counts;
    spsd_test::run_op_suite(p, options, f, counts);
    if (rank() == 0) std::printf("  op suite on %s: %s\n", p.to_string().c_str(), counts.to_string().c_str());
    every_op_cpu_vs_cuda<float>(p, f);
    int_ops_cpu_vs_cuda(p, f);
    backward_cpu_vs_cuda<float>(p, f);
    random_bit_equal(p, f);
    optimizers_cpu_vs_cuda<float>(p, f);
    optimizers_cpu_vs_cuda<double>(p, f);
    boxing_on<float>(p, f);
    every_op_cpu_vs_cuda<spsd::bfloat16>(p, f);
    every_op_cpu_vs_cuda<spsd::float16>(p, f);
    backward_cpu_vs_cuda<spsd::bfloat16>(p, f);
    backward_cpu_vs_cuda<spsd::float16>(p, f);
    optimizers_cpu_vs_cuda<spsd::bfloat16>(p, f);
    optimizers_cpu_vs_cuda<spsd::float16>(p, f);
    boxing_on<spsd::bfloat16>(p, f);
    mixed_precision_cpu_vs_cuda<spsd::bfloat16>(p, f);
    mixed_precision_cpu_vs_cuda<spsd::float16>(p, f);
    steady_state_allocations(p, f);
    checkpoint_lowers_device_peak(p, f);
    training_step_stays_on_device(p, f);
  }
  training_cpu_vs_cuda(ranks, f);
  gpt_cpu_vs_cuda(ranks, f);
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  if (const auto devices = spsd_test::find_cuda_devices("gpu-ops"); devices.count == 0) return devices.exit_code;
  Failures failures;
  std::printf("rank %d: %s\n", rank(), runtime_info().c_str());
  run_all(world_size(), failures);
  if (world_size() == 1) {
    for (int n : {2, 4}) {
      std::printf("simulate(%d), host-staged on one GPU:\n", n);
      failures.merge(spsd_test::on_simulated_ranks(n, [n](Failures& f) { run_all(n, f); }));
    }
  }
  int64_t mine = static_cast<int64_t>(failures.size()), total = 0;
  world_communicator().all_reduce(&mine, &total, 1, DType::kInt64, ReduceOp::kSum);
  if (!failures.empty()) std::printf("rank %d FAILURES:\n%s", rank(), failures.report().c_str());
  if (rank() == 0) std::printf("%s: %lld failures over all ranks\n", total ? "FAIL" : "PASS", static_cast<long long>(total));
  return total ? 1 : 0;
}
