// A chain of repeated blocks in the layout search's graph (layout_problem.hpp): where the exact
// solver solves one block and reuses it for every copy (layout_exact.cpp).
//
// A model of L alike blocks records, in tape order, runs of nodes that repeat with a period: the
// blocks' forward, one copy after another, then their backward, in reverse. Each run is found
// as a stretch where the node P places on looks the same (its op and the kinds of its inputs
// and output; alike ops may still differ in their candidates, e.g. a to_global whose input comes
// from outside the blocks, and are then left untied); the runs with as many copies as the
// largest one are the chain's. Copies of different runs are joined into one block by the values
// between them (a block's backward reads its own forward's activations). What is found is only
// a choice of which nodes to tie: a tie joins nodes with the same candidates, and the plan the
// exact solver returns is priced again on the whole step, so a chain found wrongly costs
// quality, never correctness.
#include <algorithm>

#include "layout_problem.hpp"

namespace spsd::detail::layout_search {

namespace {

uint64_t mix(uint64_t h, uint64_t x) {  // FNV-1a over the 8 bytes of x
  for (int i = 0; i < 8; ++i) h = (h ^ ((x >> (8 * i)) & 0xff)) * 1099511628211ULL;
  return h;
}

bool same_candidates(const Node& a, const Node& b) {
  return a.parameter == b.parameter && a.out_layout == b.out_layout && a.in_layouts == b.in_layouts;
}

// `copies` copies of `period` nodes from `start` (in the order of op nodes).
struct Run {
  size_t period, start, copies;
  size_t covered() const { return period * copies; }
};

}  // namespace

Problem::Blocks Problem::repeated_blocks() {
  Blocks found;
  found.part.assign(nodes_.size(), -1);
  found.tie.resize(nodes_.size());
  std::iota(found.tie.begin(), found.tie.end(), 0);
  std::vector<int> order;  // op and to_global nodes, in tape order
  for (size_t n = 0; n < nodes_.size(); ++n)
    if (!nodes_[n].parameter) order.push_back(static_cast<int>(n));
  const size_t count = order.size();
  std::vector<uint64_t> look(count);
  for (size_t i = 0; i < count; ++i) {
    const Node& n = nodes_[static_cast<size_t>(order[i])];
    uint64_t h = 1469598103934665603ULL;
    for (char ch : n.op ? n.op->resolution().op : std::string("to_global")) h = mix(h, static_cast<unsigned char>(ch));
    for (int v : n.inputs) h = mix(h, static_cast<uint64_t>(kind_of(v)));
    if (n.output >= 0 && values_[static_cast<size_t>(n.output)].meta) h = mix(h, static_cast<uint64_t>(kind_of(n.output)));
    look[i] = h;
  }
  // Every maximal stretch where node i looks like node i + P: a run of P-node copies.
  std::vector<Run> runs;
  for (size_t period = 2; 2 * period <= count; ++period) {
    size_t length = 0;
    for (size_t i = 0; i + period <= count; ++i) {
      if (i + period < count && look[i] == look[i + period]) {
        ++length;
        continue;
      }
      if (length >= period) runs.push_back({period, i - length, length / period + 1});
      length = 0;
    }
  }
  if (runs.empty()) return found;
  // The largest run sets the count of blocks; the other runs of that count, largest first, are
  // the chain's if they overlap none taken and are not a few ops alike by chance (an eighth of
  // the largest at least); the smallest period of a length: a block, not two.
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) {
    return a.covered() != b.covered() ? a.covered() > b.covered() : a.period < b.period;
  });
  const size_t blocks = runs.front().copies;
  std::vector<Run> chain;
  std::vector<char> taken(count, 0);
  size_t covered = 0;
  for (const Run& r : runs) {
    if (r.copies != blocks || 8 * r.covered() < runs.front().covered()) continue;
    if (std::any_of(taken.begin() + static_cast<ptrdiff_t>(r.start), taken.begin() + static_cast<ptrdiff_t>(r.start + r.covered()),
                    [](char t) { return t != 0; }))
      continue;
    std::fill(taken.begin() + static_cast<ptrdiff_t>(r.start), taken.begin() + static_cast<ptrdiff_t>(r.start + r.covered()), 1);
    chain.push_back(r);
    covered += r.covered();
  }
  // A chain is most of the step; a few alike ops in a row are not one.
  if (2 * covered < count) return found;
  // Copy j of the first run is block j; another run's copies are its in order or in reverse,
  // whichever shares more values with the first's copies of the same number (a block's backward
  // reads its forward's activations).
  auto node_at = [&](const Run& r, size_t copy, size_t place) { return order[r.start + copy * r.period + place]; };
  std::vector<int> copy_of(nodes_.size(), -1), run_of(nodes_.size(), -1);
  for (size_t r = 0; r < chain.size(); ++r)
    for (size_t j = 0; j < blocks; ++j)
      for (size_t k = 0; k < chain[r].period; ++k) {
        copy_of[static_cast<size_t>(node_at(chain[r], j, k))] = static_cast<int>(j);
        run_of[static_cast<size_t>(node_at(chain[r], j, k))] = static_cast<int>(r);
      }
  // Values between run 0 and run r, either way: do they join copies of one number, or mirrored?
  std::vector<int64_t> same(chain.size(), 0), mirrored(chain.size(), 0);
  for (const ValueInfo& info : values_) {
    if (info.producer < 0) continue;
    const int pr = run_of[static_cast<size_t>(info.producer)], pc = copy_of[static_cast<size_t>(info.producer)];
    for (const Use& u : info.uses) {
      const int ur = run_of[static_cast<size_t>(u.node)], uc = copy_of[static_cast<size_t>(u.node)];
      if (pr < 0 || ur < 0 || (pr == 0) == (ur == 0)) continue;
      const size_t r = static_cast<size_t>(pr == 0 ? ur : pr);
      same[r] += pc == uc;
      mirrored[r] += pc == static_cast<int>(blocks) - 1 - uc;
    }
  }
  std::vector<bool> reversed(chain.size(), false);
  for (size_t r = 1; r < chain.size(); ++r) reversed[r] = mirrored[r] > same[r];
  for (size_t r = 0; r < chain.size(); ++r)
    for (size_t j = 0; j < blocks; ++j) {
      const size_t block = reversed[r] ? blocks - 1 - j : j;
      const size_t first = reversed[r] ? blocks - 1 : 0;  // the copy that is block 0
      for (size_t k = 0; k < chain[r].period; ++k) {
        const int n = node_at(chain[r], j, k), tie = node_at(chain[r], first, k);
        found.part[static_cast<size_t>(n)] = static_cast<int>(block);
        if (same_candidates(nodes_[static_cast<size_t>(n)], nodes_[static_cast<size_t>(tie)])) found.tie[static_cast<size_t>(n)] = tie;
      }
    }
  // A free parameter belongs with its first consumer, tied to the parameter read in its place.
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (!nodes_[n].parameter) continue;
    const ValueInfo& out = values_[static_cast<size_t>(nodes_[n].output)];
    if (out.uses.empty()) continue;
    const Use& u = out.uses.front();
    found.part[n] = found.part[static_cast<size_t>(u.node)];
    const int there = found.tie[static_cast<size_t>(u.node)];
    if (there == u.node) continue;
    const int p = values_[static_cast<size_t>(nodes_[static_cast<size_t>(there)].inputs[u.input])].producer;
    if (p >= 0 && found.tie[static_cast<size_t>(p)] == p && same_candidates(nodes_[n], nodes_[static_cast<size_t>(p)]))
      found.tie[n] = p;
  }
  // A parameter tied to one tied later on: to the end of the chain (a tie is to a node tied to itself).
  for (size_t n = 0; n < nodes_.size(); ++n)
    while (found.tie[static_cast<size_t>(found.tie[n])] != found.tie[n]) found.tie[n] = found.tie[static_cast<size_t>(found.tie[n])];
  found.count = static_cast<int64_t>(blocks);
  return found;
}

}  // namespace spsd::detail::layout_search
