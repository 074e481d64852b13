// bench/attention: the fused cpu attention kernel (kernel/cpu/attention.hpp: online softmax over
// key blocks, block GEMMs) against the composed form it replaces, matmul (q k^T, OpenBLAS) +
// scale + softmax + matmul (P v), on one core, float32, (1, 8, S, 64) for S = 64 to 2048,
// causal off and on (the composed form masks nothing: it is the non-causal cost); then the fused
// backward (attention_grad_q + attention_grad_kv, from the saved lse) against the fused forward.
// Also the bytes of the (S, S) score matrix per (batch x head) the composed form holds and the
// fused one never does. bench/train_torch.py --attention times PyTorch's bmm-softmax-bmm on the
// same shapes.
//
//   build/bench/attention
//
// Each figure is the fastest of several calls after a warm-up; the ratio is fused time /
// composed time (below 1: the fused kernel is faster).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "spsd/kernel/cpu/attention.hpp"
#include "spsd/kernel/cpu/reduce.hpp"
#include "spsd/kernel/cpu/gemm.hpp"
#include "spsd/kernel/cpu/softmax.hpp"

namespace {

using namespace spsd;
namespace cpu = spsd::kernel::cpu;
using Clock = std::chrono::steady_clock;

// The fastest of reps calls after a warm-up, in seconds: the least disturbed by other processes
// on a shared machine.
template <class F>
double best_seconds(F&& call, int reps) {
  call();
  double best = INFINITY;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    call();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main() {
  const int64_t heads = 8, D = 64;
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::printf("| S | causal | fused ms | composed ms | fused / composed | backward ms | backward / forward | "
              "score matrix (composed) |\n|---|---|---|---|---|---|---|---|\n");
  for (int64_t S : {64, 128, 512, 1024, 2048}) {
    std::vector<float> q(heads * S * D), k(q.size()), v(q.size()), out(q.size()), scores(heads * S * S);
    std::vector<float> g(q.size()), lse(heads * S), dq(q.size()), dkv(2 * q.size());
    for (auto* x : {&q, &k, &v, &g})
      for (float& e : *x) e = dist(gen);
    const Shape qs{heads, S, D}, ss{heads, S, S};
    const int reps = S >= 2048 ? 2 : S >= 1024 ? 5 : 20;
    const double composed = best_seconds(
        [&] {
          cpu::matmul<float>(q.data(), qs, k.data(), qs, scores.data(), ss, false, true);
          cpu::scale<float>(scores.data(), static_cast<int64_t>(scores.size()), 1 / std::sqrt(float(D)));
          cpu::softmax<float>(scores.data(), ss, 2, scores.data(), false);
          cpu::matmul<float>(scores.data(), ss, v.data(), qs, out.data(), qs, false, false);
        },
        reps);
    for (bool causal : {false, true}) {
      const cpu::AttentionDims d{heads, S, S, D, 0, 0, causal, 1 / std::sqrt(double(D))};
      const double fused =
          best_seconds([&] { cpu::attention_forward<float>(q.data(), k.data(), v.data(), d, out.data(), nullptr); }, reps);
      cpu::attention_forward<float>(q.data(), k.data(), v.data(), d, out.data(), lse.data());
      const double backward = best_seconds(
          [&] {
            cpu::attention_backward_q<float>(q.data(), k.data(), v.data(), out.data(), g.data(), lse.data(), d,
                                             dq.data());
            cpu::attention_backward_kv<float>(q.data(), k.data(), v.data(), out.data(), g.data(), lse.data(), d,
                                              dkv.data());
          },
          reps);
      std::printf("| %lld | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f MiB |\n", static_cast<long long>(S),
                  causal ? "yes" : "no", fused * 1e3, composed * 1e3, fused / composed, backward * 1e3,
                  backward / fused, scores.size() * 4.0 / (1 << 20));
    }
  }
}
