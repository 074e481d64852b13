#pragma once
// Save and load together on every rank: their calls are compared across ranks first
// (check_same_call), and every step that can fail on one rank only (file I/O, a corrupt file)
// runs inside agreed(), so every rank leaves with the same spsd::Error.
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "spsd/comm/communicator.hpp"
#include "spsd/core/error.hpp"
#include "spsd/runtime/consistency.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

inline std::vector<int64_t> world_ranks() {
  std::vector<int64_t> r(world_size());
  for (int64_t i = 0; i < world_size(); ++i) r[i] = i;
  return r;
}

// Runs step on this rank; if it failed on any rank, throws on every rank: its own error where
// it failed, else the first failing rank's (a rank that did nothing wrong still learns why).
template <class F>
void agreed(std::string_view op, F&& step) {
  std::string error;
  try {
    step();
  } catch (const Error& e) {
    error = e.what();
    if (error.empty()) error = concat(op, ": failed");
  } catch (const std::exception& e) {
    error = concat(op, ": ", e.what());
  }
  if (world_size() == 1) {
    if (!error.empty()) throw Error(error);
    return;
  }
  const std::vector<std::string> all = all_gather_text(world_communicator(), error);
  if (!error.empty()) throw Error(error);
  for (size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty()) throw Error(concat(all[r], " (raised on rank ", r, ")"));
}

// Compares the call across ranks (docs/communicators.md): ranks passing different arguments get
// an error naming the call instead of mismatched file writes. A call over many tensors passes
// them as entries: a mismatch then names the first entry that differs and how many do.
inline void check_same_call(const std::string& description, std::vector<std::string> entries = {}) {
  const std::vector<int64_t> ranks = world_ranks();
  note_op(ranks, entries.empty() ? std::make_shared<const OpIdentity>(description)
                                 : std::make_shared<const OpIdentity>(description, std::move(entries)));
  check_ops(ranks);
  synchronize();  // the check may have been queued: surface its error here
}

}  // namespace spsd::detail
