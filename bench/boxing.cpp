// bench/boxing: GlobalTensor::to_global against a hand-written MPI program doing the same data
// movement with the same packing, in the same run.
//
//   tools/mpirun -np 2 build-bench/bench/boxing [--quick] [--zero-fill]
//   tools/mpirun -np 4 build-bench/bench/boxing [--quick] [--zero-fill]
//
// After the float32 table, the same conversions on bfloat16 matrices of the same shapes (1 and
// 16 MiB as float32): the bytes the counters saw next to float32's (half), under
// HalfReduction::kFloat32Wire too, and spsd's time (no baseline).
//
// The tensor is a square float32 matrix of S bytes (512^2, 2048^2, 4096^2 for 1, 16, 64 MiB)
// on placement ranks [0..n) (1-d) or [[0, 1], [2, 3]] (the 2x2 case, 4 ranks only). Per case
// the source GlobalTensor is built once; each spsd call is `x.to_global(placement, nd_sbp)`
// then `spsd::synchronize()`, complete on return like the MPI side (the plan is cached by the
// first, untimed call). Without the synchronize, the eager runtime's queued transfers were
// left running into the next call: the tables of 2026-11-25 timed only their hand-off. The baseline calls the MPI C API on its
// own communicators (a duplicate of MPI_COMM_WORLD; MPI_Comm_split rows and columns for 2x2)
// and packs and unpacks exactly as the spsd primitive does:
//   S(0)->B    MPI_Allgather of the contiguous row blocks, straight into the output
//   S(1)->B    MPI_Allgather of the column blocks into a staging buffer, then one memcpy per
//              row of each block into the output
//   P->B       MPI_Allreduce
//   P->S(0)    MPI_Reduce_scatter_block (the row blocks are already in member order)
//   S(0)->S(1) pack the sub-block for each peer, MPI_Alltoall, one memcpy per peer into place
//   B->S(0)    no communication: memcpy of this rank's row block
//   2x2 (S(0),S(1))->(B,B): the column-block gather of S(1)->B along mesh axis 1 (row
//              communicator), then the in-place row-block gather of S(0)->B along mesh axis 0
// Both sides allocate their outputs (and staging) in every call and free them before the
// call's time ends: spsd through Storage::allocate_uninitialized (aligned_alloc, no memset;
// it zero-filled before commit 7d05195), the baseline through aligned_alloc without a memset,
// as a hand-written program would (--zero-fill makes the baseline memset its buffers too: the
// diagnostic that found spsd's former zero-filling). Timing follows bench/comm: a barrier before each call,
// alternating which side goes first, the max over ranks per call, medians over repetitions.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spsd/spsd.hpp"

namespace {

using spsd::GlobalTensor;
using spsd::NdSbp;
using spsd::Placement;
using spsd::Shape;
namespace sbp = spsd::sbp;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "bench/boxing rank %d: %s\n", static_cast<int>(spsd::rank()), what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this tells the compiler so
}

// A baseline buffer: aligned like spsd's Storage (64 bytes), not zero-filled unless
// --zero-fill asks the baseline to pay for the same memset as spsd (a diagnostic).
bool zero_fill = false;
struct Free {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], Free>;
Buffer allocate(int64_t n) {
  size_t bytes = (static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float) + 63) / 64 * 64;
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (!p) fail("out of memory");
  if (zero_fill) std::memset(p, 0, bytes);
  return Buffer(p);
}

struct Env {
  MPI_Comm world = MPI_COMM_NULL;  // duplicate of MPI_COMM_WORLD
  MPI_Comm row = MPI_COMM_NULL;    // 2x2 mesh: ranks that share mesh coordinate 0 (vary along axis 1)
  MPI_Comm col = MPI_COMM_NULL;    // 2x2 mesh: ranks that share mesh coordinate 1 (vary along axis 0)
  int rank = 0, n = 1;
};

// The matrix and this rank's view of it.
struct Geometry {
  int64_t rows, cols;
  int64_t numel() const { return rows * cols; }
};

