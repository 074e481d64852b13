// The checks of autograd/saved_tensors.hpp.
#include "spsd/autograd/saved_tensors.hpp"

#include <algorithm>
#include <memory>
#include <string>

#include "spsd/runtime/consistency.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

namespace {

// The first saved tensor of node written since it was recorded, as the error's text; empty
// when there is none on this rank.
std::string stale_tensor(const GradNode& node) {
  if (node.op == "to_global") return {};  // its backward reads the layouts only
  const size_t n = node.inputs.size();
  for (size_t i = 0; i <= n; ++i) {
    const GlobalData& t = i < n ? node.inputs[i] : node.output;
    if (!t.local || t.local->version() == node.saved_versions[i]) continue;
    return concat(i < n ? concat("input ", i) : std::string("the output"), " of ", node.op,
                  ", saved for its backward, was modified in place after the forward pass: ", describe(t),
                  " is at version ", t.local->version(), ", it was saved at version ", node.saved_versions[i],
                  " (an optimizer step, a copy_ or a load_checkpoint between the forward pass and backward?); "
                  "run the forward pass again after modifying it");
  }
  return {};
}

// The ranks that take part in the graph (its placements' ranks, sorted) when some of them hold
// no piece of some saved tensor and so cannot see its version; empty when every rank that takes
// part holds a piece of every tensor (a graph on one placement: no agreement needed). The same
// answer on every rank: layouts only.
std::vector<int64_t> ranks_to_agree(const std::vector<GradNode*>& order) {
  std::vector<const detail::RankList*> lists;
  auto note = [&](const GlobalData& t) {
    const detail::RankList* l = &t.placement.rank_list();
    if (std::find(lists.begin(), lists.end(), l) == lists.end()) lists.push_back(l);
  };
  for (const GradNode* node : order) {
    note(node->output);
    for (const GlobalData& in : node->inputs) note(in);
  }
  if (lists.size() < 2) return {};
  std::vector<int64_t> all;
  for (const detail::RankList* l : lists) all.insert(all.end(), l->ranks().begin(), l->ranks().end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  for (const detail::RankList* l : lists)
    if (static_cast<size_t>(l->size()) < all.size()) return all;
  return {};
}

}  // namespace

void check_saved_tensors(const std::vector<GradNode*>& order) {
  for (const GradNode* node : order)
    SPSD_CHECK(!node->freed, "backward", "the graph through ", node->op, " (output ", describe(node->output),
               ") was freed by an earlier backward; to run backward through a graph more than once, pass "
               "BackwardOptions{.retain_graph = true} to every backward through it but the last");
  std::string stale;
  for (const GradNode* node : order)
    if (stale = stale_tensor(*node); !stale.empty()) break;
  if (const std::vector<int64_t> ranks = ranks_to_agree(order);
      !ranks.empty() && std::binary_search(ranks.begin(), ranks.end(), static_cast<int64_t>(rank()))) {
    // A rank that sees nothing stale notes the same description as the others; one that does
    // notes the error: the check then fails alike on every rank of the graph, naming it.
    note_op(ranks, std::make_shared<const OpIdentity>(stale.empty() ? "backward (saved tensors unmodified)"
                                                                    : concat("backward: ", stale)));
    check_ops(ranks);
  }
  if (!stale.empty()) throw_error("backward", stale);
}

void free_saved_tensors(GradNode& node) {
  // What was boxed from them goes too (the same on every rank: every rank frees the node here).
  for (GlobalData& in : node.inputs) {
    in.local.reset();
    if (in.boxed) in.boxed->clear();
  }
  node.output.local.reset();
  if (node.output.boxed) node.output.boxed->clear();
  node.closure = nullptr;
  node.freed = true;
}

}  // namespace spsd::detail
