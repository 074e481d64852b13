#pragma once
// Host <-> device traffic of a rank: bytes copied each way and the times the host waited for a
// device, in total and by the op in progress. Training on cuda placements should touch the host
// only where the program asks (reading a loss, full(), to_vector, cpu<->cuda boxing); this
// counter is how a test proves it, next to comm_stats() for the network.
//
// Counted: every copy between host and device memory (detail::copy_bytes: tensor moves,
// factories, checkpoint staging, cpu<->cuda boxing) and every host wait for the device
// (synchronize(), a device -> host copy, the zero-divisor scan of integer division). Not counted:
// the host-staged communicator's own staging (ranks sharing a GPU), which is communication and
// shows in comm_stats().
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <string_view>

#include "spsd/layout/placement.hpp"  // DeviceType

namespace spsd {

// Bytes and copies each way between host and device, and the host's waits for a device.
struct DeviceTrafficCounts {
  int64_t host_to_device_bytes = 0;
  int64_t host_to_device_copies = 0;
  int64_t device_to_host_bytes = 0;
  int64_t device_to_host_copies = 0;
  int64_t synchronizations = 0;  // the host waited for work on a device stream

  // Whether every counter is 0; a one-line summary; == compares every counter.
  bool empty() const { return *this == DeviceTrafficCounts{}; }
  std::string to_string() const;
  friend bool operator==(const DeviceTrafficCounts&, const DeviceTrafficCounts&) = default;
  friend std::ostream& operator<<(std::ostream& os, const DeviceTrafficCounts& c) { return os << c.to_string(); }
};

// This rank's host <-> device traffic, in total and by op (device_traffic()).
struct DeviceTraffic {
  DeviceTrafficCounts total;
  // By the op that was running (its name as SPSD_LOG prints it; the boxing of its inputs
  // included), and kNoOp for the rest: Tensor::to, to_vector, factories, to_global.
  std::map<std::string, DeviceTrafficCounts, std::less<>> by_op;
  static constexpr std::string_view kNoOp = "(no op)";
  std::string to_string() const;
};

// This rank's counters since its Runtime started or the last reset (throws without a Runtime).
DeviceTraffic device_traffic();
void reset_device_traffic();

namespace detail {

// While alive, the calling thread's device traffic counts toward op (a name that outlives the
// scope: op names are string literals). Scopes nest; the innermost names the traffic.
class DeviceTrafficScope {
 public:
  explicit DeviceTrafficScope(std::string_view op) noexcept;
  ~DeviceTrafficScope();
  DeviceTrafficScope(const DeviceTrafficScope&) = delete;
  DeviceTrafficScope& operator=(const DeviceTrafficScope&) = delete;

 private:
  std::string_view previous_;
};

// Counts a copy of bytes from src to dst (nothing when both are host memory) and, for a copy to
// the host, the wait it needs; and a host wait alone. No-ops without an active Runtime.
void note_device_copy(DeviceType dst, DeviceType src, int64_t bytes);
void note_device_synchronization();

}  // namespace detail

}  // namespace spsd
