// gpu-comm: the device communicators (host-staged, NCCL) against the host communicator. Every
// collective runs twice on the same data, once on device buffers through the communicator under
// test and once on host copies through a host communicator (the reference); results, and the
// counters each communicator kept, must be identical. Exits 77 (meson: SKIP) only where the
// machine has no CUDA device (../common/cuda_devices.hpp).
//   (a) spsd::simulate with 1, 2, 4 ranks: host-staged over the in-process communicator;
//   (b) each process alone: NCCL over {rank};
//   (c) under mpirun with several ranks: host-staged over MPI where ranks share a GPU, else NCCL.
// Inputs are small integers, exact in every dtype (bfloat16 and float16 included, sums of up to
// 4 ranks too), so sums agree whatever order NCCL reduces in.
//   (e) NCCL's 16-bit reductions under each HalfReduction (comm/half_reduction.hpp), on (b), (a')
//       with 3 members, and (c) where it is NCCL: the bfloat16 and float16 cases above against the
//       host communicator under the same setting, then sums whose result depends on where they
//       are rounded (half_sums), with the bytes counted. On one GPU only NCCL's single member
//       runs (its widening and rounding kernels, a float32 NCCL call); the values that tell the
//       settings apart need 3 or 4 members on their own GPUs (or the fake devices).
//   (f) CUDA graphs (runtime/stream_capture.hpp): collectives and a device copy captured once and
//       replayed 3 times on new inputs, on NCCL over {rank} (and, on the fake devices, over 3
//       simulated ranks each with its own device); the fake also checks that host-staged
//       communication refuses a capture on every member and works afterwards, and the capture
//       rules (a synchronization in a capture, a fork not joined back, an error in the body).
//
// Fake device (SPSD_FAKE_CUDA=1 at compile time: test/fake_cuda/meson.build, tests fake-cuda-comm*):
// the same program linked against fake libcudart/libnccl that run on the CPU (test/fake_cuda/), so
// the communicators' host-side logic is tested on machines without a GPU. It then also runs
//   (a') NCCL over the simulated ranks when each has its own (fake) device;
//   (d) the failure paths: creation and call timeouts (a collective is only enqueued: one that
//       never finishes raises at drain()), an asynchronous NCCL error (at once, or at the call after
//       the one in flight, naming that one), a refused call,
//       a finalize that never ends, two members on one device, a member that cannot query its device.
// Self-check: SPSD_FAKE_CUDA_BREAK=stream-wait (or =sync) breaks the fake's stream ordering and this
// program must then report wrong data (the tests fake-cuda-comm-no-event-waits, -no-syncs).
#include <cuda_runtime.h>

#ifndef SPSD_FAKE_CUDA
#define SPSD_FAKE_CUDA 0
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

// Only the communicator and runtime headers (not spsd/spsd.hpp): the fake-device build links no kernels.
#include <spsd/comm/communicator.hpp>
#include <spsd/comm/half_reduction.hpp>
#include <spsd/comm/stats.hpp>
#include <spsd/comm/traffic.hpp>
#include <spsd/core/dtype.hpp>
#include <spsd/core/error.hpp>
#include <spsd/core/shape.hpp>
#include <spsd/runtime/runtime.hpp>

#include "runtime/context.hpp"
#include "comm/event.cuh"
#include "comm/gpu_identity.hpp"
#include "comm/host_staged_communicator.hpp"
#include "comm/nccl_communicator.hpp"
#include "runtime/stream_capture.hpp"
#include "../common/cuda_devices.hpp"
#include "../common/wrong_error.hpp"
#if SPSD_FAKE_CUDA
#include <chrono>
#include <initializer_list>
#include <string_view>

#include "fake_control.hpp"
#endif

namespace {

using spsd::Communicator;
using spsd::DType;
using spsd::ReduceOp;
using spsd::detail::check_cuda;
using spsd::detail::concat;

constexpr const char* kOp = "gpu-comm";
constexpr bool kFakeDevice = SPSD_FAKE_CUDA;

struct Tally {
  int64_t checks = 0;
  int64_t mismatches = 0;
  int64_t wrong_data = 0;  // of the mismatches, results that differ from the host communicator's
  std::vector<std::string> failures;  // the first few, for the log
  void add(const Tally& other) {
    checks += other.checks;
    mismatches += other.mismatches;
    wrong_data += other.wrong_data;
    for (const std::string& f : other.failures)
      if (failures.size() < 10) failures.push_back(f);
  }
  void fail(std::string what) {
    ++mismatches;
    if (failures.size() < 10) failures.push_back(std::move(what));
  }
};

// cudaMalloc'd copy of a host vector, written with an asynchronous copy on the compute stream (as
// a kernel would write it: the communicator must order itself after it).
template <class T>
class DeviceArray {
 public:
  DeviceArray(const std::vector<T>& host, cudaStream_t stream) : size_(host.size()) {
    if (size_ == 0) return;
    check_cuda(cudaMalloc(&data_, bytes()), kOp, "cudaMalloc");
    check_cuda(cudaMemcpyAsync(data_, host.data(), bytes(), cudaMemcpyHostToDevice, stream), kOp, "upload");
  }
  DeviceArray(DeviceArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceArray& operator=(DeviceArray&&) = delete;
  ~DeviceArray() {
    if (data_) (void)cudaFree(data_);
  }
  T* get() const { return data_; }
  // Read back on the compute stream, i.e. after the communicator's results (it made compute wait).
  std::vector<T> read(cudaStream_t stream) const {
    std::vector<T> host(size_);
    if (size_ == 0) return host;
    check_cuda(cudaMemcpyAsync(host.data(), data_, bytes(), cudaMemcpyDeviceToHost, stream), kOp, "download");
    check_cuda(cudaStreamSynchronize(stream), kOp, "cudaStreamSynchronize");
    return host;
  }

 private:
  size_t bytes() const { return size_ * sizeof(T); }
  T* data_ = nullptr;
  size_t size_ = 0;
};

// Small integers, different per rank, buffer and position.
template <class T>
std::vector<T> values(int64_t n, int64_t rank, int64_t salt) {
  std::vector<T> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(((rank + 1) * 37 + i * 11 + salt * 7) % 23 - 11);
  return v;
}

// Runs each case on the device communicator and on the reference, and compares every buffer.
class Tester {
 public:
  Tester(Communicator& device, Communicator& reference, cudaStream_t compute, std::string label)
      : device_(device), reference_(reference), compute_(compute), label_(std::move(label)) {}

