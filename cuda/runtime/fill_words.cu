// Factories' constant fills (zeros, ones, full) written on the device instead of copied from the
// host (fill_words.hpp).
#include "fill_words.hpp"

#include <algorithm>
#include <cstring>

namespace spsd::detail {

namespace {

template <class Word>
__global__ void fill_kernel(Word* dst, int64_t count, Word value) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = value;
}

template <class Word>
void launch(void* dst, int64_t count, const void* value, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, 1 << 16));
  Word word;
  std::memcpy(&word, value, sizeof word);
  fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<Word*>(dst), count, word);
}

}  // namespace

void fill_words(void* dst, int64_t count, const void* value, int64_t word_bytes, cudaStream_t stream) {
  if (word_bytes == 8) launch<uint64_t>(dst, count, value, stream);
  else if (word_bytes == 4) launch<uint32_t>(dst, count, value, stream);
  else launch<uint16_t>(dst, count, value, stream);  // 2: bfloat16, float16
}

}  // namespace spsd::detail
