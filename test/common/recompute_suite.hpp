#pragma once
// Activation checkpointing, memory counters and gradient accumulation on one placement
// (collective over its ranks), shared by test/sim/test_recompute.cpp (meshes {1}, {2}, {4},
// {2, 2}) and test/mpi/test_recompute.cpp (the world's mesh and 2x2 under mpirun -np 4).
//
// The model is a chain of layers h = dropout(relu(h w_i + b_i), p, next_seed()) and the loss
// sum(h * r), in two layouts: data parallel (x split over every mesh axis, parameters
// broadcast) and tensor parallel on the last mesh axis (w split by columns then by rows,
// alternately, as Megatron's MLP). Checkpointed runs are compared with the same program without
// checkpointing on the same placement (which the op and autograd suites compare with the
// single-process result): float, rel 1e-5 + abs 1e-6 (the recomputation repeats the forward's
// ops exactly; only the order in which gradients are summed may differ).
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <spsd/spsd.hpp>

#include "failures.hpp"

namespace spsd_test::recompute {

using spsd::GlobalTensor;
using spsd::NdSbp;
using spsd::Placement;
using spsd::Sbp;
using GT = GlobalTensor<float>;

inline std::vector<float> values(int64_t n, uint64_t seed, double scale) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> d(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(d(gen));
  return v;
}

// s on the last mesh axis, `others` on the rest.
inline NdSbp on_last_axis(const Placement& p, Sbp s, Sbp others) {
  std::vector<Sbp> axes(static_cast<size_t>(p.mesh().ndim()), others);
  axes.back() = s;
  return NdSbp(std::move(axes));
}
inline NdSbp everywhere(const Placement& p, Sbp s) { return on_last_axis(p, s, s); }

enum class Parallel { kData, kTensor };
enum class Checkpointing { kNone, kEachLayer, kNestedPairs };

inline std::string name_of(Parallel par, Checkpointing ck) {
  const std::string a = par == Parallel::kData ? "data parallel" : "tensor parallel";
  const char* b[] = {"plain", "each layer checkpointed", "nested checkpoints"};
  return a + ", " + b[static_cast<int>(ck)];
}

struct Mlp {
  std::vector<GT> w, b;
  double p = 0;  // dropout

  std::vector<GT> params() const {
    std::vector<GT> all;
    for (size_t i = 0; i < w.size(); ++i) {
      all.push_back(w[i]);
      all.push_back(b[i]);
    }
    return all;
  }
  void zero_grad() {
    for (GT& t : w) t.zero_grad();
    for (GT& t : b) t.zero_grad();
  }
  // Layer i as a function of its input (what checkpoint() takes).
  auto layer(size_t i) const {
    return [this, i](const GT& h) { return spsd::dropout(spsd::relu(spsd::matmul(h, w[i]) + b[i]), p, spsd::next_seed()); };
  }
  GT forward(GT h, Checkpointing ck) const {
    for (size_t i = 0; i < w.size(); ++i) {
      if (ck == Checkpointing::kNone) h = layer(i)(h);
      else if (ck == Checkpointing::kEachLayer) h = spsd::checkpoint(layer(i), h);
      else if (i + 1 < w.size()) {  // a checkpoint of two checkpointed layers
        h = spsd::checkpoint([this, i](const GT& a) { return spsd::checkpoint(layer(i + 1), spsd::checkpoint(layer(i), a)); },
                             h);
        ++i;
      } else {
        h = spsd::checkpoint(layer(i), h);
      }
    }
    return h;
  }
};

// layers of (H, H); the same values whatever the placement (seeded).
inline Mlp make_mlp(const Placement& pl, size_t layers, int64_t H, Parallel par, double p, uint64_t seed) {
  using namespace spsd;
  Mlp m;
  m.p = p;
  const double scale = 1.5 / std::sqrt(static_cast<double>(H));
  for (size_t i = 0; i < layers; ++i) {
    // Tensor parallel: column-split then row-split weights; the column layer's bias split too.
    const bool column = i % 2 == 0;
    const NdSbp wl = par == Parallel::kData ? everywhere(pl, sbp::broadcast)
                                            : on_last_axis(pl, sbp::split(column ? 1 : 0), sbp::broadcast);
    const NdSbp bl = par == Parallel::kData || !column ? everywhere(pl, sbp::broadcast)
                                                       : on_last_axis(pl, sbp::split(0), sbp::broadcast);
    m.w.push_back(from_host(Tensor<float>::from_vector(Shape{H, H}, values(H * H, seed + 2 * i, scale)), pl, wl)
                      .requires_grad_());
    m.b.push_back(
        from_host(Tensor<float>::from_vector(Shape{H}, values(H, seed + 2 * i + 1, 0.1)), pl, bl).requires_grad_());
  }
  return m;
}

// Inputs: data parallel splits the rows over every mesh axis; tensor parallel over all but the last.
inline GT make_input(const Placement& pl, int64_t rows, int64_t H, Parallel par, uint64_t seed) {
  using namespace spsd;
  const NdSbp l = par == Parallel::kData ? everywhere(pl, sbp::split(0)) : on_last_axis(pl, sbp::broadcast, sbp::split(0));
  return from_host(Tensor<float>::from_vector(Shape{rows, H}, values(rows * H, seed, 1.0)), pl, l);
}

struct Result {
  std::vector<float> loss, dx;
  std::vector<std::vector<float>> dparams;
};

// Loss and gradients of one forward and backward from seed stream 7.
inline Result run(Mlp& m, GT& x, const GT& r, Checkpointing ck) {
  m.zero_grad();
  x.zero_grad();
  spsd::manual_seed(7);
  const GT loss = spsd::sum(m.forward(x, ck) * r);
  spsd::backward(loss);
  Result out{loss.full().to_vector(), x.grad().full().to_vector(), {}};
  for (const GT& p : m.params()) out.dparams.push_back(p.grad().full().to_vector());
  return out;
}

inline void expect_close(Failures& f, const std::string& what, const std::vector<float>& got,
                         const std::vector<float>& want) {
  if (got.size() != want.size())
    return f.add(what + ": " + std::to_string(got.size()) + " elements, expected " + std::to_string(want.size()));
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= 1e-6 + 1e-5 * std::abs(want[i])))
      return f.add(what + ": element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", expected " +
                   std::to_string(want[i]));
}