  // op(communicator, buffers) runs one operation; buffers start equal on both sides. Only the
  // first `defined` elements of each buffer are compared (the rest of an in-place reduce-scatter's
  // buffer is unspecified: NCCL leaves the result in it, MPI may use it as scratch).
  template <class T, class Op>
  void check(const std::string& what, std::vector<std::vector<T>> buffers, Op&& op,
             size_t defined = std::numeric_limits<size_t>::max()) {
    std::vector<DeviceArray<T>> device;
    std::vector<T*> on_device, on_host;
    device.reserve(buffers.size());
    for (std::vector<T>& b : buffers) {
      device.emplace_back(b, compute_);
      on_device.push_back(device.back().get());
      on_host.push_back(b.data());
    }
    op(device_, on_device);
    op(reference_, on_host);
    ++tally.checks;
    for (size_t i = 0; i < buffers.size(); ++i) {
      const std::vector<T> got = device[i].read(compute_);
      const auto end = got.begin() + std::min(defined, got.size());
      auto [g, e] = std::mismatch(got.begin(), end, buffers[i].begin());
      if (g == end) continue;
      ++tally.wrong_data;
      tally.fail(concat(label_, " rank ", device_.rank(), ": ", what, " (", spsd::dtype_of<T>, "): buffer ", i,
                        " element ", g - got.begin(), " is ", *g, ", the host communicator gives ", *e));
      return;
    }
  }

  void check_stats(const spsd::CommStats& device, const spsd::CommStats& reference) {
    ++tally.checks;
    if (!(device == reference))
      tally.fail(concat(label_, " rank ", device_.rank(), ": counters differ: device ", device, ", host ", reference));
  }

  Tally tally;

 private:
  Communicator& device_;
  Communicator& reference_;
  cudaStream_t compute_;
  std::string label_;
};

template <class T>
void collectives(Tester& t, int64_t n, int64_t me) {
  constexpr DType dt = spsd::dtype_of<T>;
  using Ptrs = const std::vector<T*>&;
  // Uneven blocks with empty members (every third), as balanced splits of small dims give.
  std::vector<int64_t> uneven(n);
  for (int64_t k = 0; k < n; ++k) uneven[k] = k % 3 == 1 ? 0 : 2 + 3 * k;
  const int64_t uneven_total = std::accumulate(uneven.begin(), uneven.end(), int64_t{0});

  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
    const std::string o(spsd::to_string(op));
    for (int64_t count : {0, 1, 1000}) {
      t.check<T>(concat("all_reduce ", o, " count ", count), {values<T>(count, me, 1), values<T>(count, me, 2)},
                 [&](Communicator& c, Ptrs p) { c.all_reduce(p[0], p[1], count, dt, op); });
      t.check<T>(concat("all_reduce in place ", o, " count ", count), {values<T>(count, me, 3)},
                 [&](Communicator& c, Ptrs p) { c.all_reduce(p[0], p[0], count, dt, op); });
    }
    for (int64_t count : {0, 1, 257}) {
      t.check<T>(concat("reduce_scatter ", o, " count ", count), {values<T>(n * count, me, 4), values<T>(count, me, 5)},
                 [&](Communicator& c, Ptrs p) { c.reduce_scatter(p[0], p[1], count, dt, op); });
      t.check<T>(concat("reduce_scatter in place ", o, " count ", count), {values<T>(n * count, me, 6)},
                 [&](Communicator& c, Ptrs p) { c.reduce_scatter(p[0], p[0], count, dt, op); }, count);
    }
    t.check<T>(concat("reduce_scatter_v ", o, " counts ", spsd::detail::join(uneven)),
               {values<T>(uneven_total, me, 7), values<T>(uneven[me], me, 8)},
               [&](Communicator& c, Ptrs p) { c.reduce_scatter_v(p[0], p[1], uneven, dt, op); });
    t.check<T>(concat("reduce_scatter_v in place ", o), {values<T>(uneven_total, me, 9)},
               [&](Communicator& c, Ptrs p) { c.reduce_scatter_v(p[0], p[0], uneven, dt, op); }, uneven[me]);
  }

  for (int64_t count : {0, 1, 300}) {
    t.check<T>(concat("all_gather count ", count), {values<T>(count, me, 10), values<T>(n * count, me, 11)},
               [&](Communicator& c, Ptrs p) { c.all_gather(p[0], p[1], count, dt); });
    t.check<T>(concat("all_gather in place count ", count), {values<T>(n * count, me, 12)},
               [&](Communicator& c, Ptrs p) { c.all_gather(p[0] + me * count, p[0], count, dt); });
  }
  const int64_t offset = std::accumulate(uneven.begin(), uneven.begin() + me, int64_t{0});
  t.check<T>("all_gather_v", {values<T>(uneven[me], me, 13), values<T>(uneven_total, me, 14)},
             [&](Communicator& c, Ptrs p) { c.all_gather_v(p[0], p[1], uneven, dt); });
  t.check<T>("all_gather_v in place", {values<T>(uneven_total, me, 15)},
             [&](Communicator& c, Ptrs p) { c.all_gather_v(p[0] + offset, p[0], uneven, dt); });

  for (int64_t count : {0, 1, 100})
    t.check<T>(concat("all_to_all count ", count), {values<T>(n * count, me, 16), values<T>(n * count, me, 17)},
               [&](Communicator& c, Ptrs p) { c.all_to_all(p[0], p[1], count, dt); });
  // a sends (3a + 5b) % 4 elements to b (zeros included); b expects exactly that from a.
  std::vector<int64_t> send_counts(n), recv_counts(n);
  for (int64_t p = 0; p < n; ++p) send_counts[p] = (3 * me + 5 * p) % 4, recv_counts[p] = (3 * p + 5 * me) % 4;
  t.check<T>("all_to_all_v",
             {values<T>(std::accumulate(send_counts.begin(), send_counts.end(), int64_t{0}), me, 18),
              values<T>(std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0}), me, 19)},
             [&](Communicator& c, Ptrs p) { c.all_to_all_v(p[0], send_counts, p[1], recv_counts, dt); });

  for (int64_t root = 0; root < n; ++root)
    for (int64_t count : {0, 500})
      t.check<T>(concat("broadcast root ", root, " count ", count), {values<T>(count, me, 20)},
                 [&](Communicator& c, Ptrs p) { c.broadcast(p[0], count, dt, root); });

  // A ring step with several messages per pair (matched in order), an empty one, and one to self.
  const int64_t next = (me + 1) % n, prev = (me + n - 1) % n;
  const std::vector<int64_t> ring = {3, 0, 50};
  std::vector<std::vector<T>> buffers;
  for (size_t j = 0; j < ring.size(); ++j) buffers.push_back(values<T>(ring[j], me, 21 + j));
  buffers.push_back(values<T>(7, me, 25));
  for (size_t j = 0; j < ring.size(); ++j) buffers.push_back(values<T>(ring[j], me, 26 + j));
  buffers.push_back(values<T>(7, me, 30));
  t.check<T>("send_recv", std::move(buffers), [&](Communicator& c, Ptrs p) {
    std::vector<spsd::SendSpec> sends;
    std::vector<spsd::RecvSpec> recvs;
    for (size_t j = 0; j < ring.size(); ++j) {
      sends.push_back({next, p[j], ring[j]});
      recvs.push_back({prev, p[ring.size() + 1 + j], ring[j]});
    }
    sends.push_back({me, p[ring.size()], 7});
    recvs.push_back({me, p[2 * ring.size() + 1], 7});
    c.send_recv(sends, recvs, dt);
  });

  t.check<T>("barrier", {}, [](Communicator& c, Ptrs) { c.barrier(); });
}

