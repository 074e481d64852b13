// Fake CUDA runtime (the subset of libcudart the device communicators call), for testing their
// host-side logic on machines without a GPU. Linked instead of libcudart into the fake-cuda tests only.
//
// What is faked, and how faithfully:
// - Devices: SPSD_FAKE_CUDA_DEVICES of them (default 1; 0 gives cudaErrorNoDevice, as a machine
//   with a driver and no GPU). The current device is per host thread, as in CUDA.
//   SPSD_FAKE_CUDA_DRIVER=none answers cudaGetDeviceCount as a machine without a CUDA driver
//   (cudaErrorInsufficientDriver, driver version 0), =too-old as one whose driver is older than
//   the runtime (the same error, driver version 11080): the gpu programs skip on the first and
//   fail on the second (test/common/cuda_devices.hpp; the tests fake-cuda-no-*). Each device has a distinct UUID that depends only on its index, so two processes of
//   one job that use device 0 "share a GPU", as on one machine.
// - Device memory is host memory (malloc, filled with 0xCD so unwritten results show), registered
//   with its device; pinned memory (cudaHostAlloc) is registered too. Copies and cudaMemsetAsync
//   are stream work; they check that the pointers live where their cudaMemcpyKind says (a device
//   pointer handed to a host copy, or the reverse, is cudaErrorInvalidValue) and that a device
//   range lies inside one allocation.
// - Streams are lazy queues: enqueued work (copies, NCCL groups) runs only when something waits for
//   it: cudaStreamSynchronize, cudaEventQuery of an event recorded behind it, a stream that reaches a
//   cudaStreamWaitEvent on it, cudaStreamDestroy, or a copy into pageable host memory (synchronous
//   in CUDA too). So a missing event dependency between two streams runs work in the wrong order
//   and shows as wrong data, deterministically, where real hardware would race only at times.
//   Copies from pageable host memory read the source at the call, as CUDA does (pinned sources are
//   read when the copy runs). Streams and events belong to the device current at their creation;
//   recording an event on another device's stream is cudaErrorInvalidResourceHandle, as in CUDA.
// - cudaFree and cudaFreeHost first run all work queued on the memory's device (the current one for
//   pinned memory), as CUDA synchronizes there.
// - Work runs on the host thread that waits for it, holding its stream's lock (recursive: work of
//   one stream may wait for another's). Each rank drives only its own streams (a rank is a thread
//   under spsd::simulate), so the two streams of a rank, which wait on each other in turn, cannot
//   deadlock; ThreadSanitizer nevertheless reports that as a lock-order inversion.
// - cudaEventQuery answers cudaErrorNotReady every other call (per thread) before it runs the work,
//   so polling loops take their waiting path.
// - Not faked: kernels (an nvcc-compiled translation unit without kernels loads; one with kernels
//   aborts at load, and its launches would not link), cudaMallocAsync and friends, multiple
//   processes sharing memory, errors raised by running work, time (cudaEventElapsedTime is 0 ms).
//   cudaMemcpyDefault infers the direction from the pointers, as unified addressing does.
//   No stream priorities, no legacy-stream implicit synchronization: the null stream is an
//   ordinary lazy queue of its own.
// - Stream capture and graphs (cudaStreamBeginCapture ... cudaGraphLaunch): while a stream
//   captures, the work enqueued on it (copies, memsets, fake NCCL groups, fake_half_wire's
//   conversions) is recorded instead of queued, and so are event records and waits. A stream that
//   waits for an event recorded in the capture joins it (its later work is recorded too). The rules
//   that matter to spsd are those of CUDA: cudaStreamEndCapture fails with
//   cudaErrorStreamCaptureUnjoined when the origin stream does not depend on the last recorded
//   work of every joined stream; cudaStreamSynchronize of a capturing stream, cudaEventQuery of an
//   event recorded in a capture, a copy from or to pageable host memory on a capturing stream,
//   and cudaFree/cudaFreeHost while a stream of that device captures (they synchronize the device;
//   the fake refuses them in every capture mode) fail with cudaErrorStreamCaptureUnsupported and
//   invalidate the capture (EndCapture then gives cudaErrorStreamCaptureInvalidated); a capturing
//   stream that waits for an event recorded outside the capture gets
//   cudaErrorStreamCaptureIsolation (and the capture is invalidated). Capture modes are accepted
//   and not told apart (the rules above are Relaxed's; cudaMalloc is allowed). A launched graph
//   runs as one piece of work on the launch stream: the recorded work goes to one fresh lazy
//   queue per captured stream, waits included, and the origin's queue is run, which runs the other
//   queues only as far as the origin waited for them. So a join (wait) missing inside the capture
//   shows as wrong data at replay, as a missing wait shows outside. Not faked: graph updates,
//   child graphs, capturing into an existing graph, launches inside a capture.
//
// Self-check (registered as the should-fail tests fake-cuda-comm-no-event-waits and -no-syncs):
// SPSD_FAKE_CUDA_BREAK=stream-wait makes cudaStreamWaitEvent do nothing, SPSD_FAKE_CUDA_BREAK=sync
// makes cudaStreamSynchronize do nothing (outside a capture: a capturing stream still refuses it).
// fake-cuda-comm must then report mismatches (NCCL path, resp. host-staged path); see
// test/fake_cuda/meson.build.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "fake_control.hpp"