inline void expect_same(Failures& f, const std::string& what, const Result& got, const Result& want) {
  expect_close(f, what + ": loss", got.loss, want.loss);
  expect_close(f, what + ": d x", got.dx, want.dx);
  for (size_t i = 0; i < want.dparams.size(); ++i)
    expect_close(f, what + ": d param " + std::to_string(i), got.dparams[i], want.dparams[i]);
}

// Checkpointed chains (each layer; pairs of checkpointed layers inside a checkpoint) give the
// plain chain's loss and gradients, with dropout (p = 0.25) inside every layer.
inline void run_checkpoint_suite(const Placement& pl, Failures& f) {
  const int64_t rows = 4 * pl.mesh().numel(), H = 8;
  for (Parallel par : {Parallel::kData, Parallel::kTensor}) {
    Mlp m = make_mlp(pl, 5, H, par, 0.25, 100);
    GT x = make_input(pl, rows, H, par, 11).requires_grad_();
    const GT r = make_input(pl, rows, H, par, 12);
    const Result plain = run(m, x, r, Checkpointing::kNone);
    for (Checkpointing ck : {Checkpointing::kEachLayer, Checkpointing::kNestedPairs})
      expect_same(f, name_of(par, ck), run(m, x, r, ck), plain);
    // Dropout drew a mask at all (else the seed rewinding would go untested): p = 0 differs.
    Mlp no_dropout = m;
    no_dropout.p = 0;
    if (run(no_dropout, x, r, Checkpointing::kNone).loss == plain.loss)
      f.add(name_of(par, Checkpointing::kNone) + ": dropout changed nothing");
  }
}

// The peak bytes of one forward and backward of 8 (256, 256) layers, data parallel (256 rows
// per rank), measured from memory_stats(the placement's device) on this rank.
inline int64_t peak_bytes_of(const Placement& pl, Checkpointing ck) {
  const int64_t H = 256, rows = 256 * pl.mesh().numel();
  Mlp m = make_mlp(pl, 8, H, Parallel::kData, 0.1, 200);
  GT x = make_input(pl, rows, H, Parallel::kData, 21);
  const GT r = make_input(pl, rows, H, Parallel::kData, 22);
  spsd::reset_peak_memory(pl.device_type());
  {
    spsd::manual_seed(7);
    const GT loss = spsd::sum(m.forward(x, ck) * r);
    spsd::backward(loss);
  }
  return spsd::memory_stats(pl.device_type()).peak_bytes;
}

