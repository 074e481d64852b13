// Fake conversions of NCCL's float32 wire (cuda/comm/half_wire.hpp), linked into fake-cuda-comm in
// place of half_wire.cu's kernels: the same conversions (core/half.hpp, round to nearest even) run
// on the host as stream work of fake_cudart.cpp, so they are ordered exactly as the kernels would
// be. A buffer that is not memory of the stream's device, where a kernel would fault, aborts the
// process with a message. Each call is counted per thread (fake_control.hpp).
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "comm/half_wire.hpp"
#include "fake_control.hpp"
#include "spsd/core/half.hpp"

namespace {

thread_local FakeHalfWire conversions;

void check_on_device(const void* p, std::size_t bytes, cudaStream_t stream, const char* what) {
  const int device = fake_cuda_device_of(p, bytes);
  if (device == -2 || device == fake_cuda_stream_device(stream)) return;
  std::fprintf(stderr, "FAKE CUDA: %s: %zu bytes at %p are not memory of the stream's device %d\n", what, bytes, p,
               fake_cuda_stream_device(stream));
  std::abort();
}

template <class T>
void widen(const T* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

template <class T>
void narrow(const float* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = T(src[i]);
}

}  // namespace

FakeHalfWire fake_half_wire_take() { return std::exchange(conversions, FakeHalfWire{}); }

namespace spsd::detail {

void widen_halves(const void* src, DType t, float* dst, int64_t n, cudaStream_t stream) {
  ++conversions.widened;
  if (n == 0) return;
  check_on_device(src, n * 2, stream, "widen_halves (source)");
  check_on_device(dst, n * 4, stream, "widen_halves (destination)");
  fake_cuda_enqueue(stream, [=] {
    if (t == DType::kBFloat16) widen(static_cast<const bfloat16*>(src), dst, n);
    else widen(static_cast<const float16*>(src), dst, n);
  });
}

void narrow_to_halves(const float* src, DType t, void* dst, int64_t n, cudaStream_t stream) {
  ++conversions.narrowed;
  if (n == 0) return;
  check_on_device(src, n * 4, stream, "narrow_to_halves (source)");
  check_on_device(dst, n * 2, stream, "narrow_to_halves (destination)");
  fake_cuda_enqueue(stream, [=] {
    if (t == DType::kBFloat16) narrow(src, static_cast<bfloat16*>(dst), n);
    else narrow(src, static_cast<float16*>(dst), n);
  });
}

}  // namespace spsd::detail
