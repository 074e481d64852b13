// bench/gpu: spsd on one GPU (a cuda placement of one rank) against the raw CUDA baselines,
// measured in the same run:
//   - matmul 4096^3 and 8192^3 float: global matmul vs cublasSgemm on the same buffers' sizes
//     (ratio = cuBLAS time / spsd time; target >= 0.97);
//   - GEMM 8192^3 in bfloat16, float16, float32 with TF32 (MatmulPrecision::kHigh) and exact
//     float32 (kHighest) through spsd's cuda matmul kernel (what the op runs on one rank): TFLOP/s;
//     bench/gpu_torch.py prints torch.matmul's for the same shapes and dtypes, and tools/gpu-check
//     puts the two side by side with their ratio (target: bf16 >= 0.9x torch);
//   - element-wise add and a row sum vs cudaMemcpyAsync device-to-device of the same bytes
//     (fraction of copy bandwidth; target >= 0.85);
//   - dispatch overhead: a global add / matmul on tiny tensors, host time per call
//     (target < 10 us; bench/gpu_torch.py times PyTorch eager on the same machine).
//   build-gpu/bench/gpu [--quick]
// Times are medians over repetitions, each repetition ended by a stream synchronize and timed
// with CUDA events (kernels) or the host clock (dispatch). Exits 77 without a usable GPU.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "spsd/kernel/cuda/gemm.hpp"
#include "spsd/kernel/cuda/random.hpp"
#include "spsd/spsd.hpp"

namespace {

using namespace spsd;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw Error(std::string(what) + ": cuBLAS status " + std::to_string(s));
}

cudaStream_t stream() { return static_cast<cudaStream_t>(detail::stream_for(DeviceType::kCUDA)); }

// Median milliseconds of body over reps, timed with events on the compute stream.
double median_ms(int reps, const std::function<void()>& body) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  body();  // warm-up
  check(cudaStreamSynchronize(stream()), "sync");
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    check(cudaEventRecord(start, stream()), "record");
    body();
    check(cudaEventRecord(stop, stream()), "record");
    check(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    t.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

void matmul_vs_cublas(int64_t n, int reps) {
  const Placement p("cuda", {0});
  const NdSbp b{sbp::broadcast};
  GlobalTensor<float> x = randn<float>({n, n}, p, b, 1), y = randn<float>({n, n}, p, b, 2);
  const double spsd_ms = median_ms(reps, [&] { (void)matmul(x, y); });
  cublasHandle_t h;
  check(cublasCreate(&h), "cublasCreate");
  check(cublasSetStream(h, stream()), "cublasSetStream");
  Tensor<float> c(Shape{n, n}, DeviceType::kCUDA);
  const float one = 1, zero = 0;
  const int m = static_cast<int>(n);
  // Row-major C = A B is column-major C^T = B^T A^T: swap the operands.
  const double raw_ms = median_ms(reps, [&] {
    check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, y.to_local().data(), m, x.to_local().data(), m, &zero,
                      c.data(), m),
          "cublasSgemm");
  });
  cublasDestroy(h);
  const double tflops = 2.0 * n * n * n / (spsd_ms * 1e-3) / 1e12;
  std::printf("| matmul %lld^3 float | %.3f ms | %.3f ms (cublasSgemm) | %.3f | %.1f TFLOP/s |\n",
              static_cast<long long>(n), spsd_ms, raw_ms, raw_ms / spsd_ms, tflops);
}

// n^3 GEMM of T at a matmul precision through kernel::cuda::matmul on raw device buffers (the
// op layer adds microseconds of dispatch to milliseconds): "| gemm n^3 LABEL | ms | TFLOP/s |".
template <class T>
void gemm_precision(const char* label, int64_t n, int reps, MatmulPrecision precision) {
  const Shape s{n, n};
  T *a = nullptr, *b = nullptr, *c = nullptr;
  for (T** p : {&a, &b, &c}) check(cudaMalloc(p, static_cast<size_t>(n * n) * sizeof(T)), "cudaMalloc");
  kernel::cuda::fill_normal<T>(a, Box{{0, 0}, {n, n}}, s, 1, stream());
  kernel::cuda::fill_normal<T>(b, Box{{0, 0}, {n, n}}, s, 2, stream());
  set_matmul_precision(precision);
  const double ms = median_ms(reps, [&] { kernel::cuda::matmul<T>(a, s, b, s, c, s, stream()); });
  set_matmul_precision(MatmulPrecision::kHighest);
  for (T* p : {a, b, c}) cudaFree(p);
  std::printf("| gemm %lld^3 %s | %.3f ms | %.1f TFLOP/s |\n", static_cast<long long>(n), label, ms,
              2.0 * n * n * n / (ms * 1e-3) / 1e12);
}

