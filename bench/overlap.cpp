// bench/overlap: what the eager runtime's communication stream buys (docs/runtime.md).
//
//   OPENBLAS_NUM_THREADS=1 tools/mpirun -np 2|4 build-bench/bench/overlap
//       [--part all|train|handoff] [--layers 2,4] [--hidden 256,1024,2048] [--batch 256]
//       [--steps 15] [--quick] [--check on|off]
//
// 30 s (2 ranks) to 60 s (4 ranks) on a quiet 2-core machine; --quick: 4 steps, a tenth of the
// hand-off repetitions. Results and reading: docs/benchmarks.md, "Overlap of communication with
// compute". Exits 1 when async and sync parameters differ or a to_global gives wrong values.
// Part 1, train: one data-parallel training step (zero_grad, forward, cross-entropy,
// backward, SGD step with momentum, synchronize(); the loss is not read) of the MLP of
// examples/train/mlp.hpp on all ranks: x and labels S(0), every weight and bias B, a fixed
// synthetic batch (examples::generated_dataset). `--layers 2` is examples::Mlp
// (784 -> hidden -> 10); `--layers L` stacks L nn::Linear layers with relu between
// (784 -> hidden -> ... -> hidden -> 10), so that some weight gradients become final while
// backward still has layers to compute. Backward reduces each gradient early (the default).
// With 2 layers, W1 (784 x hidden, 98.6 % of the gradient bytes) is final last and is the first
// gradient step() reads, so only W2's and the biases' reductions can overlap anything.
// Per (layers, hidden), after 3 warm-up steps per mode, `steps` repetitions each time one
// asynchronous and one synchronous step (set_synchronous toggled between them, the order
// alternating), a barrier before each; a step's time is the max over ranks, the table gives
// medians. Per step and rank the program reads comm_stream_stats() and the process CPU time
// (getrusage: the rank's thread and its worker together); the table gives the per-step mean of
// the max over ranks (comm times) or of the sum over ranks (CPU: the whole job's CPU seconds).
//   comm sync   inline_s per step in synchronous mode: the communication time of a step (every
//               instruction runs inline, so this is all of it, consistency checks included);
//   comm async  busy_s (+ the inline_s of what still ran inline: small or idle-and-needed)
//               per step in asynchronous mode;
//   hidden (wall)    (t_sync - t_async) / comm sync: the share of the communication time the
//               step no longer pays, measured in wall time;
//   hidden (stream)  1 - wait_s / busy_s in asynchronous mode (mean over ranks): the share of
//               the worker's busy time during which the rank's thread was not blocked on it.
// The two differ when the worker's communication itself gets slower (it shares cores with the
// kernels): (stream) counts what overlapped, (wall) what was won. Before timing, two copies of
// each model train two steps, one synchronous and one asynchronous, and their parameters are
// compared bit for bit (the program exits 1 on a difference).
//
// Part 2, handoff: the cost of handing a small instruction to the worker, which sets
// kDefaultInlineBytes (runtime/scheduler.hpp). For float tensors of 8 B to 4 MiB, a P(sum) -> B
// to_global on all ranks followed by a read of the result (y.to_local().data()), with
// set_inline_bytes(huge) (inline on the rank's thread) against set_inline_bytes(0) (queued to
// the worker, the rank's thread then waits for it): hand-off = queued - inline. Then the
// benefit side: the same to_global, then a local compute on another buffer (a calibrated
// multiply-add loop over 16 KiB) lasting about the inline time of that size, then the read:
// queued can overlap the two, inline cannot. The consistency check is off in this part
// (--check on keeps the default): with it, every communicating to_global first runs a 32 B x n
// check, queued too under set_inline_bytes(0), which would count two hand-offs. Each
// repetition times a block of back-to-back operations (each complete before the next), a
// barrier before the block; per-op time = block / ops, max over ranks, median over repetitions,
// the variants interleaved in rotating order.
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <spsd/spsd.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "machine.hpp"
#include "train/fashion_mnist.hpp"
#include "train/mlp.hpp"

