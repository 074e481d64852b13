#pragma once
// This rank's stream of seeds, for what needs a fresh random draw on every call: nn::Dropout's
// masks. Every rank draws the same sequence, since every rank runs the same program, so a mask
// is still the same whatever the layout. checkpoint() saves the position before its function
// runs and rewinds to it when backward recomputes, so the recomputation draws the same masks
// (as torch.utils.checkpoint restores the RNG state). Per thread: simulated ranks are threads.
#include <cstdint>

namespace spsd {

// The seed a stream started from and how many seeds were drawn since.
struct SeedStream {
  uint64_t base = 0;      // manual_seed's value
  uint64_t position = 0;  // draws taken since
  // The same base and position: the same seeds to come.
  friend bool operator==(const SeedStream&, const SeedStream&) = default;
};

namespace detail {
inline thread_local SeedStream seed_stream_state;

// SplitMix64's finalizer: neighbouring positions give unrelated seeds.
constexpr uint64_t mix_seed(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace detail

// Restarts the stream: the draws that follow depend only on base.
inline void manual_seed(uint64_t base) { detail::seed_stream_state = {base, 0}; }
// The next seed of the stream.
inline uint64_t next_seed() {
  SeedStream& s = detail::seed_stream_state;
  return detail::mix_seed((s.base + 1) * 0x9E3779B97F4A7C15ull + s.position++);
}
inline SeedStream seed_stream() { return detail::seed_stream_state; }
inline void set_seed_stream(const SeedStream& s) { detail::seed_stream_state = s; }

}  // namespace spsd