// Everything one rank does for one device communicator: its streams, the communicator under test
// (made by `make` over world_ranks), the reference host communicator, and all dtypes.
using Make = std::function<std::unique_ptr<Communicator>(spsd::CommStats*, const spsd::detail::DeviceStreams&)>;

// halves_only: the bfloat16 and float16 cases alone ((e): the other dtypes ignore HalfReduction).
Tally run_group(const std::string& label, int device, const std::vector<int64_t>& world_ranks, int64_t me,
                const Make& make, bool halves_only = false) {
  check_cuda(cudaSetDevice(device), kOp, concat("cudaSetDevice(", device, ")"));
  spsd::detail::Stream compute(kOp), comm(kOp);
  const spsd::detail::DeviceStreams streams{device, compute.get(), comm.get()};
  spsd::CommStats device_stats, reference_stats;
  std::unique_ptr<Communicator> under_test = make(&device_stats, streams);
  std::unique_ptr<Communicator> reference =
      spsd::detail::context(kOp).backend->create(world_ranks, me, &reference_stats);
  Tester t(*under_test, *reference, compute.get(), label);
  const int64_t n = static_cast<int64_t>(world_ranks.size());
  if (!halves_only) {
    collectives<float>(t, n, me);
    collectives<double>(t, n, me);
    collectives<int32_t>(t, n, me);
    collectives<int64_t>(t, n, me);
  }
  // NCCL reduces these natively (the fake: in float, rounded once per combine), or in float32
  // under HalfReduction::kFloat32Wire.
  collectives<spsd::bfloat16>(t, n, me);
  collectives<spsd::float16>(t, n, me);
  t.check_stats(device_stats, reference_stats);
  return t.tally;
}

std::unique_ptr<Communicator> host_staged(const std::vector<int64_t>& ranks, int64_t me, spsd::CommStats* stats,
                                          const spsd::detail::DeviceStreams& streams, spsd::CommStats* scratch) {
  return spsd::detail::make_host_staged_communicator(
      ranks, me, stats, spsd::detail::context(kOp).backend->create(ranks, me, scratch), streams);
}

std::unique_ptr<Communicator> nccl(const std::vector<int64_t>& ranks, int64_t me, spsd::CommStats* stats,
                                   const spsd::detail::DeviceStreams& streams, Communicator& bootstrap) {
  const std::chrono::milliseconds* timeout = &spsd::detail::context(kOp).timeout;
  return spsd::detail::make_nccl_communicator(ranks, me, stats, bootstrap, streams, timeout);
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> r(n);
  std::iota(r.begin(), r.end(), int64_t{0});
  return r;
}

// Runs body on n simulated ranks and adds up their tallies.
Tally simulated(int n, const std::function<Tally()>& body) {
  std::mutex mutex;
  Tally all;
  spsd::simulate(n, [&] {
    Tally mine = body();
    std::lock_guard lock(mutex);
    all.add(mine);
  });
  return all;
}

// body(me, make) on n simulated ranks, rank k on device k, make giving NCCL over all of them.
Tally on_nccl_ranks(int n, const std::function<Tally(int64_t, const Make&)>& body) {
  return simulated(n, [&] {
    const int64_t me = spsd::rank();
    spsd::CommStats s;
    auto members = spsd::detail::context(kOp).backend->create(iota(n), me, &s);
    return body(me, [&](spsd::CommStats* stats, const auto& streams) { return nccl(iota(n), me, stats, streams, *members); });
  });
}

