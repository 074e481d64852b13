#pragma once
// The NCCL communicator: collectives on device memory, enqueued on the device's comm stream and
// ordered after earlier and before later work on its compute stream.
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "device_streams.hpp"
#include "spsd/comm/communicator.hpp"

namespace spsd::detail {

// Collective over world_ranks (one GPU per member; NCCL refuses two members on one GPU, see
// ranks_share_a_gpu). `bootstrap` is a host communicator over the same ranks in the same order:
// member 0's ncclUniqueId travels through bootstrap.broadcast; it is not kept. Buffers are device
// pointers on streams.device. Creation and every call wait at most *timeout (read at each call,
// so it must outlive the communicator); after it the NCCL communicator is aborted, the call throws
// spsd::Error and every later call on this communicator throws too.
std::unique_ptr<Communicator> make_nccl_communicator(std::vector<int64_t> world_ranks, int64_t my_index,
                                                     CommStats* stats, Communicator& bootstrap,
                                                     const DeviceStreams& streams,
                                                     const std::chrono::milliseconds* timeout);

}  // namespace spsd::detail
