// The explicit instantiations of spsd/op/reduce.hpp (core/instances.hpp).
#include "spsd/op/reduce.hpp"

namespace spsd {

SPSD_FOR_EACH_ELEMENT(SPSD_REDUCE_INSTANCES, )
SPSD_FOR_EACH_FLOATING(SPSD_VAR_INSTANCES, )

}  // namespace spsd
