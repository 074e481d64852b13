#pragma once
// The eager runtime's policy (DESIGN.md 5, docs/runtime.md): where each instruction runs.
// Kernels run on the calling thread (the CPU compute stream; on a GPU they are queued on the
// device's compute stream). Communication instructions (boxing steps with traffic, the
// consistency check) go to the rank's communication stream, a worker thread, so a collective
// on one tensor proceeds while the program computes on another; reading a tensor waits for
// exactly the pending write it needs (Storage::data()).
//
// A communication instruction runs on the calling thread instead when
//   - the runtime is synchronous (SPSD_SYNC=1 or set_synchronous(true)): everything inline,
//     the reference behaviour for tests and the mode for debugging;
//   - or the stream is idle and the caller needs the result at once (an op's boxed inputs)
//     or it moves at most inline_bytes() bytes (the hand-off to the worker costs more than the
//     overlap could win; the default is measured in docs/runtime.md).
// Whoever talks to a communicator directly from the rank's thread (a user collective,
// communicator creation) first waits for the stream, so collectives stay in program order.
#include <cstdint>

#include "spsd/runtime/instruction.hpp"
#include "spsd/runtime/stream.hpp"

namespace spsd {

// Synchronous mode for the calling rank (waits for the stream first). The default is the
// environment variable SPSD_SYNC ("1": synchronous; unset, "" or "0": asynchronous).
void set_synchronous(bool on);
bool synchronous();

// Idle-stream communication of at most this many bytes runs inline (see above). Default:
// SPSD_INLINE_BYTES, else kDefaultInlineBytes.
inline constexpr int64_t kDefaultInlineBytes = 65536;  // docs/benchmarks.md, "Inline threshold"
void set_inline_bytes(int64_t bytes);
int64_t inline_bytes();

// What the calling rank's communication stream did since the last reset.
CommStreamStats comm_stream_stats();
void reset_comm_stream_stats();

namespace detail {

enum class Urgency {
  kLater,  // the caller goes on; the result is read later (to_global, the consistency check)
  kNow,    // the caller reads the result right away (an op's boxed input)
};

// While one is alive on the calling thread, communication instructions are queued on the stream
// even when they are small and the stream idle (synchronous mode still runs them inline): for a
// send whose sender must not wait for its receiver, a pipeline stage's activations
// (pipeline/runner.hpp), where running inline would hold the sender's thread until the
// receiver gets there.
class AlwaysQueueComm {
 public:
  AlwaysQueueComm();
  ~AlwaysQueueComm();
  AlwaysQueueComm(const AlwaysQueueComm&) = delete;
  AlwaysQueueComm& operator=(const AlwaysQueueComm&) = delete;

 private:
  bool previous_;
};

// Runs or queues a communication instruction (see the policy above).
void issue_comm(Instruction ins, Urgency urgency = Urgency::kLater);

// On the rank's own thread: waits for the communication stream (and throws its error) so that
// what the caller is about to send comes after what was queued. A no-op on the worker.
void before_host_communication();

}  // namespace detail

}  // namespace spsd
