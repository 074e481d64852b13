// 02_global_tensor: OneFlow's "Global Tensor" walk-through (seed 002) in C++: create a global
// tensor, look at each rank's local component, turn local tensors into a global one, change
// its SBP with to_global, and read the whole tensor back with full().
//   tools/mpirun -np 4 build/examples/02_global_tensor
#include <cstdio>
#include <cstring>
#include <iostream>
#include <spsd/spsd.hpp>

#include "print_by_rank.hpp"

using namespace spsd;
using examples::print_by_rank;
using examples::print_once;
using examples::format;

namespace {

template <class T>
std::string describe(const std::string& name, const GlobalTensor<T>& x) {
  return name + ": shape " + x.shape().to_string() + ", " + x.placement().to_string() + ", sbp " +
         x.nd_sbp().to_string() + "\n";
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  const int world = world_size();
  std::vector<int64_t> all_ranks(world);
  for (int r = 0; r < world; ++r) all_ranks[r] = r;
  Placement placement("cpu", all_ranks);
  const std::string me = "  rank " + std::to_string(rank());

  // 1. A global tensor made by a factory: randn with split(0). Each rank computes only its own
  //    (2, 5) piece; the seed's (4, 5) on 2 ranks is (8, 5) on 4.
  print_once("== randn: a global tensor, split(0) over every rank ==\n");
  auto x = randn<float>({2 * world, 5}, placement, sbp::split(0));
  print_once(describe("x", x));
  print_by_rank(me + ": x.to_local() has shape " + x.to_local().shape().to_string() + "\n" + format(x.to_local()));

  // The values depend only on (seed, shape, dtype): the same tensor made on rank 0 alone is
  // bit-identical to the gathered one (DESIGN.md 3.4).
  auto x_whole = x.full();
  auto single = randn<float>({2 * world, 5}, Placement("cpu", {0}), sbp::broadcast);
  if (rank() == 0)
    std::cout << "x.full() on rank 0 equals randn of the same shape on placement [0] alone: "
              << (x_whole.to_vector() == single.to_local().to_vector() ? "yes" : "NO") << "\n\n";

  // 2. Local -> global: every rank has a local (2, 5) tensor; to_global with split(0)
  //    concatenates them along axis 0 and infers the global shape (seed: (4, 5) on 2 ranks).
  print_once("== to_global(local, placement, split(0)): the global shape is inferred ==\n");
  std::vector<float> values(10);
  for (int i = 0; i < 10; ++i) values[i] = philox::normal<float>(100 + rank(), i);  // differs per rank
  Tensor<float> local = Tensor<float>::from_vector({2, 5}, values);
  GlobalTensor<float> x_global = to_global(local, placement, sbp::split(0));
  print_once(describe("x_global", x_global));
  print_by_rank(me + ": local shape " + local.shape().to_string() + " -> x_global.to_local() " +
                x_global.to_local().shape().to_string() + "\n" + format(x_global.to_local()));

  // 3. Global -> global: split(0) to broadcast is an all-gather, written as a type conversion.
  print_once("\n== x_global.to_global(broadcast): every local component becomes the whole tensor ==\n");
  reset_comm_stats();
  GlobalTensor<float> x_global_b = x_global.to_global(sbp::broadcast);
  CommStats stats = comm_stats();
  print_once(describe("x_global_b", x_global_b));
  print_by_rank(me + ": x_global_b.to_local() has shape " + x_global_b.to_local().shape().to_string() +
                "; this rank " + stats.to_string() + "\n" + (rank() == 0 ? format(x_global_b.to_local()) : ""));

  // 4. full(): the whole logical tensor on every rank (OneFlow's numpy()), from any layout.
  print_once("\n== full() on every rank ==\n");
  Tensor<float> whole = x_global.full();
  print_by_rank(me + ": x_global.full() has shape " + whole.shape().to_string() + ", equal to x_global_b.to_local(): " +
                (whole.to_vector() == x_global_b.to_local().to_vector() ? "yes" : "NO") + "\n");

  // 5. Which rank holds which box.
  print_once("\n== layout_diagram ==\n" + layout_diagram(x_global) + "\n" + layout_diagram(x_global_b));
  if (world == 4) {
    Placement grid("cpu", {{0, 1}, {2, 3}});
    auto y = x_global.to_global(grid, {sbp::split(0), sbp::split(1)});
    print_once("\n" + layout_diagram(y));
    print_by_rank(me + ": y.to_local() has shape " + y.to_local().shape().to_string() + "\n");
  }
}
