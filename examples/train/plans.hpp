#pragma once
// What the training examples' plans share: the placement a plan runs on (one mesh axis per plan
// axis: the ranks as a line, or a (ranks/2, 2) mesh for a 2-d plan) and the ranks 0 .. world-1.
#include <spsd/spsd.hpp>
#include <string>
#include <vector>

namespace examples {

inline std::vector<int64_t> first_ranks(int world) {
  std::vector<int64_t> ranks(world);
  for (int r = 0; r < world; ++r) ranks[r] = r;
  return ranks;
}

inline spsd::Placement plan_placement(const char* who, const spsd::nn::Plan& plan, const std::vector<int64_t>& ranks,
                                      const std::string& device) {
  const int64_t world = static_cast<int64_t>(ranks.size());
  if (plan.axes.size() == 1) return spsd::Placement(device, ranks);
  SPSD_CHECK(world % 2 == 0, who, "the 2-d plan ", plan.to_string(), " needs an even number of ranks, got ", world);
  return spsd::Placement(device, ranks, spsd::Shape{world / 2, 2});
}

}  // namespace examples
