// The explicit instantiations of the cpu kernels, include/spsd/kernel/cpu/ (core/instances.hpp).
#include "spsd/kernel/cpu/dropout.hpp"
#include "spsd/kernel/cpu/elementwise.hpp"
#include "spsd/kernel/cpu/gemm.hpp"
#include "spsd/kernel/cpu/index.hpp"
#include "spsd/kernel/cpu/normalization.hpp"
#include "spsd/kernel/cpu/optim.hpp"
#include "spsd/kernel/cpu/permute.hpp"
#include "spsd/kernel/cpu/reduce.hpp"
#include "spsd/kernel/cpu/softmax.hpp"

namespace spsd::kernel::cpu {

SPSD_FOR_EACH_ELEMENT(SPSD_CPU_ELEMENTWISE_INSTANCES, )
SPSD_FOR_EACH_FLOATING(SPSD_CPU_UNARY_GRAD_INSTANCES, )
SPSD_FOR_EACH_ELEMENT(SPSD_CPU_REDUCE_INSTANCES, )
SPSD_FOR_EACH_ELEMENT(SPSD_CPU_GEMM_INSTANCES, )
SPSD_FOR_EACH_ELEMENT(SPSD_CPU_INDEX_INSTANCES, )
SPSD_FOR_EACH_ELEMENT(SPSD_CPU_PERMUTE_INSTANCES, )
SPSD_FOR_EACH_FLOATING(SPSD_CPU_SOFTMAX_INSTANCES, )
SPSD_FOR_EACH_FLOATING(SPSD_CPU_OPTIM_INSTANCES, )
SPSD_FOR_EACH_FLOATING(SPSD_CPU_NORM_INSTANCES, )
SPSD_FOR_EACH_FLOATING(SPSD_CPU_DROPOUT_INSTANCES, )

}  // namespace spsd::kernel::cpu
