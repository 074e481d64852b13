// Printing and totals of boxing plans.
#include "spsd/boxing/plan.hpp"

#include <algorithm>
#include <cstdio>

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
  std::vector<RankTraffic> all;
  for (int64_t r : union_ranks(from.placement, to.placement)) all.push_back(traffic_of(r));
  return all;
}

namespace {
std::string format_us(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f us", us);
  return buf;
}
// " r0 12/12 r1 12/12": every rank's bytes; past 16 ranks, runs of ranks with equal bytes as one
// entry (" r1-r7 268435456/268435456"), so a plan on thousands of ranks prints in a few lines.
std::string traffic_text(const std::vector<RankTraffic>& all) {
  std::string s;
  const bool runs = all.size() > 16;
  for (size_t i = 0; i < all.size();) {
    size_t j = i + 1;
    while (runs && j < all.size() && all[j].bytes_sent == all[i].bytes_sent &&
           all[j].bytes_received == all[i].bytes_received && all[j].rank == all[j - 1].rank + 1)
      ++j;
    s += " r" + std::to_string(all[i].rank) + (j - i > 1 ? "-r" + std::to_string(all[j - 1].rank) : "") + " " +
         std::to_string(all[i].bytes_sent) + "/" + std::to_string(all[i].bytes_received);
    i = j;
  }
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
