// The explicit instantiations of op/compare.hpp, op/where.hpp and op/arg_reduce.hpp
// (core/instances.hpp), and the logical ops of bool tensors.
#include "spsd/op/arg_reduce.hpp"
#include "spsd/op/compare.hpp"
#include "spsd/op/where.hpp"

namespace spsd {

SPSD_FOR_EACH_ELEMENT(SPSD_COMPARE_INSTANCES, )
SPSD_EQUALITY_INSTANCES(, bool)
SPSD_FOR_EACH_ELEMENT(SPSD_WHERE_INSTANCES, )
SPSD_WHERE_INSTANCES(, bool)
SPSD_FOR_EACH_ELEMENT(SPSD_ARG_REDUCE_INSTANCES, )

GlobalTensor<bool> logical_and(const GlobalTensor<bool>& a, const GlobalTensor<bool>& b) {
  return detail::compare_tensors<kernel::CompareOp::kAnd>(a, b);
}
GlobalTensor<bool> logical_or(const GlobalTensor<bool>& a, const GlobalTensor<bool>& b) {
  return detail::compare_tensors<kernel::CompareOp::kOr>(a, b);
}
GlobalTensor<bool> logical_not(const GlobalTensor<bool>& x) {
  const detail::InputRef refs[] = {detail::input_ref(x)};
  return detail::run_op<detail::CompareScalarDef<kernel::CompareOp::kEq, true>, bool>(refs, {}, Scalar::of<bool>(false));
}

}  // namespace spsd