// (e) 16-bit sums whose value depends on where they are rounded, on one member of an NCCL
// communicator of n under the current HalfReduction. Member 0 holds s * eps / 4, member 1
// s * (1 + eps), the others s (eps: the type's spacing at 1, 2^-7 for bfloat16, 2^-10 for
// float16; s = 2^(i % 5 - 2) for element i). The float32 sum rounded once (kFloat32Wire) is
// s * (n - 1 + 2 eps) on 3 or 4 members; 16-bit adds (NCCL's kNative) give s * (n - 1) in every
// order and grouping: the small value vanishes in each add, and the last one is a tie that rounds
// to even. With fewer members both give the one rounding of the sum (then only the dtype NCCL got
// and the bytes tell the settings apart); with more, the native value is not checked.
template <class T>
Tally half_sums(const std::string& label, int device, int64_t n, int64_t me, const Make& make) {
  constexpr DType dt = spsd::dtype_of<T>;
  const bool wire = spsd::half_reduction() == spsd::HalfReduction::kFloat32Wire;
  const float eps = std::ldexp(1.0f, std::is_same_v<T, spsd::bfloat16> ? -7 : -10);
  check_cuda(cudaSetDevice(device), kOp, concat("cudaSetDevice(", device, ")"));
  spsd::detail::Stream compute(kOp), comm(kOp);
  spsd::CommStats stats;
  std::unique_ptr<Communicator> c = make(&stats, {device, compute.get(), comm.get()});
  const auto scale = [](int64_t i) { return std::ldexp(1.0f, static_cast<int>(i % 5) - 2); };
  const auto input = [&](int64_t m, int64_t i) { return T((m == 0 ? eps / 4 : m == 1 ? 1 + eps : 1.0f) * scale(i)); };
  const auto expected = [&](int64_t i) -> std::optional<T> {
    float sum = 0;
    for (int64_t m = 0; m < n; ++m) sum += static_cast<float>(input(m, i));  // exact: few bits
    if (wire || n < 3) return T(sum);
    if (n <= 4) return T(static_cast<float>(n - 1) * scale(i));
    return std::nullopt;
  };
  Tally t;
  const std::string where = concat(label, " rank ", me, " (", dt, ", ", spsd::half_reduction(), "): ");
  // One call on fresh buffers: input elements [0, in_count) of this member, result elements
  // [offset, offset + out_count) of the sum, expected bytes elems.
  const auto check = [&](const std::string& what, int64_t in_count, int64_t offset, int64_t out_count, bool in_place,
                         spsd::traffic::Traffic elems, const std::function<void(void*, void*)>& call) {
    std::vector<T> in(in_count);
    for (int64_t i = 0; i < in_count; ++i) in[i] = input(me, i);
    DeviceArray<T> send(in, compute.get()), recv(std::vector<T>(out_count), compute.get());
#if SPSD_FAKE_CUDA
    (void)fake_nccl_take_calls();  // this call's alone below
    (void)fake_half_wire_take();
#endif
    const spsd::CommStats before = stats;
    call(send.get(), in_place ? send.get() : recv.get());
    const std::vector<T> got = (in_place ? send : recv).read(compute.get());
    ++t.checks;
    for (int64_t k = 0; k < out_count; ++k) {
      const std::optional<T> want = expected(offset + k);
      if (!want || got[k].bits == want->bits) continue;
      ++t.wrong_data;
      t.fail(concat(where, what, ": element ", offset + k, " is ", static_cast<float>(got[k]), ", expected ",
                    static_cast<float>(*want)));
      break;
    }
    ++t.checks;
    const int64_t size = wire ? 4 : 2;  // what goes on the wire, as the host backends count it
    if (stats.bytes_sent - before.bytes_sent != elems.sent * size ||
        stats.bytes_received - before.bytes_received != elems.received * size)
      t.fail(concat(where, what, ": counted ", stats.bytes_sent - before.bytes_sent, " B sent, ",
                    stats.bytes_received - before.bytes_received, " B received; expected ", elems.sent * size, " and ",
                    elems.received * size));
#if SPSD_FAKE_CUDA
    // The fake records what NCCL was asked to reduce, and the conversions around it.
    ++t.checks;
    const ncclDataType_t type = wire ? ncclFloat32 : dt == DType::kBFloat16 ? ncclBfloat16 : ncclFloat16;
    const std::vector<FakeNcclCall> calls = fake_nccl_take_calls();
    const FakeHalfWire converted = fake_half_wire_take();
    for (const FakeNcclCall& posted : calls)
      if (posted.type != type)
        t.fail(concat(where, what, ": NCCL ", posted.kind, " of NCCL dtype ", posted.type, ", expected ", type));
    if (calls.empty()) t.fail(concat(where, what, ": no NCCL call"));
    if (converted.widened != (wire ? 1 : 0) || converted.narrowed != (wire ? 1 : 0))
      t.fail(concat(where, what, ": ", converted.widened, " widenings and ", converted.narrowed, " roundings, expected ",
                    wire ? 1 : 0, " each"));
#endif
  };
  const int64_t count = 1000, block = 257;
  check("all_reduce", count, 0, count, false, spsd::traffic::all_reduce(count, n, me),
        [&](void* s, void* r) { c->all_reduce(s, r, count, dt, ReduceOp::kSum); });
  check("all_reduce in place", count, 0, count, true, spsd::traffic::all_reduce(count, n, me),
        [&](void* s, void* r) { c->all_reduce(s, r, count, dt, ReduceOp::kSum); });
  const std::vector<int64_t> blocks(n, block);
  check("reduce_scatter", n * block, me * block, block, false, spsd::traffic::reduce_scatter(blocks, me),
        [&](void* s, void* r) { c->reduce_scatter(s, r, block, dt, ReduceOp::kSum); });
  check("reduce_scatter in place", n * block, me * block, block, true, spsd::traffic::reduce_scatter(blocks, me),
        [&](void* s, void* r) { c->reduce_scatter(s, r, block, dt, ReduceOp::kSum); });
  std::vector<int64_t> uneven(n);
  for (int64_t k = 0; k < n; ++k) uneven[k] = k % 3 == 1 ? 0 : 2 + 3 * k;
  check("reduce_scatter_v", spsd::traffic::total(uneven), spsd::displacements(uneven)[me], uneven[me], false,
        spsd::traffic::reduce_scatter(uneven, me),
        [&](void* s, void* r) { c->reduce_scatter_v(s, r, uneven, dt, ReduceOp::kSum); });
  c->drain();
  return t;
}

// (e) on one member: the 16-bit collective cases against the host communicator, then half_sums.
Tally half_group(const std::string& label, int device, const std::vector<int64_t>& world_ranks, int64_t me,
                 const Make& make) {
  Tally t = run_group(label, device, world_ranks, me, make, true);
  const int64_t n = static_cast<int64_t>(world_ranks.size());
  t.add(half_sums<spsd::bfloat16>(label, device, n, me, make));
  t.add(half_sums<spsd::float16>(label, device, n, me, make));
  return t;
}

// The process-wide setting for a scope, set before any simulate() (its ranks share it).
struct HalfReductionScope {
  explicit HalfReductionScope(spsd::HalfReduction mode) { spsd::set_half_reduction(mode); }
  ~HalfReductionScope() { spsd::set_half_reduction(spsd::HalfReduction::kNative); }
};

// Prints the group's line and its first failures; an exception counts as a failure.
void report(const std::string& label, Tally& total, const std::function<Tally()>& body) {
  Tally tally;
  try {
    tally = body();
  } catch (const std::exception& e) {
    tally.fail(concat(label, " threw: ", e.what()));
  }
  std::printf("%s: %lld checks, %lld mismatches\n", label.c_str(), static_cast<long long>(tally.checks),
              static_cast<long long>(tally.mismatches));
  for (const std::string& f : tally.failures) std::printf("  MISMATCH %s\n", f.c_str());
  std::fflush(stdout);
  total.add(tally);
}

// One member of a graph case: its device made current, its two streams, the communicator under
// test over them.
struct GraphMember {
  GraphMember(int device, const Make& make)
      : compute((check_cuda(cudaSetDevice(device), kOp, concat("cudaSetDevice(", device, ")")), kOp)), comm(kOp),
        streams{device, compute.get(), comm.get()}, c(make(&stats, streams)) {}
  spsd::detail::Stream compute, comm;
  const spsd::detail::DeviceStreams streams;
  spsd::CommStats stats;
  std::unique_ptr<Communicator> c;
};

