// The explicit instantiations of spsd/tensor/factory.hpp (core/instances.hpp).
#include "spsd/tensor/factory.hpp"

namespace spsd {

SPSD_FOR_EACH_ELEMENT(SPSD_FACTORY_INSTANCES, )
SPSD_FACTORY_INSTANCES(, bool)
SPSD_FOR_EACH_FLOATING(SPSD_RANDOM_FACTORY_INSTANCES, )

}  // namespace spsd
