// bench/kernels: throughput of the local CPU kernels on one core, with a baseline from the
// same run for each: memcpy for the bandwidth-bound kernels (add, relu, sum, softmax, permute
// read and write each element about once, as memcpy does), and a naive triple loop for GEMM
// (what a kernel without BLAS would do; OpenBLAS is what spsd calls). Two more tables compare
// each new form with the one it replaced, in the same run: the element-wise math loops in
// their AVX2 copy against their x86-64 baseline copy (kernel/cpu/isa.hpp), and a linear
// layer's weight gradient x^T g as one GEMM over the batch's rows (matmul_batch_summed's
// kernel) against one GEMM per batch element and a sum over the batch.
//
//   build/bench/kernels [--n ELEMENTS] [--gemm M]
//
// Each figure is the median over repetitions of the time of one call after a warm-up.
// Bandwidth counts bytes read plus bytes written once (add of n floats: 12 n bytes; memcpy of
// n floats: 8 n bytes).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "spsd/kernel/cpu/elementwise.hpp"
#include "spsd/kernel/cpu/gemm.hpp"
#include "spsd/kernel/cpu/isa.hpp"
#include "spsd/kernel/cpu/permute.hpp"
#include "spsd/kernel/cpu/reduce.hpp"
#include "spsd/kernel/cpu/softmax.hpp"