void bandwidth(int64_t elems, int reps) {
  const Placement p("cuda", {0});
  const NdSbp b{sbp::broadcast};
  GlobalTensor<float> x = randn<float>({elems / 1024, 1024}, p, b, 1), y = randn<float>({elems / 1024, 1024}, p, b, 2);
  Tensor<float> dst(Shape{elems}, DeviceType::kCUDA);
  const int64_t bytes = elems * static_cast<int64_t>(sizeof(float));
  // A copy reads and writes `bytes`; add reads 2x and writes 1x; a row sum reads 1x.
  const double copy_ms = median_ms(reps, [&] {
    check(cudaMemcpyAsync(dst.data(), x.to_local().data(), bytes, cudaMemcpyDeviceToDevice, stream()), "copy");
  });
  const double add_ms = median_ms(reps, [&] { (void)(x + y); });
  const double sum_ms = median_ms(reps, [&] { (void)sum(x, {1}); });
  const double copy_gbs = 2.0 * bytes / (copy_ms * 1e-3) / 1e9;
  const double add_gbs = 3.0 * bytes / (add_ms * 1e-3) / 1e9, sum_gbs = 1.0 * bytes / (sum_ms * 1e-3) / 1e9;
  std::printf("| add %lld MiB float | %.3f ms | %.0f GB/s | copy %.0f GB/s | %.2f |\n",
              static_cast<long long>(bytes >> 20), add_ms, add_gbs, copy_gbs, add_gbs / copy_gbs);
  std::printf("| row sum %lld MiB float | %.3f ms | %.0f GB/s | copy %.0f GB/s | %.2f |\n",
              static_cast<long long>(bytes >> 20), sum_ms, sum_gbs, copy_gbs, sum_gbs / copy_gbs);
}

// Host microseconds per call of op, median over reps of `calls` back-to-back calls (the GPU
// runs the tiny kernels behind the host: the figure is what dispatch adds, not kernel time).
double dispatch_us(int reps, int calls, const std::function<void()>& op) {
  std::vector<double> t;
  for (int r = 0; r < reps + 2; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (int c = 0; c < calls; ++c) op();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / calls);
    check(cudaStreamSynchronize(stream()), "sync");
  }
  t.erase(t.begin(), t.begin() + 2);  // warm-up
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (!cuda_available()) {
    std::printf("SKIP: no usable CUDA device (%s)\n", runtime_info().c_str());
    return 77;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device()), "properties");
  std::printf("bench/gpu on %s; %s\n\n", prop.name, runtime_info().c_str());
  const int reps = quick ? 3 : 10;

  std::printf("| case | spsd | baseline | ratio | |\n|---|---|---|---|---|\n");
  for (int64_t n : {int64_t{4096}, int64_t{8192}}) matmul_vs_cublas(n, reps);
  bandwidth(int64_t{64} << 20, reps);  // 256 MiB per operand

  std::printf("\n| GEMM, spsd's cuda matmul kernel | ms | TFLOP/s |\n|---|---|---|\n");
  const int64_t g = 8192;
  // spsd:: qualified: OpenBLAS's cblas.h (in spsd.hpp through kernel/cpu/gemm.hpp) declares a
  // global typedef bfloat16, which `using namespace spsd` makes ambiguous.
  gemm_precision<spsd::bfloat16>("bfloat16", g, reps, MatmulPrecision::kHighest);
  gemm_precision<spsd::float16>("float16", g, reps, MatmulPrecision::kHighest);
  gemm_precision<float>("float32 tf32", g, reps, MatmulPrecision::kHigh);
  gemm_precision<float>("float32", g, reps, MatmulPrecision::kHighest);

  const Placement p("cuda", {0});
  const NdSbp b{sbp::broadcast};
  GlobalTensor<float> a = randn<float>({4, 4}, p, b, 1), c = randn<float>({4, 4}, p, b, 2);
  const int calls = quick ? 200 : 2000;
  std::printf("\n| dispatch, (4, 4) float, cached signature | host us per call |\n|---|---|\n");
  std::printf("| add | %.2f |\n", dispatch_us(reps, calls, [&] { (void)(a + c); }));
  std::printf("| matmul | %.2f |\n", dispatch_us(reps, calls, [&] { (void)matmul(a, c); }));
  std::printf("| relu | %.2f |\n", dispatch_us(reps, calls, [&] { (void)relu(a); }));
  return 0;
}
