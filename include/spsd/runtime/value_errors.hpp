#pragma once
// Bad input values found by device kernels (an index out of range, op/index_check.hpp), without
// a host wait per op. A kernel that finds one writes its position and value into the rank's
// device flag, a small record in pinned host memory that the host reads without a copy; the
// host keeps, per checked launch, what it needs to name the value (the op, the argument, where
// the piece sits). The record is read where the host already waits for the device (a device ->
// host copy, synchronize()) and, without waiting, when a consistency check is issued; a found
// value becomes a data error of the op's rank set (runtime/consistency.hpp's note_data_error),
// which every rank of the set raises at the set's next consistency check.
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spsd::detail {

// What a checked launch writes once it found a bad value; tag 0 while none was found. The first
// launch to find one keeps it (later launches leave it alone) until the host has read it.
struct FoundValue {
  int64_t tag;       // the launch (register_value_check's number)
  int64_t position;  // row-major in the launch's piece
  int64_t value;
};

// The rank's flag: `found` in pinned host memory (the device writes, the host reads), `scratch`
// one int64 of device memory holding INT64_MAX between launches (DeviceRuntime::value_flag()).
struct DeviceValueFlag {
  FoundValue* found = nullptr;
  int64_t* scratch = nullptr;
};

// One checked launch, as the host names its bad value: the rank set and op number of the op,
// and `describe(position, value)` -> (the value's global index, the error's message).
struct ValueCheck {
  std::vector<int64_t> ranks;
  uint64_t op_number = 0;
  std::function<std::pair<int64_t, std::string>(int64_t position, int64_t value)> describe;
};

// The host half of one rank's flag: the launches since the flag was last known clean.
class ValueCheckLedger {
 public:
  // Launches registered without a complete poll before one is forced (a host wait): bounds the
  // ledger of a program that never reads anything back.
  static constexpr size_t kMaxPending = 4096;

  int64_t add(ValueCheck check);
  bool empty() const { return pending_.empty(); }
  size_t size() const { return pending_.size(); }
  // Reads `found`: a value found by a registered launch becomes a data error of its rank set
  // (note_data_error: thrown at once for a rank set of one). complete: every registered launch
  // has finished (the caller waited for the compute stream), so the record is reset and the
  // launches that found nothing are forgotten.
  void poll(FoundValue& found, bool complete);

 private:
  std::deque<std::pair<int64_t, ValueCheck>> pending_;  // by tag, increasing
  int64_t next_tag_ = 1;
  int64_t reported_ = 0;  // the found tag already turned into a data error
};

// This rank's flag, created at the first call (throws like device_runtime(op) without a device).
DeviceValueFlag device_value_flag(std::string_view op);
// Registers a launch that will report into device_value_flag(); returns its tag. Forces a complete
// poll (a host wait) when kMaxPending launches are waiting.
int64_t register_value_check(ValueCheck check);
// Polls this rank's ledger (nothing to do without a device or a registered launch). Only on the
// rank's own thread: a data error it finds may throw.
void poll_value_checks(bool complete);

}  // namespace spsd::detail
