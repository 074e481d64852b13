#pragma once
// Per-rank communication counters: what this rank sent and received, by collective kind.
#include <array>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "spsd/core/error.hpp"

namespace spsd {

// The collective a counter of comm_stats() is for.
enum class CollectiveKind { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kBroadcast, kSendRecv, kBarrier };
inline constexpr int kNumCollectiveKinds = 7;

// "all_reduce", "reduce_scatter", ...: the collective's name.
constexpr std::string_view to_string(CollectiveKind k) {
  constexpr std::string_view names[] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all",
                                        "broadcast",  "send_recv",      "barrier"};
  const int i = static_cast<int>(k);
  return i >= 0 && i < kNumCollectiveKinds ? names[i] : "invalid collective kind";
}

// Logical payload bytes of the bandwidth-optimal algorithm of each collective (docs/communicators.md
// gives the per-rank formulas); a rank's copy to itself is never counted.
struct CommStats {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t messages = 0;     // point-to-point messages sent by send_recv (self excluded)
  int64_t collectives = 0;  // calls of any communicator operation, barrier and send_recv included
  std::array<int64_t, kNumCollectiveKinds> calls{};  // the same calls, by kind

  // The calls of one kind.
  int64_t calls_of(CollectiveKind k) const {
    const int i = static_cast<int>(k);
    SPSD_CHECK(i >= 0 && i < kNumCollectiveKinds, "CommStats::calls_of", "invalid collective kind value ", i);
    return calls[i];
  }
  // A one-line summary of the counters; == compares every counter.
  std::string to_string() const {
    std::string s = "sent " + std::to_string(bytes_sent) + " B, received " + std::to_string(bytes_received) +
                    " B, " + std::to_string(messages) + " messages, " + std::to_string(collectives) + " calls";
    for (int k = 0; k < kNumCollectiveKinds; ++k)
      if (calls[k]) s += ", " + std::string(spsd::to_string(static_cast<CollectiveKind>(k))) + " x" + std::to_string(calls[k]);
    return s;
  }
  friend bool operator==(const CommStats&, const CommStats&) = default;
  friend std::ostream& operator<<(std::ostream& os, const CommStats& s) { return os << s.to_string(); }
};

// This rank's counters since start or the last reset (defined by the runtime).
CommStats comm_stats();
void reset_comm_stats();

}  // namespace spsd
