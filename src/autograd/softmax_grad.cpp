// The explicit instantiations of spsd/autograd/softmax_grad.hpp (core/instances.hpp).
#include "spsd/autograd/softmax_grad.hpp"

namespace spsd::detail {

SPSD_FOR_EACH_FLOATING(SPSD_SOFTMAX_GRAD_INSTANCES, )

}  // namespace spsd::detail
