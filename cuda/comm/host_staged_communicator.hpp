#pragma once
// The host-staged communicator: device buffers, moved by a host communicator through pinned host
// copies. For ranks that share a GPU (NCCL refuses two members on one GPU) and for
// spsd::simulate (threads as ranks over the in-process communicator).
#include <cstdint>
#include <memory>
#include <vector>

#include "device_streams.hpp"
#include "spsd/comm/communicator.hpp"

namespace spsd::detail {

// `host` runs over the same ranks in the same order and only ever sees host memory (Debian's
// OpenMPI is not CUDA-aware); create it with scratch counters, so that traffic is counted once,
// in `stats`, by this communicator. Buffers are device pointers on streams.device, ordered on
// streams.compute; every call is synchronous (it returns with the results on the device).
std::unique_ptr<Communicator> make_host_staged_communicator(std::vector<int64_t> world_ranks, int64_t my_index,
                                                            CommStats* stats, std::unique_ptr<Communicator> host,
                                                            const DeviceStreams& streams);

}  // namespace spsd::detail
