#pragma once
// Between the fakes of test/fake_cuda (fake_cudart.cpp, fake_nccl.cpp) and the test that drives
// them (test/gpu/test_cuda_comm.cpp when compiled with SPSD_FAKE_CUDA=1).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

// fake_cudart.cpp, for fake_nccl.cpp: appends work to a stream's lazy queue; the device a stream
// belongs to; the device whose memory holds [p, p + bytes) (-1: not device memory, -2: bytes is 0).
void fake_cuda_enqueue(cudaStream_t stream, std::function<void()> work);
int fake_cuda_stream_device(cudaStream_t stream);
int fake_cuda_device_of(const void* p, std::size_t bytes);

// fake_nccl.cpp, for the test: while `state` is not ncclSuccess, ncclCommGetAsyncError reports it
// on every communicator (ncclInProgress: nothing ever completes, i.e. a peer that never joins;
// an error: a peer or network failure). And how many times ncclCommAbort was called so far.
void fake_nccl_force_state(ncclResult_t state);
int fake_nccl_aborts();

// fake_nccl.cpp, for the test: the collectives this thread posted since the last call (kind as
// "all_reduce", "reduce_scatter", ...; the NCCL dtype and count of each), oldest first.
struct FakeNcclCall {
  const char* kind;
  ncclDataType_t type;
  std::size_t count;
};
std::vector<FakeNcclCall> fake_nccl_take_calls();

// fake_half_wire.cpp, for the test: how many widenings and roundings (cuda/comm/half_wire.hpp) this
// thread enqueued since the last call.
struct FakeHalfWire {
  int64_t widened = 0, narrowed = 0;
};
FakeHalfWire fake_half_wire_take();
