// The explicit instantiations of spsd/op/index.hpp (core/instances.hpp).
#include "spsd/op/index.hpp"

namespace spsd {

SPSD_FOR_EACH_ELEMENT(SPSD_INDEX_INSTANCES, )

}  // namespace spsd
