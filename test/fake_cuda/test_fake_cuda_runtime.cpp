// fake-cuda-runtime: DeviceRuntime::capture_graph (runtime/device.hpp; docs/cuda.md, "CUDA graphs
// (device layer)") on the fake CUDA runtime and NCCL (fake_cudart.cpp, fake_nccl.cpp), i.e. the
// device runtime's own part of a capture, which gpu-comm's case (f) does not reach:
//   (1) one process (MPI backend, so the runtime picks NCCL over {0}): a fill, collectives and a
//       copy on the communication stream queued on the worker (joined into the capture and back by
//       the runtime's events) and a device copy of a result, captured once and replayed 3 times
//       on new inputs; a block
//       freed inside the capture stays allocated while the graph lives;
//   (2) what the runtime refuses inside a capture (synchronize, a copy to the host, a capture in
//       a capture), each ending the capture so that the runtime works afterwards;
//   (3) spsd::simulate 2 ranks on one device (host-staged): a queued collective and an inline one
//       refuse the capture on both ranks (no hang), and the communicator works afterwards.
// Prints one line per group and a verdict; exits 1 on any failure.
#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <spsd/comm/communicator.hpp>
#include <spsd/core/error.hpp>
#include <spsd/runtime/device.hpp>
#include <spsd/runtime/runtime.hpp>
#include <spsd/runtime/scheduler.hpp>

#include "comm/event.cuh"
#include "runtime/context.hpp"
#include "../common/wrong_error.hpp"

namespace {

using spsd::DeviceType;
using spsd::DType;
using spsd::ReduceOp;
using spsd::detail::check_cuda;
using spsd::detail::concat;

constexpr const char* kOp = "fake-cuda-runtime";

struct Result {
  int checks = 0;
  std::vector<std::string> failures;
  void expect(bool ok, const std::string& what) {
    ++checks;
    if (!ok) failures.push_back(what);
  }
  // body must throw spsd::Error saying every needle.
  void expect_error(const std::string& what, std::initializer_list<std::string_view> needles,
                    const std::function<void()>& body) {
    ++checks;
    if (std::string wrong = spsd_test::wrong_error(needles, body); !wrong.empty()) failures.push_back(what + ": " + wrong);
  }
};

std::vector<float> values(int64_t n, int64_t rank, int salt) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(((rank + 1) * 37 + i * 11 + salt * 7) % 23 - 11);
  return v;
}

cudaStream_t compute(spsd::detail::DeviceRuntime& rt) { return static_cast<cudaStream_t>(rt.compute_stream()); }

void upload(spsd::detail::DeviceRuntime& rt, void* dst, const std::vector<float>& host) {
  check_cuda(cudaMemcpyAsync(dst, host.data(), host.size() * 4, cudaMemcpyHostToDevice, compute(rt)), kOp, "upload");
}

std::vector<float> download(spsd::detail::DeviceRuntime& rt, const void* src, int64_t n) {
  std::vector<float> host(n);
  check_cuda(cudaMemcpyAsync(host.data(), src, n * 4, cudaMemcpyDeviceToHost, compute(rt)), kOp, "download");
  check_cuda(cudaStreamSynchronize(compute(rt)), kOp, "cudaStreamSynchronize");
  return host;
}

// A communication instruction queued on the worker even though it is small and the stream idle.
void queue(std::string_view name, int64_t bytes, std::function<void()> run) {
  const spsd::detail::AlwaysQueueComm queued;
  spsd::detail::issue_comm(spsd::detail::Instruction{name, {}, {}, std::move(run), bytes});
}

// (1) NCCL over this process alone.
Result replays() {
  Result r;
  spsd::detail::DeviceRuntime& rt = spsd::detail::device_runtime(kOp);
  spsd::Communicator& comm = rt.communicator({spsd::rank()});
  const int64_t n = 256;
  const auto block = [&] { return spsd::detail::allocate_device_block(n * 4); };
  spsd::detail::DeviceBlock in = block(), reduced = block(), copied = block(), filled = block(), unpacked = block();
  upload(rt, copied.data, std::vector<float>(n, -777));
  const float seven = 7;
  const int64_t in_use_before = rt.allocator().stats().bytes_in_use;
  std::unique_ptr<spsd::detail::DeviceGraph> graph = rt.capture_graph("graph replays", [&] {
    rt.fill_elements(filled.data, n, &seven, 4);
    queue("graph all_reduce", n * 4, [&] {
      comm.all_reduce(in.data, reduced.data, n, DType::kFloat32, ReduceOp::kSum);
      comm.all_reduce(filled.data, filled.data, n, DType::kFloat32, ReduceOp::kSum);
      // On the communication stream (as boxing's unpack kernels): joined back by the runtime alone.
      rt.copy_bytes(unpacked.data, DeviceType::kCUDA, reduced.data, DeviceType::kCUDA, n * 4);
    });
    spsd::detail::before_host_communication();  // what reading `reduced` waits for: the worker issued it
    rt.copy_bytes(copied.data, DeviceType::kCUDA, reduced.data, DeviceType::kCUDA, n * 4);
    spsd::detail::DeviceBlock scratch = block();  // freed inside: the graph keeps it
    rt.zero_bytes(scratch.data, n * 4);
    scratch.owner->free(scratch.data);
  });
  r.expect(download(rt, copied.data, n) == std::vector<float>(n, -777), "the capture ran the copy");
  r.expect(rt.allocator().stats().bytes_in_use == in_use_before + 1024,
           concat("a block freed in the capture is not held for the graph: ", rt.allocator().stats().bytes_in_use,
                  " bytes in use, expected ", in_use_before + 1024));
  for (int it = 0; it < 3; ++it) {
    upload(rt, in.data, values(n, 0, it));
    upload(rt, filled.data, std::vector<float>(n, 0));
    graph->launch();
    r.expect(download(rt, copied.data, n) == values(n, 0, it), concat("launch ", it, ": the queued all_reduce and copy"));
    r.expect(download(rt, filled.data, n) == std::vector<float>(n, 7), concat("launch ", it, ": the fill and its all_reduce"));
    r.expect(download(rt, unpacked.data, n) == values(n, 0, it), concat("launch ", it, ": the worker's copy"));
  }
  graph.reset();
  r.expect(rt.allocator().stats().bytes_in_use == in_use_before, "the graph's held block was not freed with it");
  rt.synchronize();
  for (spsd::detail::DeviceBlock* b : {&in, &reduced, &copied, &filled, &unpacked}) b->owner->free(b->data);
  return r;
}

