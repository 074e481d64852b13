#pragma once
// Which physical GPU each rank drives: NCCL refuses two members of one communicator on one GPU,
// so a cuda placement whose ranks share one falls back to the host-staged communicator.
#include "spsd/comm/communicator.hpp"

namespace spsd::detail {

// Collective over `host` (host memory only): every member all-gathers the UUID of its CUDA
// `device`; true on every member when any two members drive the same GPU (UUIDs see through
// CUDA_VISIBLE_DEVICES renumbering). A member whose device cannot be queried makes every member throw.
bool ranks_share_a_gpu(Communicator& host, int device);

}  // namespace spsd::detail
