#pragma once
// Printing from several processes without interleaving, shared by the examples.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <spsd/spsd.hpp>
#include <string>
#include <vector>

namespace examples {

// Rank 0 prints every rank's text, in rank order. Collective over the world; the strings
// travel as int32 words.
inline void print_by_rank(const std::string& text) {
  using namespace spsd;
  Communicator& world = world_communicator();
  int64_t words = (static_cast<int64_t>(text.size()) + 3) / 4;
  std::vector<int64_t> counts(world_size());
  world.all_gather(&words, counts.data(), 1, DType::kInt64);
  std::vector<int32_t> mine(words, 0), all(traffic::total(counts));
  std::memcpy(mine.data(), text.data(), text.size());
  world.all_gather_v(mine.data(), all.data(), counts, DType::kInt32);
  if (rank() != 0) return;
  const char* at = reinterpret_cast<const char*>(all.data());
  for (int r = 0; r < world_size(); at += counts[r] * 4, ++r) std::cout << std::string(at, strnlen(at, counts[r] * 4));
  std::cout << std::flush;
}

// A local tensor as rows of numbers, as OneFlow prints one.
template <class T>
std::string format(const spsd::Tensor<T>& t, const std::string& indent = "    ") {
  if (!t.defined()) return indent + "(none: this rank is not in the placement)\n";
  std::string s;
  const int64_t cols = t.shape().ndim() ? t.shape()[t.shape().ndim() - 1] : 1;
  std::vector<T> v = t.to_vector();
  char buf[32];
  for (int64_t i = 0; i < t.numel(); ++i) {
    std::snprintf(buf, sizeof buf, "%8.4f", static_cast<double>(v[i]));
    s += (i % cols == 0 ? indent + "[" : ",") + std::string(buf) + (i % cols == cols - 1 ? "]\n" : "");
  }
  return s;
}

inline void print_once(const std::string& text) {
  if (spsd::rank() == 0) std::cout << text << std::flush;
}

}  // namespace examples
