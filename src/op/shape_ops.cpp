// The explicit instantiations of spsd/op/shape_ops.hpp (core/instances.hpp).
#include "spsd/op/shape_ops.hpp"

namespace spsd {

SPSD_FOR_EACH_ELEMENT(SPSD_SHAPE_OPS_INSTANCES, )

}  // namespace spsd
