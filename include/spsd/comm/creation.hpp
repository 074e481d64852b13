#pragma once
// Communicator creation: how many communicators this rank created, and what the creation
// handshake that precedes each (MPI) costs in messages (docs/communicators.md, "Creating one").
#include <cstdint>
#include <ostream>
#include <string>

namespace spsd {

// Counted since the runtime started (never reset): a communicator is created once per ordered
// rank set, at its first use, so repeating an op must leave these unchanged.
struct CreationStats {
  int64_t communicators = 0;        // data communicators: communicator(...) and boxing
  int64_t check_communicators = 0;  // the consistency check's own, one per rank set it checked
  // Point-to-point messages of the MPI creation handshakes (0 under simulate, which needs none).
  int64_t handshake_messages_sent = 0;
  int64_t handshake_messages_received = 0;

  // "3 communicators, 1 check communicators, handshakes sent 4 and received 4 messages"; == and
  // << compare and print the counters.
  std::string to_string() const {
    return std::to_string(communicators) + " communicators, " + std::to_string(check_communicators) +
           " check communicators, handshakes sent " + std::to_string(handshake_messages_sent) + " and received " +
           std::to_string(handshake_messages_received) + " messages";
  }
  friend bool operator==(const CreationStats&, const CreationStats&) = default;
  friend std::ostream& operator<<(std::ostream& os, const CreationStats& s) { return os << s.to_string(); }
};

// This rank's counters (defined by the runtime).
CreationStats creation_stats();

namespace detail {

// Rank sets up to this many members exchange creation tokens all-pairs (one round trip, and a
// member that never comes is named at once); larger ones run ceil(log2 n) rounds.
inline constexpr int64_t kAllPairsHandshakeMembers = 8;

// ceil(log2 n): the rounds of the dissemination handshake over n members.
constexpr int64_t handshake_rounds(int64_t n) {
  int64_t rounds = 0;
  for (int64_t reach = 1; reach < n; reach *= 2) ++rounds;
  return rounds;
}

// Round k of the rounds: member i sends the (min, max) of the tokens it knows to member
// i + 2^k and merges what member i - 2^k sends it (mod n).
constexpr int64_t handshake_send_to(int64_t n, int64_t i, int64_t round) { return (i + (int64_t{1} << round)) % n; }
constexpr int64_t handshake_receive_from(int64_t n, int64_t i, int64_t round) {
  return ((i - (int64_t{1} << round)) % n + n) % n;
}

// Messages one member sends (and as many it receives) in a handshake over n members that passes.
constexpr int64_t handshake_messages(int64_t n, int64_t all_pairs_limit = kAllPairsHandshakeMembers) {
  return n <= all_pairs_limit ? n - 1 : handshake_rounds(n);
}

// Process-wide, for tests and benchmarks that compare the two exchanges: rank sets up to
// `members` members use the all-pairs one. Every rank must set the same value before creating
// the communicators it affects (members >= 1, else spsd::Error).
void set_handshake_all_pairs_limit(int64_t members);
int64_t handshake_all_pairs_limit();

}  // namespace detail

}  // namespace spsd
