#pragma once
// The runtime layer's one kernel, apart from the device runtime itself (whose host code the
// fake-CUDA tests link; they put a host-side fill in its place: test/fake_cuda).
#include <cuda_runtime.h>

#include <cstdint>

namespace spsd::detail {

// Enqueues on stream: count words of word_bytes bytes (2, 4 or 8) at dst set to *value. Launch
// errors are left to cudaGetLastError.
void fill_words(void* dst, int64_t count, const void* value, int64_t word_bytes, cudaStream_t stream);

}  // namespace spsd::detail
