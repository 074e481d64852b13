// Printing and totals of boxing plans.
#include "spsd/boxing/plan.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "primitive.hpp"
#include "spsd/core/error.hpp"

namespace spsd {

std::string_view to_string(StepKind kind) {
  switch (kind) {
#define SPSD_STEP_NAME(kind, name) \
  case StepKind::kind:             \
    return #name;
    SPSD_BOXING_PRIMITIVES(SPSD_STEP_NAME)
#undef SPSD_STEP_NAME
  }
  return "?";
}

RankTraffic Step::traffic_of(int64_t rank) const {
  const detail::LayoutBoxes from_boxes(shape, from), to_boxes(shape, to);
  return detail::primitive(kind).rank_traffic({shape, dtype, from, to, mesh_axis, from_boxes, to_boxes}, rank);
}

std::vector<RankTraffic> Step::traffic() const {
  const detail::LayoutBoxes from_boxes(shape, from), to_boxes(shape, to);
  const detail::StepView view{shape, dtype, from, to, mesh_axis, from_boxes, to_boxes};
  const detail::Primitive& p = detail::primitive(kind);
  const std::vector<int64_t> ranks = union_ranks(from.placement, to.placement);
  if (p.ranks_traffic) return p.ranks_traffic(view, ranks);
  std::vector<RankTraffic> all;
  all.reserve(ranks.size());
  for (int64_t r : ranks) all.push_back(p.rank_traffic(view, r));
  return all;
}

namespace {
std::string format_us(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f us", us);
  return buf;
}
// Sorted ranks as runs: "r1-r7", "r0-r16376 step 8", "r5"; after `most` items, how many ranks
// there are in all.
std::string ranks_text(const std::vector<int64_t>& ranks, size_t most) {
  std::string s;
  size_t items = 0;
  for (size_t i = 0; i < ranks.size();) {
    if (items == most) return s + ", ... (" + std::to_string(ranks.size()) + " ranks)";
    size_t j = i;
    const int64_t stride = i + 1 < ranks.size() ? ranks[i + 1] - ranks[i] : 1;
    while (j + 1 < ranks.size() && ranks[j + 1] - ranks[j] == stride) ++j;
    if (stride > 1 && j - i < 2) j = i;  // two ranks with a gap are two items, not a run
    s += (items++ ? ", r" : "r") + std::to_string(ranks[i]);
    if (j > i) s += "-r" + std::to_string(ranks[j]) + (stride > 1 ? " step " + std::to_string(stride) : "");
    i = j + 1;
  }
  return s;
}

// " r0 12/12 r1 12/12": every rank's bytes. Past 16 ranks, ranks with equal bytes as one group
// (" r0-r16383: 12/12"), groups in the order of their first rank, each's ranks as runs; a group
// that would take more than 8 runs is cut short, and the largest such one is said last as "the
// other N ranks", so a plan on thousands of ranks prints in a line or two.
std::string traffic_text(const std::vector<RankTraffic>& all) {
  std::string s;
  if (all.size() <= 16) {
    for (const RankTraffic& t : all)
      s += " r" + std::to_string(t.rank) + " " + std::to_string(t.bytes_sent) + "/" + std::to_string(t.bytes_received);
    return s;
  }
  constexpr size_t kRuns = 8, kGroups = 12;
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> by_bytes;
  std::vector<std::pair<int64_t, int64_t>> order;  // by first rank (all is in rank order)
  for (const RankTraffic& t : all) {
    std::vector<int64_t>& ranks = by_bytes[{t.bytes_sent, t.bytes_received}];
    if (ranks.empty()) order.push_back({t.bytes_sent, t.bytes_received});
    ranks.push_back(t.rank);
  }
  auto bytes = [](const std::pair<int64_t, int64_t>& b) {
    return std::to_string(b.first) + "/" + std::to_string(b.second);
  };
  // The largest group, said as "the other N ranks" when its runs would not fit.
  const auto largest = std::max_element(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    return by_bytes[a].size() < by_bytes[b].size();
  });
  const bool rest = order.size() > 1 && ranks_text(by_bytes[*largest], kRuns).find("...") != std::string::npos;
  size_t said = 0;
  for (const auto& b : order) {
    if (rest && b == *largest) continue;
    if (said == kGroups) {
      s += "; ... (" + std::to_string(order.size() - said - (rest ? 1 : 0)) + " more groups)";
      break;
    }
    s += (said++ ? "; " : " ") + ranks_text(by_bytes[b], kRuns) + ": " + bytes(b);
  }
  if (rest) s += "; the other " + std::to_string(by_bytes[*largest].size()) + " ranks: " + bytes(*largest);
  return s;
}
}  // namespace

std::string Step::to_string() const {
  std::string s(spsd::to_string(kind));
  if (mesh_axis >= 0) s += " along mesh axis " + std::to_string(mesh_axis);
  s += ": " + from.nd_sbp.to_string() + " -> " + to.nd_sbp.to_string();
  s += from.placement == to.placement ? " on " + from.placement.to_string()
                                      : " from " + from.placement.to_string() + " to " + to.placement.to_string();
  s += "\n     bytes sent/received per rank:" + traffic_text(traffic());
  return s + "\n     predicted cost " + format_us(cost_us);
}

RankTraffic Plan::traffic_of(int64_t rank) const {
  RankTraffic total{rank};
  for (const Step& s : steps) {
    const RankTraffic t = s.traffic_of(rank);
    total.bytes_sent += t.bytes_sent;
    total.bytes_received += t.bytes_received;
    total.messages += t.messages;
  }
  return total;
}

namespace {
int64_t layout_bytes(const Layout& l) {
  return static_cast<int64_t>((l.placement.mesh().ndim() * sizeof(int64_t)) + l.nd_sbp.size() * sizeof(Sbp));
}
}  // namespace

int64_t Plan::footprint_bytes() const {
  int64_t bytes = sizeof(Plan) + static_cast<int64_t>(shape.ndim() * sizeof(int64_t)) + layout_bytes(from) + layout_bytes(to);
  if (identity) bytes += static_cast<int64_t>(sizeof(*identity) + identity->description.capacity());
  for (const Step& s : steps)
    bytes += static_cast<int64_t>(sizeof(Step) + s.shape.ndim() * sizeof(int64_t)) + layout_bytes(s.from) + layout_bytes(s.to);
  return bytes;
}

bool Plan::communicates() const {
  return std::any_of(steps.begin(), steps.end(), [](const Step& s) { return detail::primitive(s.kind).communicates; });
}

std::string Plan::to_string() const {
  std::string s = "boxing " + shape.to_string() + " " + std::string(spsd::to_string(dtype)) + " from " +
                  from.to_string() + " to " + to.to_string() + ": " + std::to_string(steps.size()) +
                  (steps.size() == 1 ? " step" : " steps") + ", predicted cost " + format_us(cost_us) + "\n";
  for (size_t i = 0; i < steps.size(); ++i) s += "  " + std::to_string(i + 1) + ". " + steps[i].to_string() + "\n";
  if (steps.empty()) s += "  (nothing to do: the layouts are equal)\n";
  return s;
}

}  // namespace spsd
