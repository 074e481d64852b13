// The handshake exchange's switch-over size (comm/creation.hpp); the counters live in the runtime.
#include "spsd/comm/creation.hpp"

#include <atomic>

#include "spsd/core/error.hpp"

namespace spsd::detail {

namespace {
std::atomic<int64_t> all_pairs_limit{kAllPairsHandshakeMembers};
}  // namespace

void set_handshake_all_pairs_limit(int64_t members) {
  SPSD_CHECK(members >= 1, "set_handshake_all_pairs_limit", "members must be at least 1, got ", members);
  all_pairs_limit.store(members);
}
int64_t handshake_all_pairs_limit() { return all_pairs_limit.load(); }

}  // namespace spsd::detail