struct FakeCapture;

struct FakeStream {
  int device = 0;
  std::deque<std::function<void()>> queue;
  uint64_t executed = 0, enqueued = 0;
  std::recursive_mutex mutex;  // recursive: running work may wait on the same stream's earlier work
  // While the stream takes part in a capture (capture_mutex): the capture, and the stream's lane in it.
  std::shared_ptr<FakeCapture> capture;
  size_t lane = 0;
};

// One recorded piece of work of a capture: on its lane (a captured stream; 0 is the origin), the
// work itself, or a wait for the first `seq` pieces of lane `waits_for`.
struct CaptureNode {
  size_t lane;
  uint64_t index;              // its place on the lane
  std::function<void()> work;  // empty: a wait
  size_t waits_for = 0;
  uint64_t seq = 0;
};

struct FakeCapture {
  std::vector<std::shared_ptr<FakeStream>> lanes;  // lanes[0]: the stream that began it
  std::vector<uint64_t> recorded;                  // pieces per lane
  std::vector<CaptureNode> nodes;                  // in the order they were recorded
  cudaError_t invalidated = cudaSuccess;           // the illegal call's error, once one was made
  bool ended = false;
};

// What cudaStreamEndCapture returns, and what cudaGraphInstantiate copies.
struct FakeGraph {
  size_t lanes = 0;
  std::vector<CaptureNode> nodes;
};
// A cudaGraphExec_t: launches hold the graph, so it may be destroyed while they are queued.
struct FakeExec {
  std::shared_ptr<const FakeGraph> graph;
};