// (2) Refused inside a capture; the runtime works afterwards.
Result refusals() {
  Result r;
  spsd::detail::DeviceRuntime& rt = spsd::detail::device_runtime(kOp);
  spsd::detail::DeviceBlock b = spsd::detail::allocate_device_block(64);
  std::vector<float> host(16);
  const auto refused = [&](const std::string& what, std::initializer_list<std::string_view> needles,
                           const std::function<void()>& body) {
    r.expect_error(what, needles, [&] { rt.capture_graph("graph refusals", body); });
    upload(rt, b.data, values(16, 0, 1));
    rt.synchronize();
    r.expect(download(rt, b.data, 16) == values(16, 0, 1), "the runtime does not work after: " + what);
  };
  refused("synchronize", {"synchronize", "cannot be captured into the CUDA graph of graph refusals"},
          [&] { rt.synchronize(); });
  refused("copy to the host", {"copy", "64 bytes cuda -> cpu", "cannot be captured"},
          [&] { rt.copy_bytes(host.data(), DeviceType::kCPU, b.data, DeviceType::kCUDA, 64); });
  refused("nested capture", {"graph inner", "captures do not nest"},
          [&] { rt.capture_graph("graph inner", [] {}); });
  refused("body throws", {"the body failed"}, [&] {
    rt.zero_bytes(b.data, 64);
    spsd::detail::throw_error("body", "the body failed");
  });
  b.owner->free(b.data);
  return r;
}

// (3) Host-staged (ranks sharing the device): refused on every rank, then works.
Result host_staged(int64_t n) {
  Result r;
  const int64_t me = spsd::rank();
  spsd::detail::DeviceRuntime& rt = spsd::detail::device_runtime(kOp);
  std::vector<int64_t> ranks(n);
  for (int64_t k = 0; k < n; ++k) ranks[k] = k;
  spsd::Communicator& comm = rt.communicator(ranks);
  spsd::detail::DeviceBlock b = spsd::detail::allocate_device_block(64 * 4);
  upload(rt, b.data, values(64, me, 2));
  const auto all_reduce = [&] { comm.all_reduce(b.data, b.data, 64, DType::kFloat32, ReduceOp::kSum); };
  const std::string_view refusal = "host-staged communication (ranks sharing a GPU, or no NCCL) cannot be captured";
  r.expect_error(concat("rank ", me, ": queued"), {"all_reduce", refusal},
                 [&] { rt.capture_graph("graph host-staged", [&] { queue("graph all_reduce", 256, all_reduce); }); });
  r.expect_error(concat("rank ", me, ": inline"), {"all_reduce", refusal},
                 [&] { rt.capture_graph("graph host-staged", all_reduce); });
  all_reduce();
  std::vector<float> sum(64, 0);
  for (int64_t m = 0; m < n; ++m)
    for (int64_t i = 0; i < 64; ++i) sum[i] += values(64, m, 2)[i];
  r.expect(download(rt, b.data, 64) == sum, concat("rank ", me, ": all_reduce after the refused captures"));
  rt.synchronize();
  b.owner->free(b.data);
  return r;
}

int report(const std::string& label, const std::function<Result()>& body) {
  Result r;
  try {
    r = body();
  } catch (const std::exception& e) {
    r.failures.push_back(concat("threw: ", e.what()));
  }
  std::printf("%s: %d checks, %zu failures\n", label.c_str(), r.checks, r.failures.size());
  for (const std::string& f : r.failures) std::printf("  FAIL %s\n", f.c_str());
  std::fflush(stdout);
  return static_cast<int>(r.failures.size());
}

}  // namespace

int main(int argc, char** argv) {
  spsd::Runtime runtime(argc, argv);
  int failures = 0;
  // The runtime takes NCCL only under MPI (simulated ranks share their GPUs); alone here.
  if (spsd::detail::context(kOp).backend->name() == "mpi" && spsd::world_size() == 1)
    failures += report("graph replays, nccl alone", replays);
  else
    std::printf("graph replays, nccl alone: not run (needs the MPI backend and one process)\n");
  failures += report("graph refusals", refusals);
  std::mutex mutex;
  spsd::simulate(2, [&] {
    const int mine = report(concat("graph refused, host-staged, simulated rank ", spsd::rank()), [] { return host_staged(2); });
    std::lock_guard lock(mutex);
    failures += mine;
  });
  std::printf("fake-cuda-runtime: %d failures: %s\n", failures, failures == 0 ? "OK" : "FAIL");
  return failures == 0 ? 0 : 1;
}
