// The explicit instantiations of kernel/cpu/compare.hpp (core/instances.hpp).
#include "spsd/kernel/cpu/compare.hpp"

namespace spsd::kernel::cpu {

SPSD_FOR_EACH_ELEMENT(SPSD_CPU_COMPARE_INSTANCES, )
SPSD_CPU_COMPARE_INSTANCES(, bool)
SPSD_FOR_EACH_ELEMENT(SPSD_CPU_EXTREME_KEYS_INSTANCES, )

}  // namespace spsd::kernel::cpu
