// 04_matmul_data_parallel: the end of OneFlow's "Global Tensor" article (seed 002) in C++: a
// global matmul of x, split(0) over every rank, by w, broadcast, gives y split(0): each rank
// multiplies its own rows by the whole w, with no communication at all (data parallelism).
//   tools/mpirun -np 4 build/examples/04_matmul_data_parallel     (any number of ranks)
#include <algorithm>
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

template <class T>
std::string describe(const std::string& name, const GlobalTensor<T>& t) {
  return name + ": shape " + t.shape().to_string() + ", sbp " + t.nd_sbp().to_string() + "\n";
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  const int world = world_size(), me = rank();
  std::vector<int64_t> all_ranks(world);
  for (int r = 0; r < world; ++r) all_ranks[r] = r;
  Placement placement("cpu", all_ranks);

  // The seed's x is (4, 5) on 2 ranks: two rows per rank, here on any number of ranks.
  const int64_t m = 2 * world, k = 5, n = 8;
  auto x = randn<float>({m, k}, placement, sbp::split(0), /*seed=*/1);
  auto w = randn<float>({k, n}, placement, sbp::broadcast, /*seed=*/2);

  reset_comm_stats();
  GlobalTensor<float> y = matmul(x, w);
  const CommStats stats = comm_stats();  // before anything else communicates

  print_once("== y = matmul(x, w) on " + placement.to_string() + " ==\n" + describe("x", x) + describe("w", w) +
             describe("y", y) + "\n");
  print_by_rank("  rank " + std::to_string(me) + ": x box " + box_of(x.shape(), placement, x.nd_sbp(), me).to_string() +
                " local " + x.to_local().shape().to_string() + "  ->  y box " +
                box_of(y.shape(), placement, y.nd_sbp(), me).to_string() + " local " +
                y.to_local().shape().to_string() + "; matmul communicated: " + stats.to_string() + "\n" +
                format(y.to_local(), "      "));

  print_once("\n" + layout_diagram(y) + "\n");

  // full() gathers (collective over the placement); compare with one process doing it all.
  const std::vector<float> xs = x.full().to_vector(), ws = w.full().to_vector(), ys = y.full().to_vector();
  const std::vector<float> expect = reference_matmul(xs, ws, m, k, n);
  double err = 0;
  for (size_t i = 0; i < expect.size(); ++i) err = std::max(err, std::abs(static_cast<double>(ys[i]) - expect[i]));
  char line[160];
  std::snprintf(line, sizeof line, "  rank %d: y.full() vs a single-process matmul of x.full() and w.full(): max abs error %.3g %s\n",
                me, err, err <= 1e-5 ? "(ok)" : "(WRONG)");
  print_by_rank(line);
  const bool ok = stats.bytes_sent == 0 && stats.bytes_received == 0 && err <= 1e-5;
  print_once(ok ? "\nS(0) x B -> S(0): no bytes moved, and y matches the single-process result.\n" : "\nUNEXPECTED: see above.\n");
  return ok ? 0 : 1;
}
