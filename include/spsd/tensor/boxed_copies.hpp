#pragma once
// BoxedCopies: the pieces a tensor was already boxed to, so that an op needing the same layout
// again reuses one instead of boxing it again (docs/design-notes.md, "Reusing a boxed tensor
// within a step"). One block per tensor, shared by its copies (GlobalTensor, GlobalData, a
// node's saved inputs), made on every rank that holds the tensor, in its placement or not.
//
// Whether an op reuses or boxes again must be decided alike on every rank of the boxing, or one
// rank would skip a collective another enters. So the state changes only at points of the
// program every rank reaches alike: an insertion or a use (the boxing of an op or to_global),
// a write (copy_, an optimizer's update, load_checkpoint: bump_version on every rank holding
// the tensor), the tensor's last copy going, a node's saved tensors freed, eviction under the
// step scope's budget of logical bytes (the same on every rank).
//
// The setting, per rank (every rank must choose the same): SPSD_BOXING_REUSE=
//   node (default): only a backward node's output gradient caches, while the node's rule runs;
//   step:           every tensor caches while it lives, within SPSD_BOXING_REUSE_BYTES logical
//                   bytes (default 1 GiB) per rank set, least recently used evicted first;
//   off:            every boxing runs.
#include <cstdint>
#include <memory>
#include <ostream>
#include <string_view>
#include <vector>

#include "spsd/layout/nd_sbp.hpp"
#include "spsd/layout/placement.hpp"
#include "spsd/tensor/storage.hpp"

namespace spsd {

// Whether a tensor boxed to a layout is kept for the next op that needs that layout: never,
// within a backward rule (the default), or within a step under a byte budget (docs/boxing.md).
enum class BoxingReuse { kOff, kNode, kStep };

// The calling rank's setting (SPSD_BOXING_REUSE, read at the rank's first use); tests and
// programs may set it, alike on every rank, between steps.
void set_boxing_reuse(BoxingReuse reuse);
BoxingReuse boxing_reuse();
// The step scope's budget in logical bytes per rank set (SPSD_BOXING_REUSE_BYTES); an entry
// counts the largest piece of its layout over the placement, so every rank counts the same.
void set_boxing_reuse_budget(int64_t bytes);
int64_t boxing_reuse_budget();

// "off", "node", "step": the values of SPSD_BOXING_REUSE.
constexpr std::string_view to_string(BoxingReuse r) {
  return r == BoxingReuse::kOff ? "off" : r == BoxingReuse::kNode ? "node" : r == BoxingReuse::kStep ? "step" : "?";
}
// Prints to_string(r).
inline std::ostream& operator<<(std::ostream& os, BoxingReuse r) { return os << to_string(r); }

namespace detail {

struct BoxedCopies;
struct ReuseBudget;  // the step scope's budget of one rank set (src/tensor/boxed_copies.cpp)

// One layout the tensor was boxed to.
struct BoxedEntry {
  Placement placement;
  NdSbp nd_sbp;
  std::shared_ptr<Storage> piece;  // this rank's piece of it; null on a rank outside placement
  uint64_t piece_version = 0;      // Storage::version of the source piece then (SPSD_CHECK's debug check)
  // The block of the to_global result that holds piece (a user's tensor, which copy_ may
  // write): the entry is stale once that block's version moved.
  std::weak_ptr<BoxedCopies> handed_out;
  uint64_t handed_out_version = 0;
  std::shared_ptr<ReuseBudget> budget;  // step scope: the budget it counts in; null in node scope
  int64_t bytes = 0;                    // logical bytes it counts there
  uint64_t last_use = 0;                // the budget's clock at its last use
};

struct BoxedCopies {
  BoxedCopies() = default;
  BoxedCopies(const BoxedCopies&) = delete;
  BoxedCopies& operator=(const BoxedCopies&) = delete;
  ~BoxedCopies() { clear(); }

  // The entry for this layout, or null; a hit counts as its use (LRU order).
  BoxedEntry* find(const Placement& placement, const NdSbp& nd_sbp);
  // Adds an entry (the caller found none for its layout); under a budget, evicts the least
  // recently used entries of that rank set first (ranks: the boxing's, sorted or not).
  BoxedEntry& insert(BoxedEntry entry, const std::vector<int64_t>& ranks);
  void erase(BoxedEntry* entry);
  // Drops every entry (their bytes leave their budgets).
  void clear();
  // The tensor was written in place: its entries are stale, and so are other tensors' entries
  // that handed out its piece (they compare version).
  void bump_version() {
    ++version;
    clear();
  }

  uint64_t version = 0;
  std::vector<BoxedEntry> entries;  // one or two per tensor in a step: searched linearly
};

// A block for a new tensor: one under the step scope, null otherwise (nothing caches).
std::shared_ptr<BoxedCopies> new_tensor_copies();
// Bumps b's version when there is a block (a write in place, on every rank holding the tensor).
inline void bump_boxed_version(const std::shared_ptr<BoxedCopies>& b) {
  if (b) b->bump_version();
}

// Bytes the step scope's budgets hold on this rank, over all rank sets (tests).
int64_t boxing_reuse_held_bytes();

}  // namespace detail

}  // namespace spsd
