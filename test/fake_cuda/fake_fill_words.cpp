// Fake constant fill (cuda/runtime/fill_words.hpp), linked into the fake-CUDA tests in place of
// fill_words.cu's kernel: the same words written on the host as stream work of fake_cudart.cpp,
// ordered as the kernel would be. A destination that is not memory of the stream's device, where
// the kernel would fault, aborts the process with a message.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fake_control.hpp"
#include "runtime/fill_words.hpp"

namespace spsd::detail {

void fill_words(void* dst, int64_t count, const void* value, int64_t word_bytes, cudaStream_t stream) {
  if (count == 0) return;
  const std::size_t bytes = static_cast<std::size_t>(count * word_bytes);
  if (fake_cuda_device_of(dst, bytes) != fake_cuda_stream_device(stream)) {
    std::fprintf(stderr, "FAKE CUDA: fill_words: %zu bytes at %p are not memory of the stream's device %d\n", bytes,
                 dst, fake_cuda_stream_device(stream));
    std::abort();
  }
  std::vector<char> word(static_cast<const char*>(value), static_cast<const char*>(value) + word_bytes);
  fake_cuda_enqueue(stream, [=] {
    for (int64_t i = 0; i < count; ++i) std::memcpy(static_cast<char*>(dst) + i * word_bytes, word.data(), word.size());
  });
}

}  // namespace spsd::detail
