// bench/dispatch: the host overhead of one global op whose signature is already resolved
// (cached), against the same local kernel called directly on the same local pieces.
//
//   tools/mpirun -np 1 build-exrel/bench/dispatch [--reps N] [--calls N]
//   tools/mpirun -np 4 build-exrel/bench/dispatch
//
// Tensors are tiny ((4, 4) float32) so that the kernel costs next to nothing and the time is
// the dispatch path: placement check, resolve (a cache hit), note_op (the cross-rank check's
// bookkeeping), box_at of every input and the output, the output allocation, the kernel, and
// the GlobalTensor around the result. Layouts need no communication: add is S(0) + S(0),
// matmul is S(0) x B, on a placement of every rank. The local baseline runs the same
// kernel::cpu call on the same local shapes and allocates its output Tensor the same way
// dispatch does, so "overhead" is what the global view adds.
//
// Timing: after a warm-up, each repetition times `calls` back-to-back calls (no barrier
// between calls; a barrier before each repetition); a repetition's per-call time is the max
// over ranks; the tables show the median over repetitions. On a busy machine a rank shares its
// core with other processes for part of most repetitions, so the tables also give the median
// in thread CPU time (which stops while the rank is descheduled; MPI's yielding waits still
// count) and the first one the least disturbed repetition.
//
// The cross-rank consistency check (runtime/consistency.hpp) is measured per mode with
// detail::set_check_mode, which is what SPSD_CHECK selects (the program sets each mode itself,
// whatever the environment says): off, on (the default: ops are noted and compared every 256
// ops or before an op communicates) and op (compared after every op). With one rank there is
// nobody to compare with, and the modes cost the same. A check is a rendezvous of the ranks:
// besides its own exchange (measured alone too) it costs whatever the ranks drifted apart
// since the last one, which on a busy or oversubscribed machine (MPI waits yield the core)
// is most of it; the barrier time printed with the table shows what a rendezvous costs there.
// Then relu on a P(sum) input, whose signature needs boxing (a reduce-scatter to S(0) on
// several ranks): the total time of such an op. Last, a compiled step (spsd::compile) of 64 such
// ops in a chain, eager and replayed: the host time per op a replay leaves over the kernel.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "spsd/spsd.hpp"

