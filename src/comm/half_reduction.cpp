#include "spsd/comm/half_reduction.hpp"

#include <atomic>

#include "spsd/core/error.hpp"

namespace spsd {

namespace {
std::atomic<HalfReduction> mode{HalfReduction::kNative};
}

void set_half_reduction(HalfReduction m) {
  SPSD_CHECK(m == HalfReduction::kNative || m == HalfReduction::kFloat32Wire, "set_half_reduction",
             "mode must be HalfReduction::kNative or kFloat32Wire, got the value ", static_cast<int>(m));
  mode.store(m, std::memory_order_relaxed);
}

HalfReduction half_reduction() { return mode.load(std::memory_order_relaxed); }

}  // namespace spsd