namespace {

// What a cudaStream_t points to. Events and waits hold the stream itself, which outlives its handle
// (cudaStreamDestroy runs its work, so a later wait on it returns at once, as in CUDA).
struct StreamHandle {
  std::shared_ptr<FakeStream> stream;
};

struct FakeEvent {
  int device = 0;
  std::shared_ptr<FakeStream> stream;  // null until recorded
  uint64_t seq = 0;                    // the work on `stream` it captured (on its lane, if in_capture)
  std::shared_ptr<FakeCapture> in_capture;  // recorded while `stream` captured (capture_mutex)
  size_t lane = 0;
};

struct Allocation {
  size_t bytes;
  int device;  // -1: pinned host memory
};

std::mutex capture_mutex;  // every FakeCapture, and the capture fields of streams and events
std::mutex streams_mutex;
std::vector<std::weak_ptr<FakeStream>> streams;  // every stream made, for cudaFree's synchronization
std::mutex memory_mutex;
std::map<const char*, Allocation> allocations;  // by base address
thread_local int current_device = 0;
thread_local cudaError_t last_error = cudaSuccess;
const std::shared_ptr<FakeStream> legacy_stream = std::make_shared<FakeStream>();

int device_count() {
  static const int n = [] {
    const char* v = std::getenv("SPSD_FAKE_CUDA_DEVICES");
    return v ? std::atoi(v) : 1;
  }();
  return n;
}

std::string_view driver() {
  static const char* v = std::getenv("SPSD_FAKE_CUDA_DRIVER");
  return v ? v : "";
}

std::string_view broken() {
  static const char* v = std::getenv("SPSD_FAKE_CUDA_BREAK");
  return v ? v : "";
}

cudaError_t fail(cudaError_t err) {
  last_error = err;
  return err;
}

const std::shared_ptr<FakeStream>& stream_of(cudaStream_t s) {
  return s ? reinterpret_cast<StreamHandle*>(s)->stream : legacy_stream;
}

// The allocation that holds [p, p + bytes), or null.
const Allocation* find(const void* p, size_t bytes) {
  std::lock_guard lock(memory_mutex);
  const char* c = static_cast<const char*>(p);
  auto it = allocations.upper_bound(c);
  if (it == allocations.begin()) return nullptr;
  --it;
  if (c < it->first || c + bytes > it->first + it->second.bytes) return nullptr;
  return &it->second;
}

void run_until(const std::shared_ptr<FakeStream>& s, uint64_t seq) {
  std::lock_guard lock(s->mutex);
  while (s->executed < seq) {
    std::function<void()> work = std::move(s->queue.front());
    s->queue.pop_front();
    ++s->executed;
    work();
  }
}

void run_all(const std::shared_ptr<FakeStream>& s) {
  uint64_t seq;
  {
    std::lock_guard lock(s->mutex);
    seq = s->enqueued;
  }
  run_until(s, seq);
}

// Under capture_mutex: records a piece of work (or a wait) on the capture s takes part in; nothing
// more is recorded once the capture is invalidated (EndCapture reports that instead).
void record(FakeStream& s, std::function<void()> work, size_t waits_for = 0, uint64_t seq = 0) {
  FakeCapture& c = *s.capture;
  if (c.invalidated != cudaSuccess) return;
  c.nodes.push_back({s.lane, c.recorded[s.lane]++, std::move(work), waits_for, seq});
}

void invalidate(FakeCapture& c, cudaError_t why) {
  if (c.invalidated == cudaSuccess) c.invalidated = why;
}

// A call that is illegal on a capturing stream: invalidates its capture, and says whether it did.
bool refused_in_capture(const std::shared_ptr<FakeStream>& s) {
  std::lock_guard lock(capture_mutex);
  if (!s->capture) return false;
  invalidate(*s->capture, cudaErrorStreamCaptureUnsupported);
  return true;
}

// cudaFree and cudaFreeHost synchronize the device: illegal while one of its streams captures.
bool device_captures(int device) {
  bool any = false;
  std::lock_guard lock(streams_mutex);
  for (const std::weak_ptr<FakeStream>& w : streams)
    if (auto s = w.lock(); s && s->device == device && refused_in_capture(s)) any = true;
  return any;
}

// cudaFree and cudaFreeHost wait for the device's work, as in CUDA: no queued work outlives the
// memory it uses.
void synchronize_device(int device) {
  std::vector<std::shared_ptr<FakeStream>> live;
  {
    std::lock_guard lock(streams_mutex);
    std::erase_if(streams, [](const std::weak_ptr<FakeStream>& w) { return w.expired(); });
    for (const std::weak_ptr<FakeStream>& w : streams)
      if (auto s = w.lock(); s && s->device == device) live.push_back(std::move(s));
  }
  for (const std::shared_ptr<FakeStream>& s : live) run_all(s);
}

}  // namespace

void fake_cuda_enqueue(cudaStream_t stream, std::function<void()> work) {
  const std::shared_ptr<FakeStream>& s = stream_of(stream);
  {
    std::lock_guard lock(capture_mutex);
    if (s->capture) return record(*s, std::move(work));
  }
  std::lock_guard lock(s->mutex);
  s->queue.push_back(std::move(work));
  ++s->enqueued;
}

int fake_cuda_stream_device(cudaStream_t stream) { return stream_of(stream)->device; }

int fake_cuda_device_of(const void* p, size_t bytes) {
  if (bytes == 0) return -2;  // nothing is read or written: any pointer will do
  const Allocation* a = find(p, bytes);
  return a && a->device >= 0 ? a->device : -1;
}

