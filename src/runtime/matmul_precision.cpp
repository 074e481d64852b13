#include "spsd/runtime/matmul_precision.hpp"

#include <atomic>

#include "spsd/core/error.hpp"

namespace spsd {

namespace {
std::atomic<MatmulPrecision> precision{MatmulPrecision::kHighest};
}

void set_matmul_precision(MatmulPrecision p) {
  SPSD_CHECK(p == MatmulPrecision::kHighest || p == MatmulPrecision::kHigh, "set_matmul_precision",
             "precision must be MatmulPrecision::kHighest or kHigh, got the value ", static_cast<int>(p));
  precision.store(p, std::memory_order_relaxed);
}

MatmulPrecision matmul_precision() { return precision.load(std::memory_order_relaxed); }

}  // namespace spsd
