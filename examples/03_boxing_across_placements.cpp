// 03_boxing_across_placements: OneFlow's boxing example (seed 000) in C++. A tensor made on
// ranks [0, 1] moves to ranks [2, 3] with to_global; explain_boxing shows the plan, comm_stats
// the bytes each rank really moved, and the data arrives on [2, 3] while [0, 1] keep nothing.
//   tools/mpirun -np 4 build/examples/03_boxing_across_placements
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

// Boxes x into (placement, nd_sbp) and reports, from every rank: the bytes the plan predicted
// for it, the bytes its communicator counted, and what it holds afterwards.
template <class T>
GlobalTensor<T> box_and_report(const GlobalTensor<T>& x, const Placement& placement, const NdSbp& nd_sbp,
                               bool show_values) {
  print_once(explain_boxing(x.shape(), dtype_of<T>, x.placement(), x.nd_sbp(), placement, nd_sbp));
  std::shared_ptr<const Plan> plan =
      plan_boxing(x.shape(), dtype_of<T>, {x.placement(), x.nd_sbp()}, {placement, nd_sbp});
  reset_comm_stats();
  GlobalTensor<T> y = x.to_global(placement, nd_sbp);
  CommStats stats = comm_stats();  // before print_by_rank, which communicates too

  const int me = rank();
  std::string text = "  rank " + std::to_string(me) + ": predicted sent/received " +
                     std::to_string(plan->bytes_sent(me)) + "/" + std::to_string(plan->bytes_received(me)) +
                     " B, counted " + stats.to_string() + "\n";
  if (!y.to_local().defined()) {
    text += "    holds nothing now (not in " + placement.to_string() + ")\n";
  } else {
    text += "    holds " + box_of(x.shape(), placement, nd_sbp, me).to_string() + ", local shape " +
            y.to_local().shape().to_string() + "\n";
    if (show_values) text += format(y.to_local(), "      ");
  }
  print_by_rank(text);
  return y;
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  if (world_size() != 4) {
    print_once("03_boxing_across_placements needs 4 ranks: tools/mpirun -np 4 " + std::string(argv[0]) + "\n");
    return 0;
  }
  Placement p0("cpu", {0, 1}), p1("cpu", {2, 3});
  const int me = rank();

  // Seed 000: Y0 = matmul(A0, B0) with A0 split(0) and B0 broadcast on P0 gives Y0 split(0) on P0.
  // Operators are the next milestone, so a (4, 8) randn split(0) on P0 stands in for Y0.
  Shape shape{4, 8};
  GlobalTensor<float> y0 = randn<float>(shape, p0, sbp::split(0));
  print_once("== Y0: (4, 8), S(0) on ranks [0, 1] ==\n" + layout_diagram(y0));
  print_by_rank(y0.to_local().defined() ? "  rank " + std::to_string(me) + " holds\n" + format(y0.to_local(), "      ")
                                        : "  rank " + std::to_string(me) + " holds nothing\n");

  // Y0 = Y0.to_global(placement=P1, sbp=broadcast): the boxing the seed's picture shows.
  print_once("\n== Y0.to_global(P1, B): S(0) on [0, 1] -> B on [2, 3] ==\n");
  GlobalTensor<float> y0_b = box_and_report(y0, p1, sbp::broadcast, true);

  // randn is layout independent, so each rank of P1 can check what it received against a
  // randn of the same shape made on that rank alone.
  print_once("\n== the same tensor, S(0) on [0, 1] -> S(1) on [2, 3] ==\n");
  GlobalTensor<float> y0_s1 = box_and_report(y0, p1, sbp::split(1), true);
  // full() is collective over [2, 3] only, so ranks 0 and 1 skip the check.
  std::string check = "  rank " + std::to_string(me) + ": not in [2, 3], nothing to check\n";
  if (p1.contains(me)) {
    std::vector<float> reference = randn<float>(shape, Placement("cpu", {me}), sbp::broadcast).to_local().to_vector();
    bool ok = y0_b.full().to_vector() == reference && y0_s1.full().to_vector() == reference;
    check = "  rank " + std::to_string(me) + ": the data on [2, 3] equals randn((4, 8)) made on this rank alone: " +
            (ok ? "yes" : "NO") + "\n";
  }
  print_by_rank(check);

  // Partial values cross placements too: a P(sum) on [0, 1] is reduced there first.
  print_once("\n== P(sum) on [0, 1] -> B on [2, 3]: rank 0 holds 1s, rank 1 holds 2s ==\n");
  // With the global shape given, ranks outside [0, 1] can make the (empty) global tensor too.
  Tensor<float> mine = Tensor<float>::from_vector({2, 3}, std::vector<float>(6, 1.0f + me));
  GlobalTensor<float> partial = to_global(mine, p0, sbp::partial_sum, Shape{2, 3});
  box_and_report(partial, p1, sbp::broadcast, true);

  // Ranks outside both placements take no part: here ranks 2 and 3 return at once.
  print_once("\n== B on [0] -> B on [1]: ranks 2 and 3 are in neither placement ==\n");
  box_and_report(randn<float>({2, 3}, Placement("cpu", {0}), sbp::broadcast), Placement("cpu", {1}), sbp::broadcast,
                 false);

  // A 2-d layout to a 1-d one over the same four ranks: the mesh changes, so does the plan.
  print_once("\n== (S(0), S(1)) on the 2x2 mesh [[0, 1], [2, 3]] -> S(1) on [0, 1, 2, 3] ==\n");
  Placement grid("cpu", {{0, 1}, {2, 3}}), line("cpu", {0, 1, 2, 3});
  GlobalTensor<float> g = randn<float>({4, 6}, grid, {sbp::split(0), sbp::split(1)});
  print_once(layout_diagram(g));
  GlobalTensor<float> l = box_and_report(g, line, sbp::split(1), false);
  print_once(layout_diagram(l));
}
