#pragma once
// The per-rank state behind the free functions rank(), comm_stats(), communicator(...):
// one Context per Runtime (per thread under simulate), reached through a thread-local pointer.
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "../comm/backend.hpp"
#include "spsd/comm/communicator.hpp"
#include "spsd/comm/creation.hpp"
#include "spsd/runtime/device.hpp"
#include "spsd/runtime/device_traffic.hpp"
#include "spsd/runtime/memory_stats.hpp"
#include "spsd/runtime/stream.hpp"
#include "spsd/runtime/trace.hpp"
#include "spsd/runtime/value_errors.hpp"

namespace spsd::detail {

struct ConsistencyTable;  // consistency.cpp: per rank set, the ops noted since the last check

// device_traffic(): written by the rank's thread and its communication worker.
struct DeviceTrafficLedger {
  std::mutex mutex;
  DeviceTraffic traffic;
};

struct Context {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  std::unique_ptr<Backend> backend;
  bool dry = false;  // spsd::dry_run's rank: the backend moves no data, cuda placements are refused
  CommStats stats;
  std::chrono::milliseconds timeout{30'000};  // bound on every wait of every backend
  std::map<std::vector<int64_t>, std::unique_ptr<Communicator>> communicators;
  // The consistency check's communicators and counters, kept apart from the user's (comm_stats()).
  std::map<std::vector<int64_t>, std::unique_ptr<Communicator>> check_communicators;
  CommStats check_stats;
  CreationStats creation;  // both maps' creations, and the MPI handshakes' messages
  DeviceTrafficLedger device_traffic;
  // memory_stats(cpu): the host storage bytes of this rank (Storage keeps a reference).
  std::shared_ptr<HostMemoryCounter> host_memory = std::make_shared<HostMemoryCounter>();
  std::shared_ptr<ConsistencyTable> consistency;  // created at the first note_op (shared_ptr: opaque here)
  ValueCheckLedger value_checks;  // device launches checking input values (runtime/value_errors.hpp)
  // The CUDA device, bound at the first use of a cuda placement. Declared last so it goes first:
  // its communicators wrap or were bootstrapped by the host ones above.
  std::unique_ptr<DeviceRuntime> device;
  // SPSD_TRACE's recorder (null when off). It outlives the stream, whose worker records into it,
  // and writes the file when it goes.
  std::unique_ptr<TraceRecorder> trace;
  // The eager runtime (runtime/scheduler.hpp). The stream is declared after everything its
  // instructions use, so it is destroyed (its queue finished, its worker joined) first.
  bool synchronous = false;    // SPSD_SYNC
  bool async_allowed = true;   // false when the program initialized MPI below MPI_THREAD_SERIALIZED
  int64_t inline_bytes = 0;  // SPSD_INLINE_BYTES
  std::unique_ptr<CommStream> comm_stream;
};

// The environment's defaults for the two settings above (src/runtime/scheduler.cpp).
bool synchronous_from_env();
int64_t inline_bytes_from_env();

// Binds this rank's device (cuda/runtime/device_runtime.cu; src/runtime/device_none.cpp in builds without
// CUDA, where it throws saying so). op names the caller in the error.
std::unique_ptr<DeviceRuntime> make_device_runtime(Context& ctx, std::string_view op);

Context* current_context();
void set_current_context(Context* ctx);
// The active context; throws spsd::Error naming op when no Runtime is active on this thread.
Context& context(std::string_view op);

// SPSD_TIMEOUT_S (seconds, fractions allowed; SPSD_TIMEOUT is read as an older alias) or 30 s.
std::chrono::milliseconds default_timeout();

}  // namespace spsd::detail