// (f) CUDA graphs (runtime/stream_capture.hpp): a step of collectives (all_reduce, all_gather,
// reduce_scatter, a bfloat16 all_reduce, which under kFloat32Wire widens and rounds around a
// float32 NCCL call into scratch grown inside the capture) and a device copy, captured once on
// this member's streams, then launched 3 times with new inputs written into the same buffers
// before each launch; every result is checked against the sum over the members computed here.
// The capture itself must run nothing (the outputs keep their sentinel until the first launch).
Tally graph_replays(const std::string& label, int device, int64_t n, int64_t me, const Make& make) {
  GraphMember member(device, make);
  const spsd::detail::Stream& compute = member.compute;
  const spsd::detail::DeviceStreams& streams = member.streams;
  Communicator* c = member.c.get();
  const int64_t count = 300, block = 40, halves = 200;
  const float sentinel = -777;
  // Inputs of launch `it` on member m (salt by buffer and launch).
  const auto input = [](int64_t elems, int64_t m, int64_t salt, int it) { return values<float>(elems, m, salt + 40 * it); };
  DeviceArray<float> sum_in(input(count, me, 1, 0), compute.get()), sum_out(std::vector<float>(count, sentinel), compute.get());
  DeviceArray<float> gather_in(input(block, me, 2, 0), compute.get()),
      gather_out(std::vector<float>(n * block, sentinel), compute.get());
  DeviceArray<float> scatter_in(input(n * block, me, 3, 0), compute.get()),
      scatter_out(std::vector<float>(block, sentinel), compute.get());
  const auto to_half = [](const std::vector<float>& v) {
    std::vector<spsd::bfloat16> h;
    for (float x : v) h.emplace_back(x);
    return h;
  };
  DeviceArray<spsd::bfloat16> half_in(to_half(input(halves, me, 4, 0)), compute.get()),
      half_out(to_half(std::vector<float>(halves, sentinel)), compute.get());
  DeviceArray<float> copied(std::vector<float>(count, sentinel), compute.get());
  // Scratch for the float32 wire made before the capture, too small for it: the capture grows it
  // (keeping the old one: cudaFree would end the capture).
  c->all_reduce(half_in.get(), half_out.get(), 10, DType::kBFloat16, ReduceOp::kSum);
  c->drain();
  const auto alive = std::make_shared<int>(0);
  const std::unique_ptr<spsd::detail::DeviceGraph> graph = spsd::detail::capture_device_graph(
      streams, "graph replays",
      [&] {
        c->all_reduce(sum_in.get(), sum_out.get(), count, DType::kFloat32, ReduceOp::kSum);
        c->all_gather(gather_in.get(), gather_out.get(), block, DType::kFloat32);
        c->reduce_scatter(scatter_in.get(), scatter_out.get(), block, DType::kFloat32, ReduceOp::kSum);
        c->all_reduce(half_in.get(), half_out.get(), halves, DType::kBFloat16, ReduceOp::kSum);
        check_cuda(cudaMemcpyAsync(copied.get(), sum_out.get(), count * sizeof(float), cudaMemcpyDeviceToDevice,
                                   compute.get()),
                   kOp, "device copy");
      },
      [] {}, alive, nullptr);
  Tally t;
  const std::string where = concat(label, " rank ", me, ": ");
  const auto expect = [&](const std::string& what, const std::vector<float>& got, const std::vector<float>& want) {
    ++t.checks;
    auto [g, w] = std::mismatch(got.begin(), got.end(), want.begin());
    if (g == got.end()) return;
    ++t.wrong_data;
    t.fail(concat(where, what, ": element ", g - got.begin(), " is ", *g, ", expected ", *w));
  };
  expect("after the capture, before a launch", sum_out.read(compute.get()), std::vector<float>(count, sentinel));
  for (int it = 0; it < 3; ++it) {
    if (it > 0) {  // new inputs, written where the graph reads them
      const auto upload = [&](auto& array, const auto& host) {
        check_cuda(cudaMemcpyAsync(array.get(), host.data(), host.size() * sizeof(host[0]), cudaMemcpyHostToDevice,
                                   compute.get()),
                   kOp, "upload");
      };
      upload(sum_in, input(count, me, 1, it));
      upload(gather_in, input(block, me, 2, it));
      upload(scatter_in, input(n * block, me, 3, it));
      upload(half_in, to_half(input(halves, me, 4, it)));
    }
    graph->launch();
    std::vector<float> sum(count, 0), gathered, scattered(block, 0), half_sum(halves, 0);
    for (int64_t m = 0; m < n; ++m) {
      const std::vector<float> a = input(count, m, 1, it), g = input(block, m, 2, it), r = input(n * block, m, 3, it),
                               h = input(halves, m, 4, it);
      for (int64_t i = 0; i < count; ++i) sum[i] += a[i];
      gathered.insert(gathered.end(), g.begin(), g.end());
      for (int64_t i = 0; i < block; ++i) scattered[i] += r[me * block + i];
      for (int64_t i = 0; i < halves; ++i) half_sum[i] += h[i];  // small integers: exact in bfloat16
    }
    const std::string launch = concat("launch ", it, ": ");
    expect(launch + "all_reduce", sum_out.read(compute.get()), sum);
    expect(launch + "all_gather", gather_out.read(compute.get()), gathered);
    expect(launch + "reduce_scatter", scatter_out.read(compute.get()), scattered);
    std::vector<float> half_got;
    for (spsd::bfloat16 x : half_out.read(compute.get())) half_got.push_back(static_cast<float>(x));
    expect(launch + "bfloat16 all_reduce", half_got, half_sum);
    expect(launch + "device copy", copied.read(compute.get()), sum);
  }
  // The streams capture no more, and the communicator works outside the graph as before.
  c->all_reduce(sum_in.get(), sum_out.get(), count, DType::kFloat32, ReduceOp::kSum);
  c->drain();
  std::vector<float> again(count, 0);
  for (int64_t m = 0; m < n; ++m)
    for (int64_t i = 0; i < count; ++i) again[i] += input(count, m, 1, 2)[i];
  expect("all_reduce after the replays", sum_out.read(compute.get()), again);
  return t;
}

#if SPSD_FAKE_CUDA
// Runs body, which must throw spsd::Error saying every needle; a failure otherwise.
void expect_error(Tally& t, const std::string& what, std::initializer_list<std::string_view> needles,
                  const std::function<void()>& body) {
  ++t.checks;
  if (std::string wrong = spsd_test::wrong_error(needles, body); !wrong.empty()) t.fail(concat(what, ": ", wrong));
}

// (f) Host-staged communication refuses a capture, on every member, before it touches a stream or
// a peer (so none hangs), and works normally afterwards: the streams capture no more.
Tally graph_refused(const std::string& label, int device, int64_t n, int64_t me, const Make& make) {
  GraphMember member(device, make);
  const spsd::detail::Stream& compute = member.compute;
  const spsd::detail::DeviceStreams& streams = member.streams;
  Communicator* c = member.c.get();
  DeviceArray<float> buffer(values<float>(64, me, 1), compute.get());
  Tally t;
  const std::string where = concat(label, " rank ", me, ": ");
  for (const char* call : {"all_reduce", "barrier"})
    expect_error(t, where + call + " in a capture",
                 {call, "host-staged communication (ranks sharing a GPU, or no NCCL) cannot be captured into a CUDA graph"},
                 [&] {
                   spsd::detail::capture_device_graph(
                       streams, "graph refused",
                       [&] {
                         if (std::string_view(call) == "barrier") c->barrier();
                         else c->all_reduce(buffer.get(), buffer.get(), 64, DType::kFloat32, ReduceOp::kSum);
                       },
                       [] {}, {}, nullptr);
                 });
  ++t.checks;
  if (spsd::detail::capturing(streams, kOp)) t.fail(where + "the compute stream still captures after the refusal");
  c->all_reduce(buffer.get(), buffer.get(), 64, DType::kFloat32, ReduceOp::kSum);
  std::vector<float> sum(64, 0);
  for (int64_t m = 0; m < n; ++m)
    for (int64_t i = 0; i < 64; ++i) sum[i] += values<float>(64, m, 1)[i];
  ++t.checks;
  if (buffer.read(compute.get()) != sum) {
    ++t.wrong_data;
    t.fail(where + "all_reduce after the refused capture gives wrong data");
  }
  return t;
}

