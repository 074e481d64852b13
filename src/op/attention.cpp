// The explicit instantiations of spsd/op/attention.hpp and of its cpu kernels,
// spsd/kernel/cpu/attention.hpp (core/instances.hpp).
#include "spsd/op/attention.hpp"

namespace spsd {

SPSD_FOR_EACH_ELEMENT(SPSD_ATTENTION_INSTANCES, )
SPSD_FOR_EACH_FLOATING(SPSD_ATTENTION_GRAD_INSTANCES, )

namespace kernel::cpu {
SPSD_FOR_EACH_FLOATING(SPSD_CPU_ATTENTION_INSTANCES, )
}  // namespace kernel::cpu

}  // namespace spsd