// The square matrix of (at least) float_bytes bytes as float32, the side a power of two.
Geometry square_of(int64_t float_bytes) {
  int64_t side = 1;
  while (side * side * 4 < float_bytes) side *= 2;
  return {side, side};
}

// Values are small integers so that sums are exact and both sides must agree bit for bit.
float value_at(int64_t g) { return static_cast<float>(g % 4093); }

// The local component of `box` of the matrix; partial sources add the rank on each rank
// (a bfloat16 element is that float rounded once).
template <class T>
spsd::Tensor<T> fill_box(const Geometry& geo, const spsd::Box& box, float add) {
  spsd::Tensor<T> t(box.shape());
  T* p = t.data();
  const int64_t bc = box.end[1] - box.begin[1];
  for (int64_t i = box.begin[0]; i < box.end[0]; ++i)
    for (int64_t j = box.begin[1]; j < box.end[1]; ++j)
      p[(i - box.begin[0]) * bc + (j - box.begin[1])] = T(value_at(i * geo.cols + j) + add);
  return t;
}

struct Case {
  const char* name;
  bool mesh2x2;
  NdSbp from, to;
  bool partial;  // the source is P(sum): bytes follow the collective's formula, not a box difference
  // The baseline: this rank's result box, given this rank's source component.
  std::function<Buffer(Env&, const Geometry&, const float* in)> mpi;
};

int as_int(int64_t v) { return static_cast<int>(v); }