// Gradient accumulation: k micro-batches, k - 1 of them under NoGradSync, give the gradients of
// one backward of the whole batch with the all-reduces of that one backward (not k times as
// many); k micro-batches all under NoGradSync then SGD's step() give the big batch's step with
// the same all-reduces, in step(). No dropout (the seeds would differ between the two).
inline void run_accumulation_suite(const Placement& pl, Failures& f) {
  using spsd::CollectiveKind;
  const int k = 3;
  const int64_t micro = 2 * pl.mesh().numel(), rows = k * micro, H = 8;
  const std::vector<float> xv = values(rows * H, 31, 1.0), rv = values(rows * H, 32, 1.0);
  auto batch = [&](const std::vector<float>& v, int64_t first, int64_t n) {
    std::vector<float> part(v.begin() + first * H, v.begin() + (first + n) * H);
    return spsd::from_host(spsd::Tensor<float>::from_vector(spsd::Shape{n, H}, part), pl,
                           everywhere(pl, spsd::sbp::split(0)));
  };
  Mlp m = make_mlp(pl, 3, H, Parallel::kData, 0, 300);
  auto backward_of = [&](int64_t first, int64_t n, const Mlp& net) {
    spsd::backward(spsd::sum(net.forward(batch(xv, first, n), Checkpointing::kNone) * batch(rv, first, n)));
  };
  auto all_reduces = [] { return spsd::comm_stats().calls_of(CollectiveKind::kAllReduce); };
  auto grads = [&] {
    std::vector<std::vector<float>> g;
    for (const GT& p : m.params()) g.push_back(p.grad().full().to_vector());
    return g;
  };
  auto expect_grads = [&](const std::string& what, const std::vector<std::vector<float>>& want) {
    const std::vector<std::vector<float>> got = grads();
    for (size_t i = 0; i < want.size(); ++i) expect_close(f, what + ": d param " + std::to_string(i), got[i], want[i]);
  };

  spsd::reset_comm_stats();
  backward_of(0, rows, m);
  const int64_t one_step = all_reduces();
  const std::vector<std::vector<float>> big = grads();
  const size_t n_params = m.params().size();
  if (pl.mesh().numel() > 1 && one_step == 0) f.add("the big batch's backward all-reduced nothing");
  if (pl.mesh().ndim() == 1 && pl.mesh().numel() > 1 && one_step != static_cast<int64_t>(n_params))
    f.add("the big batch: " + std::to_string(one_step) + " all-reduces for " + std::to_string(n_params) + " parameters");

  // Synced every micro-batch: k times the reductions (what NoGradSync saves).
  m.zero_grad();
  spsd::reset_comm_stats();
  for (int i = 0; i < k; ++i) backward_of(i * micro, micro, m);
  if (all_reduces() != k * one_step)
    f.add("synced micro-batches: " + std::to_string(all_reduces()) + " all-reduces, expected " + std::to_string(k * one_step));
  expect_grads("synced micro-batches", big);

  m.zero_grad();
  spsd::reset_comm_stats();
  {
    spsd::NoGradSync no_sync;
    if (spsd::is_grad_sync_enabled()) f.add("is_grad_sync_enabled() inside NoGradSync");
    for (int i = 0; i + 1 < k; ++i) backward_of(i * micro, micro, m);
    if (all_reduces() != 0) f.add("NoGradSync: " + std::to_string(all_reduces()) + " all-reduces inside");
  }
  if (!spsd::is_grad_sync_enabled()) f.add("!is_grad_sync_enabled() after NoGradSync");
  backward_of((k - 1) * micro, micro, m);
  if (all_reduces() != one_step)
    f.add("accumulated: " + std::to_string(all_reduces()) + " all-reduces, expected " + std::to_string(one_step));
  for (const GT& p : m.params())
    if (!(p.grad().nd_sbp() == p.nd_sbp())) f.add("accumulated: a gradient in " + p.grad().nd_sbp().to_string());
  expect_grads("accumulated", big);

  // All micro-batches under NoGradSync: step() reduces once, and steps as the big batch does.
  Mlp ref = make_mlp(pl, 3, H, Parallel::kData, 0, 300);
  {
    spsd::SGD<float> sgd(ref.params(), {.lr = 0.1});
    backward_of(0, rows, ref);
    sgd.step();
  }
  m.zero_grad();
  spsd::SGD<float> sgd(m.params(), {.lr = 0.1});
  {
    spsd::NoGradSync no_sync;
    for (int i = 0; i < k; ++i) backward_of(i * micro, micro, m);
  }
  spsd::reset_comm_stats();
  sgd.step();
  if (all_reduces() != one_step)
    f.add("step() after NoGradSync: " + std::to_string(all_reduces()) + " all-reduces, expected " + std::to_string(one_step));
  // m's parameters started where ref's did (the same seeds).
  const std::vector<GT> got = m.params(), want = ref.params();
  for (size_t i = 0; i < got.size(); ++i)
    expect_close(f, "step after NoGradSync: param " + std::to_string(i), got[i].full().to_vector(),
                 want[i].full().to_vector());
}

// The host counter follows one storage exactly: its aligned size in, the same out.
inline void run_counter_suite(Failures& f) {
  using spsd::DeviceType;
  const spsd::MemoryStats before = spsd::memory_stats(DeviceType::kCPU);
  {
    const auto t = spsd::Tensor<float>::from_vector(spsd::Shape{1000}, std::vector<float>(1000, 1.0f));
    const spsd::MemoryStats held = spsd::memory_stats(DeviceType::kCPU);
    if (held.current_bytes - before.current_bytes != 4032)  // 4000 bytes, 64-aligned
      f.add("a 1000-float storage counted " + std::to_string(held.current_bytes - before.current_bytes) + " bytes");
    if (held.peak_bytes < held.current_bytes) f.add("peak below current");
  }
  const spsd::MemoryStats after = spsd::memory_stats(DeviceType::kCPU);
  if (after.current_bytes != before.current_bytes)
    f.add("freed: current " + std::to_string(after.current_bytes) + ", was " + std::to_string(before.current_bytes));
  spsd::reset_peak_memory(DeviceType::kCPU);
  if (spsd::memory_stats(DeviceType::kCPU).peak_bytes != after.current_bytes) f.add("reset_peak_memory: peak != current");
}

}  // namespace spsd_test::recompute