extern "C" {

cudaError_t cudaGetDeviceCount(int* n) {
  *n = 0;
  if (!driver().empty()) return fail(cudaErrorInsufficientDriver);
  *n = device_count();
  return *n > 0 ? cudaSuccess : fail(cudaErrorNoDevice);
}
cudaError_t cudaDriverGetVersion(int* version) {
  *version = driver() == "none" ? 0 : driver() == "too-old" ? 11080 : CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaGetLastError() { return std::exchange(last_error, cudaSuccess); }
cudaError_t cudaPeekAtLastError() { return last_error; }
const char* cudaGetErrorName(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureMerge: return "cudaErrorStreamCaptureMerge";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureUnjoined: return "cudaErrorStreamCaptureUnjoined";
    case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    default: return "cudaErrorUnknown";
  }
}
const char* cudaGetErrorString(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "no error (fake CUDA)";
    case cudaErrorInvalidValue: return "invalid argument (fake CUDA)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (fake CUDA)";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle (fake CUDA)";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (fake CUDA)";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version (fake CUDA)";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing (fake CUDA)";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture (fake CUDA)";
    case cudaErrorStreamCaptureUnjoined: return "capture sequence contains a fork that was not joined to the primary stream (fake CUDA)";
    case cudaErrorStreamCaptureIsolation: return "dependency created on uncaptured work in another stream (fake CUDA)";
    default: return "error (fake CUDA)";
  }
}
cudaError_t cudaGetDevice(int* d) {
  *d = current_device;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d >= device_count()) return fail(cudaErrorInvalidDevice);
  current_device = d;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int d) {
  if (d < 0 || d >= device_count()) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "fake CUDA device %d", d);
  prop->uuid.bytes[0] = 'f';
  prop->uuid.bytes[3] = static_cast<char>(d + 1);
  prop->uuid.bytes[15] = 7;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  auto* handle = new StreamHandle{std::make_shared<FakeStream>()};
  handle->stream->device = current_device;
  std::lock_guard lock(streams_mutex);
  streams.push_back(handle->stream);
  *s = reinterpret_cast<cudaStream_t>(handle);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  run_all(stream_of(s));  // CUDA finishes the stream's work before releasing it
  delete reinterpret_cast<StreamHandle*>(s);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (refused_in_capture(stream_of(s))) return fail(cudaErrorStreamCaptureUnsupported);
  if (broken() == "sync") return cudaSuccess;
  run_all(stream_of(s));
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  auto* event = new FakeEvent;
  event->device = current_device;
  *e = reinterpret_cast<cudaEvent_t>(event);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<FakeEvent*>(e);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  auto* event = reinterpret_cast<FakeEvent*>(e);
  const std::shared_ptr<FakeStream>& stream = stream_of(s);
  if (!event || event->device != stream->device) return fail(cudaErrorInvalidResourceHandle);
  {
    std::lock_guard lock(capture_mutex);
    event->in_capture = stream->capture;
    if (stream->capture) {  // marks a place in the capture, not on the queue
      event->stream = stream;
      event->lane = stream->lane;
      event->seq = stream->capture->recorded[stream->lane];
      return cudaSuccess;
    }
  }
  std::lock_guard lock(stream->mutex);
  event->stream = stream;
  event->seq = stream->enqueued;
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  auto* event = reinterpret_cast<FakeEvent*>(e);
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  if (broken() == "stream-wait") return cudaSuccess;
  {
    const std::shared_ptr<FakeStream>& waiter = stream_of(s);
    std::lock_guard lock(capture_mutex);
    if (const std::shared_ptr<FakeCapture> c = event->in_capture) {
      if (c->ended) return fail(cudaErrorStreamCaptureIsolation);  // its capture is over: nothing to wait for
      if (waiter->capture && waiter->capture != c) {
        invalidate(*waiter->capture, cudaErrorStreamCaptureMerge);
        invalidate(*c, cudaErrorStreamCaptureMerge);
        return fail(cudaErrorStreamCaptureMerge);
      }
      if (!waiter->capture) {  // joins the capture: its work from now on is recorded
        waiter->capture = c;
        waiter->lane = c->lanes.size();
        c->lanes.push_back(waiter);
        c->recorded.push_back(0);
      }
      record(*waiter, {}, event->lane, event->seq);
      return cudaSuccess;
    }
    if (waiter->capture) {
      invalidate(*waiter->capture, cudaErrorStreamCaptureIsolation);
      return fail(cudaErrorStreamCaptureIsolation);
    }
  }
  std::shared_ptr<FakeStream> source = event->stream;
  const uint64_t seq = event->seq;
  if (source) fake_cuda_enqueue(s, [=] { run_until(source, seq); });
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  auto* event = reinterpret_cast<FakeEvent*>(e);
  static thread_local int calls = 0;
  {
    std::lock_guard lock(capture_mutex);
    if (event->in_capture) {  // a place in a capture: nothing ever completes there
      invalidate(*event->in_capture, cudaErrorStreamCaptureUnsupported);
      return fail(cudaErrorStreamCaptureUnsupported);
    }
  }
  if (++calls % 2) return cudaErrorNotReady;  // not an error: not sticky
  if (event->stream) run_until(event->stream, event->seq);
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  auto* event = reinterpret_cast<FakeEvent*>(e);
  {
    std::lock_guard lock(capture_mutex);
    if (event->in_capture) {
      invalidate(*event->in_capture, cudaErrorStreamCaptureUnsupported);
      return fail(cudaErrorStreamCaptureUnsupported);
    }
  }
  if (event->stream) run_until(event->stream, event->seq);
  return cudaSuccess;
}
// No clock: every span lasts 0 ms (the trace's device lane, which only the real device tests).
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 0;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  char* block = static_cast<char*>(std::malloc(bytes ? bytes : 1));
  std::memset(block, 0xCD, bytes);
  std::lock_guard lock(memory_mutex);
  allocations[block] = {bytes, current_device};
  *p = block;
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned) {
  char* block = static_cast<char*>(std::malloc(bytes ? bytes : 1));
  std::lock_guard lock(memory_mutex);
  allocations[block] = {bytes, -1};
  *p = block;
  return cudaSuccess;
}
static cudaError_t release(void* p, bool device) {
  if (!p) return cudaSuccess;
  int owner = current_device;
  {
    std::lock_guard lock(memory_mutex);
    auto it = allocations.find(static_cast<char*>(p));
    if (it != allocations.end() && it->second.device >= 0) owner = it->second.device;
  }
  if (device_captures(owner)) return fail(cudaErrorStreamCaptureUnsupported);
  synchronize_device(owner);
  {
    std::lock_guard lock(memory_mutex);
    auto it = allocations.find(static_cast<char*>(p));
    if (it == allocations.end() || (it->second.device >= 0) != device) return fail(cudaErrorInvalidValue);
    allocations.erase(it);
  }
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) { return release(p, true); }
cudaError_t cudaFreeHost(void* p) { return release(p, false); }

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
  if (bytes == 0) return cudaSuccess;
  if (kind == cudaMemcpyDefault)  // unified addressing: the pointers say where they live
    kind = fake_cuda_device_of(dst, bytes) >= 0
               ? (fake_cuda_device_of(src, bytes) >= 0 ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
               : (fake_cuda_device_of(src, bytes) >= 0 ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind == cudaMemcpyHostToHost) return fail(cudaErrorInvalidValue);  // unused by spsd
  if ((fake_cuda_device_of(dst, bytes) >= 0) != dst_device || (fake_cuda_device_of(src, bytes) >= 0) != src_device)
    return fail(cudaErrorInvalidValue);
  // Pinned host memory is read and written when the copy runs; pageable memory is not (below).
  const bool pageable = kind != cudaMemcpyDeviceToDevice && find(dst_device ? src : dst, bytes) == nullptr;
  if (pageable && refused_in_capture(stream_of(s))) return fail(cudaErrorStreamCaptureUnsupported);
  if (kind == cudaMemcpyHostToDevice && pageable) {  // CUDA reads a pageable source before returning
    auto copy = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
    fake_cuda_enqueue(s, [=] { std::memcpy(dst, copy->data(), bytes); });
    return cudaSuccess;
  }
  fake_cuda_enqueue(s, [=] { std::memmove(dst, src, bytes); });
  if (kind == cudaMemcpyDeviceToHost && pageable) run_all(stream_of(s));  // returns once copied, as in CUDA
  return cudaSuccess;
}

