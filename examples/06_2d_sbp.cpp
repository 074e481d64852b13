// 06_2d_sbp: OneFlow's "2D SBP" article (seed 003) in C++. On a 2x2 mesh each mesh axis takes
// a signature from matmul's 1-d table on its own:
//   axis 0: B x S(1) -> S(1)      axis 1: S(0) x B -> S(0)
// so x (B, S(0)) x w (S(1), B) -> y (S(1), S(0)), with no communication. The seed's text writes
// w as (S(0), B); on mesh axis 0 that would be B x S(0), which is no matmul signature, so the
// resolver must box an input: the second part shows which signature it picks and what it moves.
//   tools/mpirun -np 4 build/examples/06_2d_sbp      (needs exactly 4 ranks)
#include <cmath>
#include <cstdio>
#include <iostream>
#include <spsd/spsd.hpp>

#include "print_by_rank.hpp"
#include "reference.hpp"

using namespace spsd;
using examples::format;
using examples::print_by_rank;
using examples::reference_matmul;
using examples::print_once;

namespace {

// y = matmul(x, w), with this rank's counted traffic, checked against one process (ok &= the check).
GlobalTensor<float> run_and_check(const GlobalTensor<float>& x, const GlobalTensor<float>& w, bool& ok) {
  reset_comm_stats();
  GlobalTensor<float> y = matmul(x, w);
  const CommStats stats = comm_stats();
  const Shape &xs = x.shape(), &ws = w.shape();
  const std::vector<float> expect = reference_matmul(x.full().to_vector(), w.full().to_vector(), xs[0], xs[1], ws[1]);
  const std::vector<float> got = y.full().to_vector();
  double err = 0;
  for (size_t i = 0; i < expect.size(); ++i) err = std::max(err, std::abs(static_cast<double>(got[i]) - expect[i]));
  char line[256];
  std::snprintf(line, sizeof line, "  rank %d: y box %s, local %s; matmul %s; max abs error vs one process %.3g %s\n",
                rank(), box_of(y.shape(), y.placement(), y.nd_sbp(), rank()).to_string().c_str(),
                y.to_local().shape().to_string().c_str(), stats.to_string().c_str(), err, err <= 1e-5 ? "(ok)" : "(WRONG)");
  print_by_rank(line);
  ok &= err <= 1e-5;
  return y;
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  if (world_size() != 4) {
    print_once("06_2d_sbp needs 4 ranks (a 2x2 mesh): tools/mpirun -np 4 " + std::string(argv[0]) + "\n");
    return 0;
  }
  const Placement mesh("cpu", {{0, 1}, {2, 3}});
  const int64_t m = 4, k = 6, n = 8;
  bool ok = true;

  // 1. The 2-d signature the seed means: 0 bytes.
  print_once("== x (B, S(0)) x w (S(1), B) on " + mesh.to_string() + " ==\n");
  auto x = randn<float>({m, k}, mesh, {sbp::broadcast, sbp::split(0)}, 1);
  auto w = randn<float>({k, n}, mesh, {sbp::split(1), sbp::broadcast}, 2);
  GlobalTensor<float> y = run_and_check(x, w, ok);
  print_once("\nx:\n" + layout_diagram(x) + "\nw:\n" + layout_diagram(w) + "\ny = matmul(x, w):\n" + layout_diagram(y) +
             "\n");
  print_by_rank("  rank " + std::to_string(rank()) + " holds y" + box_of(y.shape(), mesh, y.nd_sbp(), rank()).to_string() +
                "\n" + format(y.to_local(), "      "));

  // 2. The seed's text: w as (S(0), B). The resolver's view of it, then the real run.
  print_once("\n== the seed's text: x (B, S(0)) x w (S(0), B) ==\n");
  const std::vector<TensorMeta> metas = {{x.shape(), DType::kFloat32}, {w.shape(), DType::kFloat32}};
  const std::vector<NdSbp> layouts = {x.nd_sbp(), NdSbp{sbp::split(0), sbp::broadcast}};
  std::shared_ptr<const Resolution> r = resolve(op_schema<detail::MatmulDef>(), {}, mesh, metas, layouts);
  char summary[160];
  std::snprintf(summary, sizeof summary, "-> signature %s, %lld B on the busiest rank per step, cost %.1f us\n",
                r->signature().to_string().c_str(), static_cast<long long>(r->bytes()), r->cost_us());
  print_once(r->to_string() + "\n" + summary + "\n");
  GlobalTensor<float> w_seed = w.to_global(layouts[1]);  // the same values in the seed's layout
  GlobalTensor<float> y_seed = run_and_check(x, w_seed, ok);
  // The resolver kept w as it came and sliced x locally (B -> S(1) on mesh axis 0), so y is
  // partial along mesh axis 0: the sum is left to whoever needs y (full() above reduced it).
  // Reaching the seed's (S(1), S(0)) from there is a reduce-scatter along mesh axis 0.
  reset_comm_stats();
  GlobalTensor<float> y_as_seed = y_seed.to_global(NdSbp{sbp::split(1), sbp::split(0)});
  const CommStats stats = comm_stats();
  print_by_rank("  rank " + std::to_string(rank()) + ": y " + y_seed.nd_sbp().to_string() + " -> " +
                y_as_seed.nd_sbp().to_string() + ": " + stats.to_string() + "\n");
  return ok ? 0 : 1;
}
