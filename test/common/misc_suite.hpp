#pragma once
// Rank-side checks of GlobalTensor::item() and distribute (issue 25) on every layout of the
// placements a world of world_size() ranks holds (the world as a line and, at 4 ranks, as 2x2;
// every other rank; the last rank alone): values on every rank, and the bytes each rank
// receives (item: one collective of one element; distribute: the shape and its own piece).
// Collective over the world. device: "cpu" or "cuda" (the placements' device type).
#include <string>

#include "failures.hpp"

namespace spsd_test {

void run_item_suite(Failures& failures, const std::string& device = "cpu");
void run_distribute_suite(Failures& failures, const std::string& device = "cpu");

}  // namespace spsd_test
