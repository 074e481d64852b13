// The creation handshake's rounds (spsd/comm/creation.hpp), played out on plain values for rank
// counts mpirun cannot reach here: after handshake_rounds(n) rounds every member knows the
// (min, max) of all n tokens, so a single diverging member is seen by every member.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include <spsd/comm/creation.hpp>

namespace {

using spsd::detail::handshake_receive_from;
using spsd::detail::handshake_rounds;
using spsd::detail::handshake_send_to;

// Each member's (min, max) after the rounds, as the MPI backend computes them.
std::vector<std::pair<uint64_t, uint64_t>> play(const std::vector<uint64_t>& tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<std::pair<uint64_t, uint64_t>> known(n);
  for (int64_t i = 0; i < n; ++i) known[i] = {tokens[i], tokens[i]};
  for (int64_t k = 0; k < handshake_rounds(n); ++k) {
    std::vector<std::pair<uint64_t, uint64_t>> sent(n);
    for (int64_t i = 0; i < n; ++i) sent[handshake_send_to(n, i, k)] = known[i];
    for (int64_t i = 0; i < n; ++i) {
      // What i receives is what its receive peer sent it: the two schedules must agree.
      REQUIRE(handshake_send_to(n, handshake_receive_from(n, i, k), k) == i);
      known[i] = {std::min(known[i].first, sent[i].first), std::max(known[i].second, sent[i].second)};
    }
  }
  return known;
}

}  // namespace

TEST_CASE("handshake rounds: ceil(log2 n) messages per member", "[creation]") {
  CHECK(handshake_rounds(1) == 0);
  CHECK(handshake_rounds(2) == 1);
  CHECK(handshake_rounds(9) == 4);
  CHECK(handshake_rounds(1024) == 10);
  CHECK(handshake_rounds(1025) == 11);
  CHECK(handshake_rounds(16384) == 14);
  CHECK(spsd::detail::handshake_messages(8) == 7);  // all pairs up to kAllPairsHandshakeMembers
  CHECK(spsd::detail::handshake_messages(9) == 4);
  CHECK(spsd::detail::handshake_messages(16384) == 14);
}

TEST_CASE("handshake rounds: every member sees one diverging token, wherever it is", "[creation]") {
  std::vector<int64_t> sizes;
  for (int64_t n = 2; n <= 70; ++n) sizes.push_back(n);
  for (int64_t n : {127, 128, 129, 1000, 16384}) sizes.push_back(n);
  for (int64_t n : sizes) {
    INFO(n << " members");
    const std::vector<uint64_t> same(n, 42);
    for (const auto& k : play(same)) CHECK((k.first == 42 && k.second == 42));
    // One diverging member, at a few places (every place on small sets).
    for (int64_t odd = 0; odd < n; odd += n <= 70 ? 1 : n / 7 + 1) {
      std::vector<uint64_t> tokens = same;
      tokens[odd] = odd % 2 ? 7 : 99;  // below and above the others
      const auto known = play(tokens);
      CHECK(std::all_of(known.begin(), known.end(), [](const auto& k) { return k.first != k.second; }));
    }
  }
}
