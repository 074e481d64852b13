// ranks_share_a_gpu: an all-gather of device UUIDs over the host communicator.
#include "gpu_identity.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "spsd/core/error.hpp"
#include "spsd/core/shape.hpp"

namespace spsd::detail {

bool ranks_share_a_gpu(Communicator& host, int device) {
  const char* op = "ranks_share_a_gpu";
  // Per member: [1 if the UUID is valid, UUID as two words]. The flag travels with the UUID so a
  // member that failed to query its device makes every member throw, instead of leaving them
  // waiting in an all-gather it never joins.
  constexpr int64_t kWords = 3;
  std::array<int64_t, kWords> mine{};
  cudaDeviceProp prop;
  const cudaError_t err = cudaGetDeviceProperties(&prop, device);
  if (err == cudaSuccess) {
    static_assert(sizeof(prop.uuid.bytes) == 2 * sizeof(int64_t));
    mine[0] = 1;
    std::memcpy(&mine[1], prop.uuid.bytes, sizeof(prop.uuid.bytes));
  } else {
    (void)cudaGetLastError();
  }
  std::vector<int64_t> all(kWords * host.size());
  host.all_gather(mine.data(), all.data(), kWords, DType::kInt64);

  std::vector<int64_t> failed;
  std::vector<std::array<int64_t, 2>> uuids;
  for (int64_t m = 0; m < host.size(); ++m) {
    if (all[kWords * m] != 1)
      failed.push_back(host.world_ranks()[m]);
    else
      uuids.push_back({all[kWords * m + 1], all[kWords * m + 2]});
  }
  if (err != cudaSuccess)
    throw_error(op, "cudaGetDeviceProperties(device ", device, ") failed on world rank ",
                host.world_ranks()[host.rank()],
                ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  SPSD_CHECK(failed.empty(), op, "world ranks ", join(failed), " of ", host.to_string(),
             " could not query their CUDA device");
  std::sort(uuids.begin(), uuids.end());
  return std::adjacent_find(uuids.begin(), uuids.end()) != uuids.end();
}

}  // namespace spsd::detail