// Synchronous: on the legacy stream, waited for (spsd uses it only outside captures).
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (cudaError_t err = cudaMemcpyAsync(dst, src, bytes, kind, nullptr); err != cudaSuccess) return err;
  run_all(legacy_stream);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s) {
  if (bytes == 0) return cudaSuccess;
  if (fake_cuda_device_of(p, bytes) < 0) return fail(cudaErrorInvalidValue);
  fake_cuda_enqueue(s, [=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  if (!s) return fail(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot capture
  const std::shared_ptr<FakeStream>& stream = stream_of(s);
  std::lock_guard lock(capture_mutex);
  if (stream->capture) return fail(cudaErrorIllegalState);
  stream->capture = std::make_shared<FakeCapture>();
  stream->capture->lanes = {stream};
  stream->capture->recorded = {0};
  stream->lane = 0;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
  const std::shared_ptr<FakeStream>& stream = stream_of(s);
  std::lock_guard lock(capture_mutex);
  *status = !stream->capture                                   ? cudaStreamCaptureStatusNone
            : stream->capture->invalidated == cudaSuccess ? cudaStreamCaptureStatusActive
                                                               : cudaStreamCaptureStatusInvalidated;
  return cudaSuccess;
}

// Ends the capture on every stream that joined it. The origin must depend on the last recorded
// piece of every lane: following the waits back from the origin's end, each lane must be reached
// at its end (else cudaErrorStreamCaptureUnjoined, as CUDA says of a fork not joined back).
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  *graph = nullptr;
  const std::shared_ptr<FakeStream>& stream = stream_of(s);
  std::lock_guard lock(capture_mutex);
  const std::shared_ptr<FakeCapture> c = stream->capture;
  if (!c) return fail(cudaErrorIllegalState);
  if (c->lanes[0] != stream) return fail(cudaErrorStreamCaptureUnmatched);
  c->ended = true;
  for (const std::shared_ptr<FakeStream>& lane : c->lanes) lane->capture = nullptr;
  if (c->invalidated != cudaSuccess) return fail(cudaErrorStreamCaptureInvalidated);
  std::vector<uint64_t> needed(c->lanes.size(), 0);
  needed[0] = c->recorded[0];
  for (bool changed = true; changed;) {
    changed = false;
    for (const CaptureNode& n : c->nodes)
      if (!n.work && n.index < needed[n.lane] && needed[n.waits_for] < n.seq) {
        needed[n.waits_for] = n.seq;
        changed = true;
      }
  }
  for (size_t lane = 1; lane < c->lanes.size(); ++lane)
    if (needed[lane] < c->recorded[lane]) return fail(cudaErrorStreamCaptureUnjoined);
  *graph = reinterpret_cast<cudaGraph_t>(new FakeGraph{c->lanes.size(), std::move(c->nodes)});
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!graph) return fail(cudaErrorInvalidValue);
  auto copy = std::make_shared<const FakeGraph>(*reinterpret_cast<FakeGraph*>(graph));
  *exec = reinterpret_cast<cudaGraphExec_t>(new FakeExec{std::move(copy)});
  return cudaSuccess;
}

// The replay is one piece of work on the launch stream: a fresh lazy queue per captured stream
// gets that stream's recorded work and waits, and running the origin's queue runs the others as
// far as it waits for them (all of it: EndCapture checked the joins).
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  if (!exec) return fail(cudaErrorInvalidValue);
  const std::shared_ptr<FakeStream>& stream = stream_of(s);
  if (refused_in_capture(stream)) return fail(cudaErrorStreamCaptureUnsupported);  // child graphs: not faked
  fake_cuda_enqueue(s, [held = reinterpret_cast<FakeExec*>(exec)->graph, device = stream->device] {
    const FakeGraph& graph = *held;
    std::vector<std::shared_ptr<FakeStream>> lanes(graph.lanes);
    for (std::shared_ptr<FakeStream>& lane : lanes) {
      lane = std::make_shared<FakeStream>();
      lane->device = device;
    }
    for (const CaptureNode& n : graph.nodes) {
      FakeStream& lane = *lanes[n.lane];
      if (n.work)
        lane.queue.push_back(n.work);
      else
        lane.queue.push_back([source = lanes[n.waits_for].get(), seq = n.seq] {
          const std::shared_ptr<FakeStream> held(std::shared_ptr<FakeStream>(), source);  // not owning
          run_until(held, seq);
        });
      ++lane.enqueued;
    }
    run_all(lanes[0]);
  });
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete reinterpret_cast<FakeExec*>(exec);
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete reinterpret_cast<FakeGraph*>(graph);
  return cudaSuccess;
}

// What an nvcc-compiled translation unit calls at load and unload; these have no kernels to register.
void** __cudaRegisterFatBinary(void*) {
  static void* handle = nullptr;
  return &handle;
}
void __cudaRegisterFatBinaryEnd(void**) {}
void __cudaUnregisterFatBinary(void**) {}
void __cudaRegisterFunction(void**, const char*, char*, const char*, int, uint3*, uint3*, dim3*, dim3*, int*) {
  std::fprintf(stderr, "FAKE CUDA: a kernel was registered; the fake runs no kernels\n");
  std::abort();
}

}  // extern "C"