namespace {

using namespace spsd;
using Clock = std::chrono::steady_clock;

int reps = 20;
int64_t calls = 2000;
volatile float sink = 0;  // keeps results observable

double max_over_ranks(double v) {
  world_communicator().all_reduce(&v, &v, 1, DType::kFloat64, ReduceOp::kMax);
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The calling thread's CPU time: unlike the wall clock, it stops while the rank is descheduled.
double thread_cpu_us() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

// For the last time_per_call: the same median in thread CPU time, and the least disturbed
// repetition (wall clock).
double last_cpu = 0, last_min = 0;

// Median over repetitions of (max over ranks of) the time of one call, in microseconds.
double time_per_call(const std::function<void()>& call, int64_t n_calls) {
  for (int64_t i = 0; i < n_calls; ++i) call();  // warm-up: caches, allocator, resolution
  std::vector<double> per_call, cpu_per_call;
  for (int r = 0; r < reps; ++r) {
    world_communicator().barrier();
    const double c0 = thread_cpu_us();
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < n_calls; ++i) call();
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n_calls;
    const double cpu = (thread_cpu_us() - c0) / n_calls;
    per_call.push_back(max_over_ranks(us));
    cpu_per_call.push_back(max_over_ranks(cpu));
  }
  last_min = *std::min_element(per_call.begin(), per_call.end());
  last_cpu = median(cpu_per_call);
  return median(per_call);
}

// Flushes the ops noted so far and switches every rank to another check mode.
void use_check_mode(detail::CheckMode mode, const Placement& placement) {
  detail::check_ops(placement.ranks());
  detail::set_check_mode(mode);
  world_communicator().barrier();
}

Tensor<float> output(const Shape& shape) {
  return Tensor<float>(shape, Storage::allocate_uninitialized(shape.numel() * static_cast<int64_t>(sizeof(float)),
                                                              DeviceType::kCPU));
}

struct Case {
  std::string op;
  std::function<void()> global, local;
};

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--calls") && i + 1 < argc) calls = std::atoll(argv[++i]);
  }
  const int world = world_size();
  std::vector<int64_t> all_ranks(world);
  for (int r = 0; r < world; ++r) all_ranks[r] = r;
  const Placement placement("cpu", all_ranks);
  const Shape shape{4, 4};

  // add: S(0) + S(0) -> S(0); matmul: S(0) x B -> S(0). Neither communicates.
  auto a = randn<float>(shape, placement, sbp::split(0), 1);
  auto b = randn<float>(shape, placement, sbp::split(0), 2);
  auto w = randn<float>(shape, placement, sbp::broadcast, 3);
  const Tensor<float> &la = a.to_local(), &lb = b.to_local(), &lw = w.to_local();

  std::vector<Case> cases = {
      {"add",
       [&] { sink = sink + add(a, b).to_local().data()[0]; },
       [&] {
         Tensor<float> out = output(la.shape());
         kernel::cpu::binary<float>(kernel::cpu::BinaryOp::kAdd, la.data(), la.shape(), lb.data(), lb.shape(),
                                    out.data(), out.shape());
         sink = sink + out.data()[0];
       }},
      {"matmul",
       [&] { sink = sink + matmul(a, w).to_local().data()[0]; },
       [&] {
         Tensor<float> out = output(Shape{la.shape()[0], lw.shape()[1]});
         kernel::cpu::matmul<float>(la.data(), la.shape(), lw.data(), lw.shape(), out.data(), out.shape());
         sink = sink + out.data()[0];
       }},
  };
  // The resolutions the global calls hit (resolved by the first call, cached after).
  if (rank() == 0) {
    std::printf("bench/dispatch: %d rank(s), %s, %d repetitions of %lld calls, median of the max over ranks\n",
                world, runtime_info().c_str(), reps, static_cast<long long>(calls));
    std::printf("  add:    %s\n", resolve(op_schema<detail::BinaryDef<kernel::cpu::BinaryOp::kAdd>>(), {}, placement,
                                          std::vector<TensorMeta>{{shape, DType::kFloat32}, {shape, DType::kFloat32}},
                                          std::vector<NdSbp>{a.nd_sbp(), b.nd_sbp()})
                                      ->signature()
                                      .to_string()
                                      .c_str());
    std::printf("  matmul: %s\n\n", resolve(op_schema<detail::MatmulDef>(), {}, placement,
                                            std::vector<TensorMeta>{{shape, DType::kFloat32}, {shape, DType::kFloat32}},
                                            std::vector<NdSbp>{a.nd_sbp(), w.nd_sbp()})
                                        ->signature()
                                        .to_string()
                                        .c_str());
  }

  // 1. Every case under each check mode, and its local baseline.
  const std::pair<detail::CheckMode, const char*> modes[] = {
      {detail::CheckMode::kOff, "off"}, {detail::CheckMode::kOn, "on"}, {detail::CheckMode::kEveryOp, "op"}};
  std::vector<double> local(cases.size()), local_min(cases.size()), local_cpu(cases.size());
  // Per case: off, on, op.
  std::vector<std::vector<double>> global(cases.size()), global_min(cases.size()), global_cpu(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    local[i] = time_per_call(cases[i].local, calls);
    local_min[i] = last_min;
    local_cpu[i] = last_cpu;
  }
  for (const auto& [mode, name] : modes) {
    use_check_mode(mode, placement);
    // Checking after every op synchronizes the ranks each call: fewer calls keep it short.
    const int64_t n = mode == detail::CheckMode::kEveryOp && world > 1 ? std::max<int64_t>(calls / 10, 1) : calls;
    for (size_t i = 0; i < cases.size(); ++i) {
      global[i].push_back(time_per_call(cases[i].global, n));
      global_min[i].push_back(last_min);
      global_cpu[i].push_back(last_cpu);
    }
  }
  use_check_mode(detail::CheckMode::kOn, placement);
  // What one synchronization of these ranks costs here, for scale.
  const double barrier = time_per_call([] { world_communicator().barrier(); }, std::max<int64_t>(calls / 10, 1));
  // One check's own cost: after a barrier, one op noted, then check_ops timed on each rank. The
  // last rank to arrive finds the others' records already sent, so the minimum over ranks is
  // the exchange itself, without the wait for late ranks (which is what dominates on a busy
  // or oversubscribed machine). Median over the samples.
  double check_alone = 0;
  if (world > 1) {
    const auto identity = std::make_shared<const detail::OpIdentity>("bench/dispatch check probe");
    std::vector<double> samples;
    for (int i = 0; i < 20 * reps; ++i) {
      world_communicator().barrier();
      detail::note_op(placement.ranks(), identity);
      const auto t0 = Clock::now();
      detail::check_ops(placement.ranks());
      double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      world_communicator().all_reduce(&us, &us, 1, DType::kFloat64, ReduceOp::kMin);
      samples.push_back(us);
    }
    check_alone = median(samples);
  }

  if (rank() == 0) {
    std::printf("dispatch overhead, (4, 4) float32; global op with the default check (SPSD_CHECK unset = on)\n");
    std::printf("  %-8s %5s %14s %13s %12s %22s\n", "op", "ranks", "global op us", "local op us", "overhead us",
                "overhead us, check off");
    for (size_t i = 0; i < cases.size(); ++i)
      std::printf("  %-8s %5d %14.3f %13.3f %12.3f %22.3f\n", cases[i].op.c_str(), world, global[i][1], local[i],
                  global[i][1] - local[i], global[i][0] - local[i]);
    std::printf("  the same columns, median of thread CPU time (time descheduled left out):\n");
    for (size_t i = 0; i < cases.size(); ++i)
      std::printf("  %-8s %5d %14.3f %13.3f %12.3f %22.3f\n", cases[i].op.c_str(), world, global_cpu[i][1],
                  local_cpu[i], global_cpu[i][1] - local_cpu[i], global_cpu[i][0] - local_cpu[i]);
    std::printf("  the same columns, the least disturbed repetition (wall clock):\n");
    for (size_t i = 0; i < cases.size(); ++i)
      std::printf("  %-8s %5d %14.3f %13.3f %12.3f %22.3f\n", cases[i].op.c_str(), world, global_min[i][1],
                  local_min[i], global_min[i][1] - local_min[i], global_min[i][0] - local_min[i]);
    std::printf("\nconsistency check: global op us per SPSD_CHECK mode (check cost = mode - off)\n");
    std::printf("  %-8s %5s %10s %14s %10s %14s %10s\n", "op", "ranks", "off", "on (default)", "op", "on - off",
                "op - off");
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::vector<double>& t = global[i];
      std::printf("  %-8s %5d %10.3f %14.3f %10.3f %14.3f %10.3f\n", cases[i].op.c_str(), world, t[0], t[1], t[2],
                  t[1] - t[0], t[2] - t[0]);
    }
    std::printf("  thread CPU time, the same columns:\n");
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::vector<double>& t = global_cpu[i];
      std::printf("  %-8s %5d %10.3f %14.3f %10.3f %14.3f %10.3f\n", cases[i].op.c_str(), world, t[0], t[1], t[2],
                  t[1] - t[0], t[2] - t[0]);
    }
    std::printf("  (for scale: a barrier over the %d rank(s) takes %.3f us here", world, barrier);
    if (world > 1)
      std::printf("; one check's exchange, timed on the last rank to arrive, %.3f us: the rest of a check's cost\n"
                  "   is waiting for the slowest rank, once per %zu ops in the default mode)\n\n",
                  check_alone, detail::kMaxPendingOps);
    else
      std::printf("; with one rank nothing is compared)\n\n");
  }

  // 2. An op whose signature needs boxing: relu on P(sum).
  use_check_mode(detail::CheckMode::kOn, placement);
  auto p = randn<float>(shape, placement, sbp::partial_sum, 4);
  auto r = resolve(op_schema<detail::UnaryDef<kernel::cpu::UnaryOp::kRelu>>(), {}, placement,
                   std::vector<TensorMeta>{{shape, DType::kFloat32}}, std::vector<NdSbp>{p.nd_sbp()});
  std::string boxing = "none";
  if (r->plans[0]) {
    boxing.clear();
    for (const Step& s : r->plans[0]->steps) boxing += (boxing.empty() ? "" : ", ") + std::string(to_string(s.kind));
  }
  const int64_t boxing_calls = std::max<int64_t>(calls / 10, 1);
  const double on = time_per_call([&] { sink = sink + relu(p).to_local().numel(); }, boxing_calls);
  const double on_cpu = last_cpu;
  use_check_mode(detail::CheckMode::kOff, placement);
  const double off = time_per_call([&] { sink = sink + relu(p).to_local().numel(); }, boxing_calls);
  const double off_cpu = last_cpu;
  use_check_mode(detail::CheckMode::kOn, placement);
  // The bare collective the boxing runs, on the same 16 floats (when they split evenly).
  double bare = -1, bare_cpu = -1;
  if (shape.numel() % world == 0) {
    std::vector<float> send(shape.numel(), 1.0f), recv(shape.numel() / world);
    bare = time_per_call(
        [&] {
          world_communicator().reduce_scatter(send.data(), recv.data(), static_cast<int64_t>(recv.size()),
                                              DType::kFloat32, ReduceOp::kSum);
        },
        boxing_calls);
    bare_cpu = last_cpu;
  }
  if (rank() == 0) {
    std::printf("an op that boxes: relu on P(sum) (4, 4) float32 -> %s, boxing: %s\n",
                r->signature().to_string().c_str(), boxing.c_str());
    std::printf("  %-8s %5s %18s %18s %26s\n", "op", "ranks", "total us (check)", "total us (off)",
                "bare reduce_scatter us");
    std::printf("  %-8s %5d %18.3f %18.3f %26s\n", "relu", world, on, off,
                bare < 0 ? "n/a (16 % ranks != 0)" : std::to_string(bare).c_str());
    std::printf("  %-8s %5s %18.3f %18.3f %26s   (thread CPU time)\n", "", "", on_cpu, off_cpu,
                bare < 0 ? "n/a" : std::to_string(bare_cpu).c_str());
  }

  // 4. A compiled step (docs/compile.md): a chain of 64 ops, add and matmul in turn, on the same
  // tensors, eager and replayed; per op, beside the local kernels' mean (the baseline above).
  constexpr int kChain = 64;
  auto chain = [&](const GlobalTensor<float>& x) {
    GlobalTensor<float> y = x;
    for (int k = 0; k < kChain; ++k) y = k % 2 ? add(y, b) : matmul(y, w);
    return y;
  };
  auto replayed = spsd::compile(chain, {.search_layouts = false});
  const double eager_chain = time_per_call([&] { sink = sink + chain(a).to_local().data()[0]; }, std::max<int64_t>(calls / kChain, 1));
  const double eager_chain_cpu = last_cpu;
  const double replay_chain = time_per_call([&] { sink = sink + replayed(a).to_local().data()[0]; }, std::max<int64_t>(calls / kChain, 1));
  const double replay_chain_cpu = last_cpu;
  if (rank() == 0) {
    const double kernel = (local[0] + local[1]) / 2, kernel_cpu = (local_cpu[0] + local_cpu[1]) / 2;
    std::printf("\ncompiled step: a chain of %d ops (add, matmul in turn), per op; over the kernel = per op - local op\n"
                "  %-10s %5s %12s %16s\n", kChain, "", "ranks", "us per op", "over the kernel");
    std::printf("  %-10s %5d %12.3f %16.3f\n  %-10s %5d %12.3f %16.3f\n", "eager", world, eager_chain / kChain,
                eager_chain / kChain - kernel, "replay", world, replay_chain / kChain, replay_chain / kChain - kernel);
    std::printf("  thread CPU time: eager %.3f (%.3f over), replay %.3f (%.3f over), local op %.3f\n",
                eager_chain_cpu / kChain, eager_chain_cpu / kChain - kernel_cpu, replay_chain_cpu / kChain,
                replay_chain_cpu / kChain - kernel_cpu, kernel_cpu);
  }
  return 0;
}