// (f) The capture rules the fake enforces as CUDA does, and capture_device_graph's error paths:
// a synchronization inside a capture is refused and invalidates it; a stream that joined and was
// not joined back fails the end of the capture; one joined back replays its work, at the launch
// only; an error in the body ends the capture. After each, the streams run work as before.
Tally capture_rules(int device) {
  Tally t;
  check_cuda(cudaSetDevice(device), kOp, "cudaSetDevice");
  spsd::detail::Stream s1(kOp), s2(kOp);
  const spsd::detail::DeviceStreams streams{device, s1.get(), s2.get()};
  spsd::detail::Event forked(kOp), joined(kOp);
  DeviceArray<int32_t> word(std::vector<int32_t>{5}, s1.get());
  const auto expect_cuda = [&](const std::string& what, cudaError_t got, cudaError_t want) {
    ++t.checks;
    if (got != want) t.fail(concat("capture rules: ", what, " gives ", cudaGetErrorName(got), ", expected ", cudaGetErrorName(want)));
    (void)cudaGetLastError();
  };
  const auto works = [&](const std::string& after) {  // both streams run work again
    ++t.checks;
    const int32_t value = static_cast<int32_t>(t.checks);
    check_cuda(cudaMemsetAsync(word.get(), 0, 4, s2.get()), kOp, "memset");
    check_cuda(cudaMemcpyAsync(word.get(), &value, 4, cudaMemcpyHostToDevice, s1.get()), kOp, "upload");
    check_cuda(cudaStreamSynchronize(s2.get()), kOp, "sync");
    if (word.read(s1.get())[0] != value) t.fail("capture rules: the streams do not work after " + after);
  };
  const auto begin = [&] {
    expect_cuda("BeginCapture", cudaStreamBeginCapture(s1.get(), cudaStreamCaptureModeRelaxed), cudaSuccess);
  };
  const auto fork = [&] {  // s2 joins the capture and zeroes the word
    forked.record(s1.get(), kOp);
    forked.make_wait(s2.get(), kOp);
    check_cuda(cudaMemsetAsync(word.get(), 0, 4, s2.get()), kOp, "memset");
  };
  cudaGraph_t graph = nullptr;
  // A synchronization inside the capture.
  begin();
  expect_cuda("cudaStreamSynchronize of a capturing stream", cudaStreamSynchronize(s1.get()),
              cudaErrorStreamCaptureUnsupported);
  expect_cuda("EndCapture after a synchronization", cudaStreamEndCapture(s1.get(), &graph),
              cudaErrorStreamCaptureInvalidated);
  works("an invalidated capture");
  // A fork not joined back.
  begin();
  fork();
  expect_cuda("EndCapture with a fork not joined back", cudaStreamEndCapture(s1.get(), &graph),
              cudaErrorStreamCaptureUnjoined);
  works("an unjoined capture");
  // The same fork joined back: the work runs at the launch, not at the capture.
  begin();
  fork();
  joined.record(s2.get(), kOp);
  joined.make_wait(s1.get(), kOp);
  expect_cuda("EndCapture with the fork joined back", cudaStreamEndCapture(s1.get(), &graph), cudaSuccess);
  ++t.checks;
  if (word.read(s1.get())[0] == 0) t.fail("capture rules: the captured memset ran at the capture");
  cudaGraphExec_t exec = nullptr;
  expect_cuda("cudaGraphInstantiate", cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  (void)cudaGraphDestroy(graph);
  expect_cuda("cudaGraphLaunch", cudaGraphLaunch(exec, s1.get()), cudaSuccess);
  ++t.checks;
  if (word.read(s1.get())[0] != 0) t.fail("capture rules: the launch did not run the joined stream's memset");
  (void)cudaGraphExecDestroy(exec);
  works("a launch");
  // capture_device_graph's errors: each ends the capture.
  expect_error(t, "capture rules: a synchronization in the body", {"graph body", "cudaErrorStreamCaptureUnsupported"},
               [&] { spsd::detail::capture_device_graph(streams, "graph body", [&] { s1.synchronize("graph body"); }, [] {}, {}, nullptr); });
  works("a refused synchronization");
  expect_error(t, "capture rules: a fork not joined back", {"graph fork", "not joined back into the compute stream"}, [&] {
    spsd::detail::capture_device_graph(streams, "graph fork", fork, [] {}, {}, nullptr);
  });
  works("an unjoined capture_device_graph");
  expect_error(t, "capture rules: the body throws", {"the body failed"}, [&] {
    spsd::detail::capture_device_graph(
        streams, "graph throws",
        [&] {
          check_cuda(cudaMemsetAsync(word.get(), 0, 4, s1.get()), kOp, "memset");
          spsd::detail::throw_error("test", "the body failed");
        },
        [] {}, {}, nullptr);
  });
  works("a body that threw");
  expect_error(t, "capture rules: nested captures", {"graph outer", "captures do not nest"}, [&] {
    spsd::detail::capture_device_graph(
        streams, "graph outer",
        [&] { spsd::detail::capture_device_graph(streams, "graph outer", [] {}, [] {}, {}, nullptr); }, [] {}, {},
        nullptr);
  });
  works("a nested capture");
  // A graph outliving what it was captured on refuses to launch.
  auto alive = std::make_shared<int>(0);
  auto orphan = spsd::detail::capture_device_graph(streams, "graph orphan", [] {}, [] {}, alive, nullptr);
  alive.reset();
  expect_error(t, "capture rules: a launch after the runtime went", {"graph orphan", "outlived the device runtime"},
               [&] { orphan->launch(); });
  return t;
}
#endif

#if SPSD_FAKE_CUDA
// (d) Fake device only: the paths that need NCCL or CUDA to misbehave on cue (fake_control.hpp).
// The communicators made to hang or fail have one member (this thread), so they block no peer.
Tally failure_paths(int devices) {
  Tally t;
  const auto expect_aborts = [&](const std::string& what, int before, int more) {
    ++t.checks;
    if (fake_nccl_aborts() != before + more)
      t.fail(concat(what, ": ", fake_nccl_aborts() - before, " ncclCommAbort calls, expected ", more));
  };
  const std::chrono::milliseconds timeout(100);
  spsd::CommStats stats, scratch;
  const int64_t me = spsd::rank();
  auto bootstrap = spsd::detail::context(kOp).backend->create({me}, 0, &scratch);
  const int device = static_cast<int>(spsd::local_rank() % devices);
  check_cuda(cudaSetDevice(device), kOp, "cudaSetDevice");
  spsd::detail::Stream compute(kOp), comm(kOp);
  const spsd::detail::DeviceStreams streams{device, compute.get(), comm.get()};
  DeviceArray<float> buffer(values<float>(64, me, 1), compute.get());
  const auto make = [&] {
    return spsd::detail::make_nccl_communicator({me}, 0, &stats, *bootstrap, streams, &timeout);
  };
  const auto all_reduce = [&](Communicator& c) { c.all_reduce(buffer.get(), buffer.get(), 64, DType::kFloat32, ReduceOp::kSum); };

  // Creation that never completes: bounded, aborted.
  int aborts = fake_nccl_aborts();
  fake_nccl_force_state(ncclInProgress);
  expect_error(t, "creation timeout", {"no completion within 0.1 s", "creating"}, [&] { make(); });
  fake_nccl_force_state(ncclSuccess);
  expect_aborts("creation timeout", aborts, 1);

  // A collective that never completes (a peer that never joins): the call returns once it is
  // enqueued (nothing waits on the host), and drain() (or the next call) raises the error within
  // the timeout, naming it; the communicator is aborted, and every later call says why.
  {
    auto c = make();
    all_reduce(*c);  // works before
    aborts = fake_nccl_aborts();
    fake_nccl_force_state(ncclInProgress);
    expect_error(t, "all_reduce timeout", {"all_reduce", "no completion within 0.1 s", "was aborted"}, [&] {
      all_reduce(*c);
      c->drain();
    });
    fake_nccl_force_state(ncclSuccess);
    expect_aborts("all_reduce timeout", aborts, 1);
    expect_error(t, "call after an abort", {"cannot be used", "aborted after an earlier failure", "no completion"},
                 [&] { c->barrier(); });
  }
  // An asynchronous error while a collective is in flight: the next call raises it, naming that
  // collective.
  {
    auto c = make();
    aborts = fake_nccl_aborts();
    all_reduce(*c);
    fake_nccl_force_state(ncclRemoteError);
    expect_error(t, "error after a call", {"all_reduce", "NCCL reported remote process exited"},
                 [&] { c->broadcast(buffer.get(), 64, DType::kFloat32, 0); });
    fake_nccl_force_state(ncclSuccess);
    expect_aborts("error after a call", aborts, 1);
  }
  // An asynchronous error (a peer died): raised at once, not as a timeout.
  {
    auto c = make();
    aborts = fake_nccl_aborts();
    fake_nccl_force_state(ncclRemoteError);
    const auto start = std::chrono::steady_clock::now();
    expect_error(t, "asynchronous error", {"broadcast", "NCCL reported remote process exited"},
                 [&] { c->broadcast(buffer.get(), 64, DType::kFloat32, 0); });
    fake_nccl_force_state(ncclSuccess);
    ++t.checks;
    if (std::chrono::steady_clock::now() - start >= timeout) t.fail("asynchronous error: reported only after the timeout");
    expect_aborts("asynchronous error", aborts, 1);
  }
  // A call NCCL refuses (a host buffer): the group is closed, the communicator aborted.
  {
    auto c = make();
    aborts = fake_nccl_aborts();
    std::vector<float> host(64);
    expect_error(t, "host buffer", {"ncclAllReduce failed", "not memory of device"},
                 [&] { c->all_reduce(host.data(), host.data(), 64, DType::kFloat32, ReduceOp::kSum); });
    expect_aborts("host buffer", aborts, 1);
  }
  // Destruction whose finalize never ends: aborted after the timeout instead of hanging.
  {
    auto c = make();
    all_reduce(*c);
    aborts = fake_nccl_aborts();
    fake_nccl_force_state(ncclInProgress);
    c.reset();
    fake_nccl_force_state(ncclSuccess);
    expect_aborts("finalize timeout", aborts, 1);
  }

  // Two simulated ranks: on one device NCCL refuses the second member (the reason for
  // ranks_share_a_gpu), and a member that cannot query its device makes every member throw.
  std::mutex mutex;
  spsd::simulate(2, [&] {
    Tally mine;
    const int64_t r = spsd::rank();
    spsd::CommStats s, sc;
    auto host = spsd::detail::context(kOp).backend->create({0, 1}, r, &sc);
    check_cuda(cudaSetDevice(0), kOp, "cudaSetDevice");
    spsd::detail::Stream c1(kOp), c2(kOp);
    ++mine.checks;
    try {
      spsd::detail::make_nccl_communicator({0, 1}, r, &s, *host, {0, c1.get(), c2.get()}, &timeout);
      mine.fail(concat("rank ", r, ": NCCL accepted two members on one device"));
    } catch (const spsd::Error&) {
    }
    ++mine.checks;
    try {
      spsd::detail::ranks_share_a_gpu(*host, r == 1 ? 99 : 0);
      mine.fail(concat("rank ", r, ": ranks_share_a_gpu accepted a device that cannot be queried"));
    } catch (const spsd::Error& e) {
      const std::string_view want = r == 1 ? "cudaGetDeviceProperties(device 99) failed" : "world ranks [1] of";
      if (std::string_view(e.what()).find(want) == std::string_view::npos)
        mine.fail(concat("rank ", r, ": ranks_share_a_gpu error does not say '", want, "': ", e.what()));
    }
    std::lock_guard lock(mutex);
    t.add(mine);
  });
  return t;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const spsd_test::CudaDevices found = spsd_test::find_cuda_devices(kOp);
  if (found.count == 0) return found.exit_code;
  const int devices = found.count;
  spsd::Runtime runtime(argc, argv);
  const int64_t world = spsd::world_size(), rank = spsd::rank();
  const int device = spsd::local_rank() % devices;
  Tally total;

  // (a) Threads as ranks, device rank % devices: host-staged over the in-process communicator.
  for (int n : {1, 2, 4}) {
    const std::string label = concat("host-staged, simulate ", n, " ranks");
    report(kFakeDevice && n <= devices ? concat("host-staged and nccl, simulate ", n, " ranks") : label, total, [&] {
      std::mutex mutex;
      Tally all;
      spsd::simulate(n, [&] {
        const int64_t me = spsd::rank();
        const int my_device = static_cast<int>(me % devices);
        spsd::CommStats scratch;
        Tally mine = run_group(label, my_device, iota(n), me, [&](spsd::CommStats* stats, const auto& streams) {
          return host_staged(iota(n), me, stats, streams, &scratch);
        });
        // (a') Fake device: NCCL over the threads too, when each has its own device.
        if (kFakeDevice && n <= devices) {
          auto bootstrap = spsd::detail::context(kOp).backend->create(iota(n), me, &scratch);
          mine.add(run_group(concat("nccl, simulate ", n, " ranks"), my_device, iota(n), me,
                             [&](spsd::CommStats* stats, const auto& streams) {
                               return nccl(iota(n), me, stats, streams, *bootstrap);
                             }));
        }
        // Threads share the GPUs round-robin: they share one exactly when there are more threads.
        auto host = spsd::detail::context(kOp).backend->create(iota(n), me, &scratch);
        ++mine.checks;
        if (spsd::detail::ranks_share_a_gpu(*host, my_device) != (n > devices))
          mine.fail(concat(label, " rank ", me, ": ranks_share_a_gpu disagrees with ", n, " threads on ", devices,
                           " GPUs"));
        std::lock_guard lock(mutex);
        all.add(mine);
      });
      return all;
    });
  }

  // (b) This process alone: NCCL over {rank}.
  report(concat("nccl, world rank ", rank, " alone"), total, [&] {
    spsd::CommStats scratch;
    auto bootstrap = spsd::detail::context(kOp).backend->create({rank}, 0, &scratch);
    return run_group(
        concat("nccl {", rank, "}"), device, {rank}, 0,
        [&](spsd::CommStats* stats, const auto& streams) { return nccl({rank}, 0, stats, streams, *bootstrap); });
  });

  // (c) All processes: NCCL where each drives its own GPU, else host-staged over MPI.
  spsd::CommStats scratch;
  std::unique_ptr<Communicator> bootstrap;
  bool share = true;
  if (world > 1) {
    report(concat("ranks_share_a_gpu, ", world, " processes"), total, [&] {
      bootstrap = spsd::detail::context(kOp).backend->create(iota(world), rank, &scratch);
      share = spsd::detail::ranks_share_a_gpu(*bootstrap, device);
      std::printf("world rank %lld: device %d, ranks %s a GPU\n", static_cast<long long>(rank), device,
                  share ? "share" : "do not share");
      return Tally{.checks = 1};
    });
    const std::string label = concat(share ? "host-staged" : "nccl", ", ", world, " processes");
    report(label, total, [&] {
      return run_group(
          label, device, iota(world), rank,
          [&](spsd::CommStats* stats, const auto& streams) {
            return share ? host_staged(iota(world), rank, stats, streams, &scratch)
                         : nccl(iota(world), rank, stats, streams, *bootstrap);
          });
    });
  }

  // (e) NCCL's 16-bit reductions under each setting: alone, over 3 fake devices, over processes.
  for (spsd::HalfReduction mode : {spsd::HalfReduction::kFloat32Wire, spsd::HalfReduction::kNative}) {
    const HalfReductionScope setting(mode);
    const std::string m(spsd::to_string(mode));
    report(concat("nccl ", m, ", world rank ", rank, " alone"), total, [&] {
      spsd::CommStats s;
      auto alone = spsd::detail::context(kOp).backend->create({rank}, 0, &s);
      return half_group(concat("nccl ", m, " {", rank, "}"), device, {rank}, 0,
                        [&](spsd::CommStats* stats, const auto& streams) { return nccl({rank}, 0, stats, streams, *alone); });
    });
    if (kFakeDevice && devices >= 2) {
      const int n = std::min(devices, 3);
      const std::string label = concat("nccl ", m, ", simulate ", n, " ranks");
      report(label, total, [&] {
        return on_nccl_ranks(n, [&](int64_t me, const Make& make) {
          return half_group(label, static_cast<int>(me), iota(n), me, make);
        });
      });
    }
    if (world > 1 && !share) {
      const std::string label = concat("nccl ", m, ", ", world, " processes");
      report(label, total, [&] {
        return half_group(label, device, iota(world), rank, [&](spsd::CommStats* stats, const auto& streams) {
          return nccl(iota(world), rank, stats, streams, *bootstrap);
        });
      });
    }
  }

  // (f) CUDA graphs: NCCL alone here (on a GPU too), over the fake devices, host-staged refused.
  report(concat("graphs, nccl, world rank ", rank, " alone"), total, [&] {
    const HalfReductionScope setting(spsd::HalfReduction::kFloat32Wire);
    spsd::CommStats s;
    auto alone = spsd::detail::context(kOp).backend->create({rank}, 0, &s);
    return graph_replays(concat("graphs nccl {", rank, "}"), device, 1, 0,
                         [&](spsd::CommStats* stats, const auto& streams) { return nccl({rank}, 0, stats, streams, *alone); });
  });
#if SPSD_FAKE_CUDA
  if (devices >= 2) {
    const int n = std::min(devices, 3);
    const std::string label = concat("graphs, nccl, simulate ", n, " ranks");
    report(label, total, [&] {
      const HalfReductionScope setting(spsd::HalfReduction::kFloat32Wire);
      return on_nccl_ranks(n, [&](int64_t me, const Make& make) {
        return graph_replays(label, static_cast<int>(me), n, me, make);
      });
    });
  }
  {
    const std::string label = "graphs, host-staged, simulate 4 ranks";
    report(label, total, [&] {
      return simulated(4, [&] {
        const int64_t me = spsd::rank();
        spsd::CommStats scratch;
        return graph_refused(label, static_cast<int>(me % devices), 4, me,
                             [&](spsd::CommStats* stats, const auto& streams) {
                               return host_staged(iota(4), me, stats, streams, &scratch);
                             });
      });
    });
  }
  report(concat("graph capture rules, world rank ", rank), total, [&] { return capture_rules(device); });
  report(concat("failure paths, world rank ", rank), total, [&] { return failure_paths(devices); });
#endif

  // Every process returns the same verdict. The self-checks (SPSD_FAKE_CUDA_BREAK) pass only on a
  // last line with wrong data in it (test/fake_cuda/meson.build): a crash never prints one.
  int64_t counts[2] = {total.mismatches, total.wrong_data};
  spsd::world_communicator().all_reduce(counts, counts, 2, DType::kInt64, ReduceOp::kSum);
  std::printf("gpu-comm: %lld checks on world rank %lld, %lld mismatches on all ranks, %lld of them wrong data: %s\n",
              static_cast<long long>(total.checks), static_cast<long long>(rank), static_cast<long long>(counts[0]),
              static_cast<long long>(counts[1]), counts[0] == 0 ? "OK" : "FAIL");
  return counts[0] == 0 ? 0 : 1;
}