std::vector<Case> cases() {
  std::vector<Case> list;
  list.push_back({"S(0)->B", false, sbp::split(0), sbp::broadcast, false,
                  [](Env& e, const Geometry& g, const float* in) {
                    Buffer out = allocate(g.numel());
                    int c = as_int(g.numel() / e.n);
                    MPI_Allgather(in, c, MPI_FLOAT, out.get(), c, MPI_FLOAT, e.world);
                    return out;
                  }});
  list.push_back({"S(1)->B", false, sbp::split(1), sbp::broadcast, false,
                  [](Env& e, const Geometry& g, const float* in) {
                    const int64_t bc = g.cols / e.n, block = g.rows * bc;
                    Buffer staging = allocate(g.numel()), out = allocate(g.numel());
                    MPI_Allgather(in, as_int(block), MPI_FLOAT, staging.get(), as_int(block), MPI_FLOAT, e.world);
                    for (int m = 0; m < e.n; ++m)
                      for (int64_t i = 0; i < g.rows; ++i)
                        std::memcpy(out.get() + i * g.cols + m * bc, staging.get() + m * block + i * bc,
                                    bc * sizeof(float));
                    return out;
                  }});
  list.push_back({"P->B", false, sbp::partial_sum, sbp::broadcast, true,
                  [](Env& e, const Geometry& g, const float* in) {
                    Buffer out = allocate(g.numel());
                    MPI_Allreduce(in, out.get(), as_int(g.numel()), MPI_FLOAT, MPI_SUM, e.world);
                    return out;
                  }});
  list.push_back({"P->S(0)", false, sbp::partial_sum, sbp::split(0), true,
                  [](Env& e, const Geometry& g, const float* in) {
                    Buffer out = allocate(g.numel() / e.n);
                    MPI_Reduce_scatter_block(in, out.get(), as_int(g.numel() / e.n), MPI_FLOAT, MPI_SUM, e.world);
                    return out;
                  }});
  list.push_back({"S(0)->S(1)", false, sbp::split(0), sbp::split(1), false,
                  [](Env& e, const Geometry& g, const float* in) {
                    // Mine: rows [r R/n, (r+1) R/n) x all columns. To peer m: those rows x m's columns.
                    const int64_t br = g.rows / e.n, bc = g.cols / e.n, piece = br * bc;
                    Buffer send = allocate(g.numel() / e.n), recv = allocate(g.numel() / e.n);
                    for (int m = 0; m < e.n; ++m)
                      for (int64_t i = 0; i < br; ++i)
                        std::memcpy(send.get() + m * piece + i * bc, in + i * g.cols + m * bc, bc * sizeof(float));
                    MPI_Alltoall(send.get(), as_int(piece), MPI_FLOAT, recv.get(), as_int(piece), MPI_FLOAT, e.world);
                    // From peer m: its rows x my columns, which is one contiguous run of my column block.
                    Buffer out = allocate(g.numel() / e.n);
                    for (int m = 0; m < e.n; ++m)
                      std::memcpy(out.get() + m * piece, recv.get() + m * piece, piece * sizeof(float));
                    return out;
                  }});
  list.push_back({"B->S(0)", false, sbp::broadcast, sbp::split(0), false,
                  [](Env& e, const Geometry& g, const float* in) {
                    const int64_t block = g.numel() / e.n;
                    Buffer out = allocate(block);
                    std::memcpy(out.get(), in + e.rank * block, block * sizeof(float));
                    return out;
                  }});
  list.push_back({"(S(0),S(1))->(B,B)", true, NdSbp{sbp::split(0), sbp::split(1)}, NdSbp{sbp::broadcast, sbp::broadcast},
                  false, [](Env& e, const Geometry& g, const float* in) {
                    // Rank (i, j) holds rows block i x columns block j of a 2x2 grid.
                    const int64_t hr = g.rows / 2, hc = g.cols / 2, quarter = hr * hc;
                    // Mesh axis 1: gather the two column blocks of my row half (staging + unpack).
                    Buffer staging = allocate(2 * quarter), half = allocate(2 * quarter);
                    MPI_Allgather(in, as_int(quarter), MPI_FLOAT, staging.get(), as_int(quarter), MPI_FLOAT, e.row);
                    for (int m = 0; m < 2; ++m)
                      for (int64_t i = 0; i < hr; ++i)
                        std::memcpy(half.get() + i * g.cols + m * hc, staging.get() + m * quarter + i * hc,
                                    hc * sizeof(float));
                    staging.reset();
                    // Mesh axis 0: the two row halves follow each other: gather straight into place.
                    Buffer out = allocate(g.numel());
                    MPI_Allgather(half.get(), as_int(2 * quarter), MPI_FLOAT, out.get(), as_int(2 * quarter), MPI_FLOAT,
                                  e.col);
                    return out;
                  }});
  return list;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Repetitions by size, fewer where the warm-up predicts more than the entry budget.
int max_repetitions(int64_t bytes, bool quick) {
  int reps = bytes <= (int64_t{1} << 20) ? 100 : bytes <= (int64_t{16} << 20) ? 30 : 15;
  return quick ? std::max(3, reps / 10) : reps;
}
double entry_budget_s(bool quick) { return quick ? 0.15 : 2.0; }
int min_repetitions(bool quick) { return quick ? 3 : 5; }

std::string size_label(int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::string plan_label(const spsd::Plan& plan) {
  std::string s;
  for (const spsd::Step& step : plan.steps) {
    if (!s.empty()) s += " + ";
    s += std::string(spsd::to_string(step.kind));
    if (step.mesh_axis >= 0 && step.from.placement.mesh().ndim() > 1) s += "(axis " + std::to_string(step.mesh_axis) + ")";
  }
  return s.empty() ? "(none)" : s;
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// Rank 0's bytes received by one conversion of x (complete: synchronized), by the counters.
template <class T>
int64_t received_by_one_call(const GlobalTensor<T>& x, const Placement& p, const NdSbp& to) {
  spsd::synchronize();
  spsd::reset_comm_stats();
  GlobalTensor<T> y = x.to_global(p, to);
  spsd::synchronize();
  return spsd::comm_stats().bytes_received;
}

// The conversions of the float32 table on a bfloat16 matrix of the same shape: rank 0's bytes
// received (counters) next to float32's, so the ratio is 0.50 for moves and 16-bit reductions;
// the same under HalfReduction::kFloat32Wire (2 bytes per element moved, 4 per element reduced);
// spsd's median time. Results are checked: moves carry the 16-bit values; a P(sum) result is the
// float32 sum of the rank pieces in rank order, rounded once (docs/communicators.md).
void half_table(const Env& env, const Placement& line, const Placement& square, bool quick) {
  using spsd::bfloat16;
  if (env.rank == 0) {
    std::printf("\nbfloat16: the same conversions, the same shapes; bytes rank 0 received by the counters\n\n");
    std::printf("| case | shape | ranks | float32 received | bfloat16 received | bfloat16/float32 | plan | bfloat16, "
                "float32 wire | plan, float32 wire | bfloat16 spsd median (ms) | reps |\n");
    std::printf("|---|---|---:|---:|---:|---:|---|---:|---|---:|---:|\n");
  }
  const int64_t sizes[] = {int64_t{1} << 20, int64_t{16} << 20};
  for (Case& c : cases()) {
    if (c.mesh2x2 && env.n != 4) continue;
    const Placement& p = c.mesh2x2 ? square : line;
    for (int64_t float_bytes : sizes) {
      const Geometry geo = square_of(float_bytes);
      const Shape shape{geo.rows, geo.cols};
      const int me = env.rank;
      const spsd::Box src_box = c.partial ? spsd::full_box(shape) : spsd::box_of(shape, p, c.from, me);
      const float add = c.partial ? static_cast<float>(me) : 0.0f;
      const GlobalTensor<float> x32 = spsd::to_global(fill_box<float>(geo, src_box, add), p, c.from, shape);
      const GlobalTensor<bfloat16> x16 = spsd::to_global(fill_box<bfloat16>(geo, src_box, add), p, c.from, shape);
      auto plan16 = [&] { return plan_label(*spsd::plan_boxing(shape, spsd::DType::kBFloat16, {p, c.from}, {p, c.to})); };
      const int64_t bytes32 = received_by_one_call(x32, p, c.to), bytes16 = received_by_one_call(x16, p, c.to);
      const std::string plan = plan16();
      // A wider wire makes reductions dearer, so the planner may choose another plan.
      spsd::set_half_reduction(spsd::HalfReduction::kFloat32Wire);  // every rank, after a synchronize
      const int64_t bytes16_wide = received_by_one_call(x16, p, c.to);
      const std::string plan_wide = plan16();
      spsd::set_half_reduction(spsd::HalfReduction::kNative);

      const GlobalTensor<bfloat16> y = x16.to_global(p, c.to);
      const spsd::Box dst_box = spsd::box_of(shape, p, c.to, me);
      const spsd::Tensor<bfloat16>& got = y.to_local();
      const int64_t dc = dst_box.end[1] - dst_box.begin[1];
      for (int64_t k = 0; k < got.numel(); ++k) {
        const int64_t g = (dst_box.begin[0] + k / dc) * geo.cols + dst_box.begin[1] + k % dc;
        float sum = static_cast<float>(bfloat16(value_at(g)));
        for (int m = 1; c.partial && m < env.n; ++m) sum += static_cast<float>(bfloat16(value_at(g) + static_cast<float>(m)));
        const bfloat16 want(c.partial ? sum : value_at(g));
        if (got.data()[k].bits != want.bits)
          fail(std::string(c.name) + " in bfloat16: element " + std::to_string(k) + " is " +
               std::to_string(static_cast<float>(got.data()[k])) + ", expected " + std::to_string(static_cast<float>(want)));
      }

      const int reps = min_repetitions(quick) * (quick ? 1 : 4);
      std::vector<double> times(reps);
      for (double& t : times) {
        MPI_Barrier(env.world);
        const double t0 = MPI_Wtime();
        GlobalTensor<bfloat16> out = x16.to_global(p, c.to);
        spsd::synchronize();
        t = MPI_Wtime() - t0;
      }
      MPI_Allreduce(MPI_IN_PLACE, times.data(), reps, MPI_DOUBLE, MPI_MAX, env.world);
      if (me == 0)
        std::printf("| %s | %s | %d | %s | %s | %.2f | %s | %s | %s | %.3f | %d |\n", c.name, shape.to_string().c_str(),
                    env.n, mib(bytes32).c_str(), mib(bytes16).c_str(),
                    bytes32 ? static_cast<double>(bytes16) / static_cast<double>(bytes32) : 0.0, plan.c_str(),
                    mib(bytes16_wide).c_str(), plan_wide.c_str(), median(times) * 1e3, reps);
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  spsd::Runtime runtime(argc, argv);
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--zero-fill") == 0) {
      zero_fill = true;
    } else {
      if (spsd::rank() == 0) std::fprintf(stderr, "usage: %s [--quick] [--zero-fill]\n", argv[0]);
      return 2;
    }
  }

  Env env;
  env.rank = static_cast<int>(spsd::rank());
  env.n = static_cast<int>(spsd::world_size());
  MPI_Comm_dup(MPI_COMM_WORLD, &env.world);
  if (env.n == 4) {
    // [[0, 1], [2, 3]]: rank r sits at mesh coordinates (r / 2, r % 2).
    MPI_Comm_split(env.world, env.rank / 2, env.rank % 2, &env.row);
    MPI_Comm_split(env.world, env.rank % 2, env.rank / 2, &env.col);
  }
  std::vector<int64_t> world_ranks(env.n);
  for (int r = 0; r < env.n; ++r) world_ranks[r] = r;
  const Placement line("cpu", world_ranks);
  const Placement square("cpu", {{0, 1}, {2, 3}});  // used only on 4 ranks

  if (env.rank == 0) {
    std::printf("%s\n", spsd::runtime_info().c_str());
    std::printf("%d ranks, float32 square matrix of the given size; median over repetitions of the max over ranks; "
                "each side allocates its result per call (spsd without zero-filling, the baseline %s); "
                "repetitions by size, fewer where an entry would take over %.2f s%s\n\n",
                env.n, zero_fill ? "zero-filled (--zero-fill)" : "without either", entry_budget_s(quick), quick ? " (--quick)" : "");
    std::printf("| case | size | ranks | spsd median (ms) | MPI median (ms) | ratio MPI/spsd | rank 0 received (spsd "
                "counters) | lower bound | plan | reps |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---|---|---:|\n");
    std::fflush(stdout);
  }

  const int64_t sizes[] = {int64_t{1} << 20, int64_t{16} << 20, int64_t{64} << 20};
  for (Case& c : cases()) {
    if (c.mesh2x2 && env.n != 4) continue;
    const Placement& p = c.mesh2x2 ? square : line;
    for (int64_t bytes : sizes) {
      const Geometry geo = square_of(bytes);
      const Shape shape{geo.rows, geo.cols};
      const int me = env.rank;

      // The source, built once: this rank's box of the matrix (plus the rank on partial layouts).
      spsd::Box src_box = spsd::box_of(shape, p, c.from, me), dst_box = spsd::box_of(shape, p, c.to, me);
      spsd::Tensor<float> local = c.partial ? fill_box<float>(geo, spsd::full_box(shape), static_cast<float>(me))
                                            : fill_box<float>(geo, src_box, 0.0f);
      GlobalTensor<float> x = spsd::to_global(local, p, c.from, shape);
      std::shared_ptr<const spsd::Plan> plan = spsd::plan_boxing(shape, spsd::DType::kFloat32, {p, c.from}, {p, c.to});

      // Correctness, and the bytes this rank received in one spsd call by the communicators' counters.
      spsd::reset_comm_stats();
      GlobalTensor<float> y = x.to_global(p, c.to);
      const int64_t received = spsd::comm_stats().bytes_received;
      Buffer ref = c.mpi(env, geo, local.data());
      const spsd::Tensor<float>& got = y.to_local();
      if (got.numel() != dst_box.numel())
        fail(std::string(c.name) + ": spsd result has " + std::to_string(got.numel()) + " elements, expected " +
             std::to_string(dst_box.numel()));
      const int64_t dc = dst_box.end[1] - dst_box.begin[1];
      for (int64_t k = 0; k < got.numel(); ++k) {
        int64_t g = (dst_box.begin[0] + k / dc) * geo.cols + dst_box.begin[1] + k % dc;
        float want = c.partial ? static_cast<float>(env.n) * value_at(g) + static_cast<float>(env.n * (env.n - 1) / 2)
                               : value_at(g);
        if (got.data()[k] != ref[k] || ref[k] != want)
          fail(std::string(c.name) + " at " + size_label(bytes) + ": element " + std::to_string(k) + " is " +
               std::to_string(got.data()[k]) + " (spsd) and " + std::to_string(ref[k]) + " (MPI), expected " +
               std::to_string(want));
      }
      ref.reset();
      y = GlobalTensor<float>(shape, p, c.to, spsd::Tensor<float>());

      // Complete on return, as the blocking MPI side: without the synchronize() the eager runtime
      // would leave transfers over its inline threshold queued on the communication stream.
      auto run_spsd = [&] {
        GlobalTensor<float> out = x.to_global(p, c.to);
        spsd::synchronize();
      };
      auto run_mpi = [&] { Buffer out = c.mpi(env, geo, local.data()); };

      // Warm-up with the barriers of a timed repetition; it also sizes the repetitions.
      const int warmup = bytes >= (int64_t{16} << 20) ? 1 : 3;
      MPI_Barrier(env.world);
      double w0 = MPI_Wtime();
      for (int w = 0; w < warmup; ++w) {
        MPI_Barrier(env.world);
        run_spsd();
        MPI_Barrier(env.world);
        run_mpi();
      }
      double per_repetition = (MPI_Wtime() - w0) / warmup;
      MPI_Allreduce(MPI_IN_PLACE, &per_repetition, 1, MPI_DOUBLE, MPI_MAX, env.world);
      const int reps = std::clamp(static_cast<int>(entry_budget_s(quick) / per_repetition), min_repetitions(quick),
                                  max_repetitions(bytes, quick));
      std::vector<double> t_spsd(reps), t_mpi(reps);
      for (int i = 0; i < reps; ++i) {
        for (int k = 0; k < 2; ++k) {
          bool use_spsd = (i + k) % 2 == 0;  // alternate which side goes first
          MPI_Barrier(env.world);
          double t0 = MPI_Wtime();
          if (use_spsd) run_spsd();
          else run_mpi();
          (use_spsd ? t_spsd : t_mpi)[i] = MPI_Wtime() - t0;
        }
      }
      MPI_Allreduce(MPI_IN_PLACE, t_spsd.data(), reps, MPI_DOUBLE, MPI_MAX, env.world);
      MPI_Allreduce(MPI_IN_PLACE, t_mpi.data(), reps, MPI_DOUBLE, MPI_MAX, env.world);

      if (me == 0) {
        double ms_spsd = median(t_spsd) * 1e3, ms_mpi = median(t_mpi) * 1e3;
        std::string bound;
        if (c.partial) {
          bound = "collective formula; plan predicts " + mib(plan->bytes_received(0));
        } else {
          int64_t lower = (dst_box.numel() - spsd::overlap(src_box, dst_box)) * static_cast<int64_t>(sizeof(float));
          bound = mib(lower);
        }
        std::printf("| %s | %s | %d | %.3f | %.3f | %.2f | %s | %s | %s | %d |\n", c.name, size_label(bytes).c_str(),
                    env.n, ms_spsd, ms_mpi, ms_mpi / ms_spsd, mib(received).c_str(), bound.c_str(),
                    plan_label(*plan).c_str(), reps);
        std::fflush(stdout);
      }
    }
  }

  half_table(env, line, square, quick);

  if (env.row != MPI_COMM_NULL) MPI_Comm_free(&env.row);
  if (env.col != MPI_COMM_NULL) MPI_Comm_free(&env.col);
  MPI_Comm_free(&env.world);
  return 0;
}