namespace {

using namespace spsd;
namespace cpu = spsd::kernel::cpu;
using Clock = std::chrono::steady_clock;

volatile float sink = 0;  // keeps results observable

// Median time of one call, in seconds.
double seconds_per_call(const std::function<void()>& call, int reps) {
  call();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    call();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void row(const char* what, double bytes, double s, double baseline_bytes, double baseline_s) {
  const double gbs = bytes / s * 1e-9, base = baseline_bytes / baseline_s * 1e-9;
  std::printf("| %-34s | %9.1f | %8.1f | %8.1f | %5.2f |\n", what, s * 1e6, gbs, base, gbs / base);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 1 << 20, m = 512;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--n") && i + 1 < argc) n = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--gemm") && i + 1 < argc) m = std::atoll(argv[++i]);
  }
  const int reps = 50;
  std::vector<float> a(n), b(n), out(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i % 97) * 0.01f - 0.3f;
    b[i] = static_cast<float>(i % 89) * 0.02f + 0.1f;
  }
  const double copy_s = seconds_per_call([&] { std::memcpy(out.data(), a.data(), n * sizeof(float)); }, reps);
  const double copy_bytes = 8.0 * n;
  const Shape flat{n};
  const int64_t cols = 1024, rows = n / cols;
  const Shape matrix{rows, cols};

  std::printf("local kernels, float32, %lld elements (memcpy: %.1f us, %.1f GB/s)\n\n", static_cast<long long>(n),
              copy_s * 1e6, copy_bytes / copy_s * 1e-9);
  std::printf("| kernel | us | GB/s | memcpy GB/s | ratio |\n|---|---|---|---|---|\n");
  row("add (same shapes)", 12.0 * n,
      seconds_per_call([&] { cpu::binary<float>(cpu::BinaryOp::kAdd, a.data(), flat, b.data(), flat, out.data(), flat); },
                       reps),
      copy_bytes, copy_s);
  const Shape bias{cols};
  row("add (rows, cols) + (cols) broadcast", 8.0 * n,
      seconds_per_call(
          [&] { cpu::binary<float>(cpu::BinaryOp::kAdd, a.data(), matrix, b.data(), bias, out.data(), matrix); }, reps),
      copy_bytes, copy_s);
  row("mul by scalar", 8.0 * n,
      seconds_per_call([&] { cpu::binary_scalar<float>(cpu::BinaryOp::kMul, a.data(), 0.5f, out.data(), n, false); },
                       reps),
      copy_bytes, copy_s);
  row("relu", 8.0 * n, seconds_per_call([&] { cpu::unary<float>(cpu::UnaryOp::kRelu, a.data(), out.data(), n); }, reps),
      copy_bytes, copy_s);
  const int64_t all[] = {0};
  row("sum of all", 4.0 * n, seconds_per_call([&] {
        float s;
        cpu::reduce<float>(ReduceOp::kSum, a.data(), flat, all, &s);
        sink = s;
      }, reps),
      copy_bytes, copy_s);
  const int64_t axis0[] = {0}, axis1[] = {1};
  row("sum over rows (column sums)", 4.0 * n,
      seconds_per_call([&] { cpu::reduce<float>(ReduceOp::kSum, a.data(), matrix, axis0, out.data()); }, reps),
      copy_bytes, copy_s);
  row("max over cols (row maxima)", 4.0 * n,
      seconds_per_call([&] { cpu::reduce<float>(ReduceOp::kMax, a.data(), matrix, axis1, out.data()); }, reps),
      copy_bytes, copy_s);
  row("softmax over cols", 8.0 * n,
      seconds_per_call([&] { cpu::softmax<float>(a.data(), matrix, 1, out.data(), false); }, reps), copy_bytes, copy_s);
  const std::vector<int64_t> swap = {1, 0};
  row("transpose (rows, cols)", 8.0 * n,
      seconds_per_call([&] { cpu::permute<float>(a.data(), matrix, swap, out.data()); }, reps), copy_bytes, copy_s);

  // GEMM: m x m x m, against a naive i-k-j loop (the best plain loop order) on the same data.
  std::vector<float> x(m * m), y(m * m), z(m * m);
  for (int64_t i = 0; i < m * m; ++i) {
    x[i] = a[i % n];
    y[i] = b[i % n];
  }
  const Shape sq{m, m};
  const double flops = 2.0 * m * m * m;
  const double blas_s =
      seconds_per_call([&] { cpu::matmul<float>(x.data(), sq, y.data(), sq, z.data(), sq); }, std::max(3, reps / 5));
  // bfloat16 through the same sgemm on widened copies (Debian's OpenBLAS has no sbgemm).
  std::vector<bfloat16> xh(m * m), yh(m * m), zh(m * m);
  for (int64_t i = 0; i < m * m; ++i) xh[i] = bfloat16(x[i]), yh[i] = bfloat16(y[i]);
  const double bf16_s = seconds_per_call(
      [&] { cpu::matmul<bfloat16>(xh.data(), sq, yh.data(), sq, zh.data(), sq); }, std::max(3, reps / 5));
  const double naive_s = seconds_per_call([&] {
    std::fill(z.begin(), z.end(), 0.0f);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t k = 0; k < m; ++k) {
        const float xik = x[i * m + k];
        for (int64_t j = 0; j < m; ++j) z[i * m + j] += xik * y[k * m + j];
      }
    sink = z[0];
  }, 3);
  std::printf("\n| gemm %lldx%lldx%lld | ms | GFLOP/s |\n|---|---|---|\n", static_cast<long long>(m),
              static_cast<long long>(m), static_cast<long long>(m));
  std::printf("| spsd matmul (OpenBLAS sgemm) | %.2f | %.1f |\n", blas_s * 1e3, flops / blas_s * 1e-9);
  std::printf("| spsd matmul bfloat16 (widen, sgemm, narrow) | %.2f | %.1f |\n", bf16_s * 1e3, flops / bf16_s * 1e-9);
  std::printf("| naive i-k-j loop | %.2f | %.1f |\n", naive_s * 1e3, flops / naive_s * 1e-9);

  // The dispatched loops in each copy: the CPU's (AVX2 where it has it) against the baseline.
  const cpu::Isa best = cpu::isa();
  std::printf("\n| %lld floats | baseline us | %s us | baseline / %s |\n|---|---|---|---|\n",
              static_cast<long long>(n), best == cpu::Isa::kAvx2 ? "avx2" : "baseline",
              best == cpu::Isa::kAvx2 ? "avx2" : "baseline");
  auto isa_row = [&](const char* what, const std::function<void()>& call) {
    cpu::set_isa(cpu::Isa::kBaseline);
    const double base = seconds_per_call(call, reps);
    cpu::set_isa(best);
    const double fast = seconds_per_call(call, reps);
    std::printf("| %-28s | %8.1f | %8.1f | %5.2f |\n", what, base * 1e6, fast * 1e6, base / fast);
  };
  using U = cpu::UnaryOp;
  for (const U op : {U::kGelu, U::kErf, U::kTanh, U::kExp, U::kSilu}) {
    const std::string name(cpu::to_string(op));
    isa_row(name.c_str(), [&] { cpu::unary<float>(op, a.data(), out.data(), n); });
    isa_row((name + " gradient").c_str(), [&] { cpu::unary_grad<float>(op, a.data(), b.data(), out.data(), n); });
  }
  // The inputs above lie in [-0.3, 0.67], where gelu's loops compute erf's first case alone; here
  // x in [-4, 4), most blocks of 16 holding an element past the switch: both cases, and a select.
  std::vector<float> wide(a.size());
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<float>(i * 7919 % 1601) * 0.005f - 4.0f;
  isa_row("gelu, x in [-4, 4)", [&] { cpu::unary<float>(U::kGelu, wide.data(), out.data(), n); });
  isa_row("gelu gradient, x in [-4, 4)", [&] { cpu::unary_grad<float>(U::kGelu, wide.data(), b.data(), out.data(), n); });
  const Shape rows512{n / 512, 512};
  isa_row("softmax, rows of 512", [&] { cpu::softmax<float>(a.data(), rows512, 1, out.data(), false); });
  isa_row("softmax backward, rows of 512",
          [&] { cpu::softmax_backward<float>(a.data(), b.data(), rows512, 1, out.data(), false); });

  // A linear layer's weight gradient x^T g for x (16, 64, k), g (16, 64, n): the GPT's shapes.
  std::printf("\n| x^T g, x (16, 64, k), g (16, 64, n) | batched + sum ms | one GEMM ms | ratio |\n|---|---|---|---|\n");
  for (const auto& [k, nn] : {std::pair<int64_t, int64_t>{128, 128}, {128, 512}, {512, 128}, {128, 96}}) {
    std::vector<float> xs(16 * 64 * k), gs(16 * 64 * nn), per(16 * k * nn), dw(k * nn);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = a[i % n];
    for (size_t i = 0; i < gs.size(); ++i) gs[i] = b[i % n];
    const int64_t batch_axis[] = {0};
    const double batched = seconds_per_call([&] {
      cpu::matmul<float>(xs.data(), Shape{16, 64, k}, gs.data(), Shape{16, 64, nn}, per.data(), Shape{16, k, nn}, true,
                         false);
      cpu::reduce<float>(ReduceOp::kSum, per.data(), Shape{16, k, nn}, batch_axis, dw.data());
    }, reps);
    const double one = seconds_per_call([&] {
      cpu::matmul<float>(xs.data(), Shape{1024, k}, gs.data(), Shape{1024, nn}, dw.data(), Shape{k, nn}, true, false);
    }, reps);
    std::printf("| k %lld, n %lld | %.3f | %.3f | %.2f |\n", static_cast<long long>(k), static_cast<long long>(nn),
                batched * 1e3, one * 1e3, batched / one);
  }
  return 0;
}
