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

int64_t Step::max_bytes() const {
  int64_t m = 0;
  for (const RankTraffic& t : traffic) m = std::max({m, t.bytes_sent, t.bytes_received});
  return m;
}

namespace {
std::string format_us(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f us", us);
  return buf;
}
int64_t sum_over_steps(const std::vector<Step>& steps, int64_t rank, int64_t RankTraffic::*field) {
  int64_t total = 0;
  for (const Step& s : steps)
    for (const RankTraffic& t : s.traffic)
      if (t.rank == rank) total += t.*field;
  return total;
}
}  // namespace

std::string Step::to_string() const {
  std::string s(spsd::to_string(kind));
  if (mesh_axis >= 0) s += " along mesh axis " + std::to_string(mesh_axis);
  s += ": " + from.nd_sbp.to_string() + " -> " + to.nd_sbp.to_string();
  s += from.placement == to.placement ? " on " + from.placement.to_string()
                                      : " from " + from.placement.to_string() + " to " + to.placement.to_string();
  s += "\n     bytes sent/received per rank:";
  for (const RankTraffic& t : traffic)
    s += " r" + std::to_string(t.rank) + " " + std::to_string(t.bytes_sent) + "/" + std::to_string(t.bytes_received);
  return s + "\n     predicted cost " + format_us(cost_us);
}

int64_t Plan::bytes_sent(int64_t rank) const { return sum_over_steps(steps, rank, &RankTraffic::bytes_sent); }
int64_t Plan::bytes_received(int64_t rank) const { return sum_over_steps(steps, rank, &RankTraffic::bytes_received); }

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
