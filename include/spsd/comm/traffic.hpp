#pragma once
// Elements each rank sends and receives in one collective, for the bandwidth-optimal
// algorithm (nccl-tests conventions). The communicator accounts with these formulas and the
// boxing planner predicts with them, so predictions and counters agree by construction.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>

#include "spsd/layout/split.hpp"

namespace spsd::traffic {

// r (a root too) must be one of the n members: these formulas index and divide by them.
inline void check_member(std::string_view op, std::string_view what, int64_t n, int64_t r) {
  SPSD_CHECK(n >= 1 && r >= 0 && r < n, op, what, " ", r, " is not one of the ", n, " members");
}

// One rank's elements sent and received in one collective.
struct Traffic {
  int64_t sent = 0, received = 0;  // elements; a rank's copy to itself is not traffic
};

inline int64_t total(std::span<const int64_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), int64_t{0});
}

// Reduce-scatter then all-gather over the balanced split of count.
inline Traffic all_reduce(int64_t count, int64_t n, int64_t r) {
  check_member("traffic::all_reduce", "rank", n, r);
  int64_t chunk = balanced_range(count, n, r).size();
  return {count + (n - 2) * chunk, count + (n - 2) * chunk};
}
// Every block but one's own goes out once; one's own block comes from the n - 1 others.
// The forms taking the total serve callers that price many members of one group.
inline Traffic reduce_scatter(int64_t total_count, int64_t mine, int64_t n) { return {total_count - mine, (n - 1) * mine}; }
inline Traffic reduce_scatter(std::span<const int64_t> counts, int64_t r) {
  int64_t n = static_cast<int64_t>(counts.size());
  check_member("traffic::reduce_scatter", "rank", n, r);
  return reduce_scatter(total(counts), counts[r], n);
}
inline Traffic all_gather(int64_t total_count, int64_t mine, int64_t n) { return {(n - 1) * mine, total_count - mine}; }
inline Traffic all_gather(std::span<const int64_t> counts, int64_t r) {
  int64_t n = static_cast<int64_t>(counts.size());
  check_member("traffic::all_gather", "rank", n, r);
  return all_gather(total(counts), counts[r], n);
}
inline Traffic all_to_all(std::span<const int64_t> send_counts, std::span<const int64_t> recv_counts, int64_t r) {
  check_member("traffic::all_to_all", "rank", static_cast<int64_t>(std::min(send_counts.size(), recv_counts.size())), r);
  return {total(send_counts) - send_counts[r], total(recv_counts) - recv_counts[r]};
}
// A pipelined chain root, root + 1, ...: all but the last forward once, all but the root receive.
inline Traffic broadcast(int64_t count, int64_t n, int64_t r, int64_t root) {
  check_member("traffic::broadcast", "rank", n, r);
  check_member("traffic::broadcast", "root", n, root);
  bool last = n == 1 || r == (root + n - 1) % n;
  return {last ? 0 : count, r == root ? 0 : count};
}

}  // namespace spsd::traffic
