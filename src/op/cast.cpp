// The explicit instantiations of spsd/op/cast.hpp (core/instances.hpp).
#include "spsd/op/cast.hpp"

namespace spsd {

SPSD_FOR_EACH_ELEMENT(SPSD_CAST_INSTANCES, )
SPSD_CAST_INSTANCES(, bool)

}  // namespace spsd