using namespace spsd;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double reduce_over_ranks(double v, ReduceOp op) {
  double out = 0;
  world_communicator().all_reduce(&v, &out, 1, DType::kFloat64, op);
  return out;
}
double max_over_ranks(double v) { return reduce_over_ranks(v, ReduceOp::kMax); }
double sum_over_ranks(double v) { return reduce_over_ranks(v, ReduceOp::kSum); }
double min_over_ranks(double v) { return reduce_over_ranks(v, ReduceOp::kMin); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// CPU seconds of this process (every thread: the rank's and its communication worker).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

using bench_machine::env_or;
using bench_machine::load_average;

volatile float sink = 0;

// ---------------------------------------------------------------------------------------
// Part 1: training step

// The model: `layers` nn::Linear with relu between, He-initialized as examples::Mlp (which it is
// for 2 layers); data parallel, so every parameter stays B.
struct Net {
  std::function<GlobalTensor<float>(const GlobalTensor<float>&)> forward;
  std::vector<GlobalTensor<float>> params;
};

Net make_net(int64_t layers, int64_t hidden, const Placement& placement, uint64_t seed) {
  auto fc = std::make_shared<nn::ModuleList<float, nn::Linear<float>>>();
  nn::Init init{placement, seed};
  for (int64_t i = 0; i < layers; ++i) {
    const int64_t in = i == 0 ? examples::kPixels : hidden, out = i == layers - 1 ? examples::kClasses : hidden;
    fc->emplace_back(init, in, out, true, std::sqrt(2.0 / static_cast<double>(in)));
  }
  return {[fc](const GlobalTensor<float>& x) {
            GlobalTensor<float> h = x;
            for (size_t i = 0; i < fc->size(); ++i) {
              h = (*fc)[i](h);
              if (i + 1 < fc->size()) h = relu(h);
            }
            return h;
          },
          fc->parameters()};
}

constexpr SgdOptions kSgd{.lr = 0.01, .momentum = 0.9};

void train_step(const Net& net, SGD<float>& sgd, const GlobalTensor<float>& x, const GlobalTensor<int64_t>& y) {
  sgd.zero_grad();
  backward(cross_entropy(net.forward(x), y));
  sgd.step();
  synchronize();
}

// Two copies of the model, two steps each, synchronous and asynchronous: bit-identical.
bool async_matches_sync(int64_t layers, int64_t hidden, const Placement& placement, const GlobalTensor<float>& x,
                        const GlobalTensor<int64_t>& y) {
  std::vector<float> values[2];
  for (int mode = 0; mode < 2; ++mode) {
    set_synchronous(mode == 0);
    Net net = make_net(layers, hidden, placement, 7);
    SGD<float> sgd(net.params, kSgd);
    for (int s = 0; s < 2; ++s) train_step(net, sgd, x, y);
    for (const auto& p : net.params) {
      const std::vector<float> v = p.to_local().to_vector();
      values[mode].insert(values[mode].end(), v.begin(), v.end());
    }
  }
  const bool same = values[0].size() == values[1].size() &&
                    std::memcmp(values[0].data(), values[1].data(), values[0].size() * sizeof(float)) == 0;
  return min_over_ranks(same ? 1.0 : 0.0) == 1.0;
}

struct ModeTotals {
  std::vector<double> times;  // per step, max over ranks
  double inline_s = 0, busy_s = 0, wait_s = 0, cpu_s = 0, queued = 0, inline_run = 0;
};

int run_train(const std::vector<int64_t>& layer_list, const std::vector<int64_t>& hidden_list, int64_t batch,
              int64_t steps) {
  const int n = world_size();
  const examples::Dataset data = examples::generated_dataset(batch, 1);
  std::vector<int64_t> rows(batch);
  std::iota(rows.begin(), rows.end(), 0);
  const Placement placement = examples::mlp_placement("data", n);
  const GlobalTensor<float> x = examples::image_batch<float>(data, rows, placement, sbp::split(0));
  const GlobalTensor<int64_t> y = examples::label_batch(data, rows, placement, sbp::split(0));
  if (rank() == 0)
    std::printf(
        "\n## Training step, data parallel (x S(0), parameters B, SGD momentum 0.9), batch %lld, %d rank(s); "
        "median of %lld steps per mode\n"
        "| layers | hidden | grad MB | sync ms | async ms | speedup | comm sync ms | comm async ms | hidden (wall) | "
        "hidden (stream) | wait async ms | queued/step | job CPU ms sync | job CPU ms async |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        static_cast<long long>(batch), n, static_cast<long long>(steps));
  int failures = 0;
  for (const int64_t layers : layer_list) {
    for (const int64_t hidden : hidden_list) {
      if (!async_matches_sync(layers, hidden, placement, x, y)) {
        if (rank() == 0)
          std::printf("ERROR: layers %lld hidden %lld: parameters after 2 steps differ between async and sync\n",
                      static_cast<long long>(layers), static_cast<long long>(hidden));
        ++failures;
      }
      Net net = make_net(layers, hidden, placement, 1);
      SGD<float> sgd(net.params, kSgd);
      int64_t param_count = 0;
      for (const auto& p : net.params) param_count += p.shape().numel();
      for (int mode = 0; mode < 2; ++mode) {
        set_synchronous(mode == 0);
        for (int w = 0; w < 3; ++w) train_step(net, sgd, x, y);
      }
      ModeTotals totals[2];  // [0] synchronous, [1] asynchronous
      for (int64_t r = 0; r < steps; ++r) {
        for (int j = 0; j < 2; ++j) {
          const int mode = static_cast<int>((r + j) % 2);
          set_synchronous(mode == 0);
          world_communicator().barrier();
          reset_comm_stream_stats();
          const double c0 = cpu_seconds();
          const auto t0 = Clock::now();
          train_step(net, sgd, x, y);
          const double t = seconds_since(t0), cpu = cpu_seconds() - c0;
          const CommStreamStats s = comm_stream_stats();
          ModeTotals& m = totals[mode];
          m.times.push_back(max_over_ranks(t));
          m.inline_s += s.inline_s;
          m.busy_s += s.busy_s;
          m.wait_s += s.wait_s;
          m.cpu_s += cpu;
          m.queued += static_cast<double>(s.queued);
          m.inline_run += static_cast<double>(s.inline_run);
        }
      }
      set_synchronous(false);
      const double k = static_cast<double>(steps);
      const ModeTotals &sy = totals[0], &as = totals[1];
      const double t_sync = median(sy.times), t_async = median(as.times);
      const double comm_sync = max_over_ranks(sy.inline_s / k);
      const double comm_async = max_over_ranks((as.busy_s + as.inline_s) / k);
      const double wait_async = max_over_ranks(as.wait_s / k);
      const double stream_hidden = sum_over_ranks(as.busy_s > 0 ? 1 - as.wait_s / as.busy_s : 0) / n;
      const double queued = sum_over_ranks(as.queued / k) / n;
      const double cpu_sync = sum_over_ranks(sy.cpu_s / k), cpu_async = sum_over_ranks(as.cpu_s / k);
      if (rank() == 0)
        std::printf("| %lld | %lld | %.2f | %.2f | %.2f | %.3f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.1f |\n",
                    static_cast<long long>(layers), static_cast<long long>(hidden), param_count * 4.0 / 1e6,
                    t_sync * 1e3, t_async * 1e3, t_sync / t_async, comm_sync * 1e3, comm_async * 1e3,
                    comm_sync > 0 ? (t_sync - t_async) / comm_sync : 0.0, stream_hidden, wait_async * 1e3, queued,
                    cpu_sync * 1e3, cpu_async * 1e3);
      std::fflush(stdout);
    }
  }
  return failures;
}

// ---------------------------------------------------------------------------------------
// Part 2: hand-off cost and the inline threshold

// The local compute: multiply-add passes over a 16 KiB buffer (L1), on the rank's thread.
struct Compute {
  std::vector<float> buf = std::vector<float>(4096, 1.0f);
  double pass_s = 0;  // one pass, calibrated
  void run(int64_t passes) {
    for (int64_t p = 0; p < passes; ++p) {
      for (float& v : buf) v = v * 0.999f + 0.001f;
      sink = buf[static_cast<size_t>(p) % buf.size()];
    }
  }
  void calibrate() {
    run(1000);
    std::vector<double> t;
    for (int i = 0; i < 31; ++i) {
      const auto t0 = Clock::now();
      run(200);
      t.push_back(seconds_since(t0) / 200);
    }
    pass_s = median(t);
  }
};

int run_handoff(bool keep_check, int64_t reps_divisor) {
  const int n = world_size();
  std::vector<int64_t> ranks(n);
  std::iota(ranks.begin(), ranks.end(), 0);
  const Placement p("cpu", ranks);
  const detail::CheckMode check_before = detail::check_mode();
  if (!keep_check) detail::set_check_mode(detail::CheckMode::kOff);
  const int64_t inline_before = inline_bytes();
  constexpr int64_t kAlwaysInline = int64_t{1} << 50;
  set_synchronous(false);
  Compute compute;
  compute.calibrate();
  const double pass_s = max_over_ranks(compute.pass_s);
  std::vector<int64_t> sizes{8};
  for (int64_t s = 16; s <= (int64_t{4} << 20); s *= 4) sizes.push_back(s);
  if (rank() == 0)
    std::printf(
        "\n## Hand-off: P(sum) -> B to_global of float32 then read, %d rank(s), consistency check %s; compute pass "
        "%.3f us\n"
        "| bytes | inline us | queued us | hand-off us | compute us | inline+compute us | queued+compute us | "
        "gain us | ops x reps |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        n, keep_check ? "on" : "off", pass_s * 1e6);
  int failures = 0;
  for (const int64_t bytes : sizes) {
    const int64_t elems = bytes / 4;
    Tensor<float> local(Shape{elems});
    for (int64_t i = 0; i < elems; ++i) local.data()[i] = static_cast<float>(rank() + 1 + (i % 7));
    const GlobalTensor<float> x(Shape{elems}, p, NdSbp{sbp::partial_sum}, std::move(local));
    const int64_t ops = bytes <= (64 << 10) ? 20 : bytes <= (1 << 20) ? 4 : 1;
    const int64_t reps = std::max<int64_t>(3, (bytes <= (64 << 10) ? 150 : 60) / reps_divisor);
    int64_t passes = 0;
    // variant: 0 inline, 1 queued, 2 inline + compute, 3 queued + compute, 4 compute alone
    auto block = [&](int variant) {
      const bool queued = variant == 1 || variant == 3;
      const bool with_compute = variant >= 2;
      set_inline_bytes(queued ? 0 : kAlwaysInline);
      world_communicator().barrier();
      const auto t0 = Clock::now();
      for (int64_t o = 0; o < ops; ++o) {
        if (variant == 4) {
          compute.run(passes);
          continue;
        }
        GlobalTensor<float> out = x.to_global(p, NdSbp{sbp::broadcast});
        if (with_compute) compute.run(passes);
        sink = out.to_local().data()[0];
      }
      const double t = seconds_since(t0) / static_cast<double>(ops);
      set_inline_bytes(inline_before);
      return max_over_ranks(t);
    };
    // Check the values once per mode: element i is the sum over ranks of (r + 1 + i % 7).
    for (int queued = 0; queued < 2; ++queued) {
      set_inline_bytes(queued ? 0 : kAlwaysInline);
      const std::vector<float> got = x.to_global(p, NdSbp{sbp::broadcast}).to_local().to_vector();
      bool ok = static_cast<int64_t>(got.size()) == elems;
      for (int64_t i = 0; ok && i < elems; ++i)
        ok = got[i] == static_cast<float>(n * (n + 1) / 2 + n * (i % 7));
      if (min_over_ranks(ok ? 1.0 : 0.0) != 1.0) {
        if (rank() == 0) std::printf("ERROR: %lld B: wrong values (%s)\n", static_cast<long long>(bytes), queued ? "queued" : "inline");
        ++failures;
      }
    }
    set_inline_bytes(inline_before);
    for (int w = 0; w < 3; ++w) block(0), block(1);
    std::vector<double> t[5];
    for (int64_t r = 0; r < reps; ++r)
      for (int j = 0; j < 2; ++j) {
        const int v = static_cast<int>((r + j) % 2);
        t[v].push_back(block(v));
      }
    const double t_inline = median(t[0]), t_queued = median(t[1]);
    passes = std::max<int64_t>(1, std::llround(t_inline / pass_s));
    for (int w = 0; w < 2; ++w) block(2), block(3), block(4);
    for (int64_t r = 0; r < reps; ++r)
      for (int j = 0; j < 3; ++j) {
        const int v = 2 + static_cast<int>((r + j) % 3);
        t[v].push_back(block(v));
      }
    const double t_ic = median(t[2]), t_qc = median(t[3]), t_c = median(t[4]);
    if (rank() == 0)
      std::printf("| %lld | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %lld x %lld |\n",
                  static_cast<long long>(bytes), t_inline * 1e6, t_queued * 1e6, (t_queued - t_inline) * 1e6,
                  t_c * 1e6, t_ic * 1e6, t_qc * 1e6, (t_ic - t_qc) * 1e6, static_cast<long long>(ops),
                  static_cast<long long>(reps));
    std::fflush(stdout);
  }
  detail::set_check_mode(check_before);
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  std::string part = "all";
  std::vector<int64_t> layers{2, 4}, hidden{256, 1024, 2048};
  int64_t batch = 256, steps = 15;
  bool quick = false, keep_check = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("overlap: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--part") part = value();
    else if (a == "--layers") layers = parse_list(value());
    else if (a == "--hidden") hidden = parse_list(value());
    else if (a == "--batch") batch = std::stoll(value());
    else if (a == "--steps") steps = std::stoll(value());
    else if (a == "--check") keep_check = value() == "on";
    else if (a == "--quick") quick = true;
    else throw std::runtime_error("overlap: unknown argument " + a);
  }
  if (quick) steps = std::min<int64_t>(steps, 4);
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof(set), &set);
  const double cpus_min = min_over_ranks(CPU_COUNT(&set)), cpus_max = max_over_ranks(CPU_COUNT(&set));
  if (rank() == 0)
    std::printf("overlap: %d rank(s); hardware threads %u; CPUs a rank may run on %.0f..%.0f; load %s; "
                "OPENBLAS_NUM_THREADS=%s OMPI_MCA_mpi_yield_when_idle=%s OMPI_MCA_mpi_oversubscribe=%s; SPSD_SYNC=%s; "
                "inline_bytes %lld\n",
                world_size(), std::thread::hardware_concurrency(), cpus_min, cpus_max, load_average().c_str(),
                env_or("OPENBLAS_NUM_THREADS", "(unset)").c_str(), env_or("OMPI_MCA_mpi_yield_when_idle", "(unset)").c_str(),
                env_or("OMPI_MCA_mpi_oversubscribe", "(unset)").c_str(),
                env_or("SPSD_SYNC", "(unset)").c_str(), static_cast<long long>(inline_bytes()));
  int failures = 0;
  if (part == "all" || part == "train") failures += run_train(layers, hidden, batch, steps);
  if (part == "all" || part == "handoff") failures += run_handoff(keep_check, quick ? 10 : 1);
  if (rank() == 0) std::printf("\nload at the end %s\n", load_average().c_str());
  return failures == 0 ? 0 : 1;
}
