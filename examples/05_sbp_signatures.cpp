// 05_sbp_signatures: OneFlow's "SBP Signature" section (seeds 000/001) in C++. matmul's 1-d
// signature table; for every combination of input layouts of a and b on 2 ranks, what the
// resolver picks and what it costs (the seed's legal combinations need no boxing, its illegal
// ones get their inputs boxed into the cheapest legal signature); then the seed's two-stage
// pipeline across placements [0, 1] and [2, 3], with the dispatch log on.
//   tools/mpirun -np 4 build/examples/05_sbp_signatures      (2 ranks: everything but the pipeline)
// The program sets SPSD_LOG=dispatch for itself unless SPSD_LOG is already set; each global op
// then prints its resolution (and each boxing its plan) from the first rank of its placement,
// as `SPSD_LOG=dispatch tools/mpirun -np 4 <program>` does for any program. Only the pipeline
// runs ops; the table before it asks the resolver directly.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <spsd/spsd.hpp>
#include <unistd.h>

#include "print_by_rank.hpp"
#include "reference.hpp"

using namespace spsd;
using examples::print_by_rank;
using examples::reference_matmul;
using examples::print_once;

namespace {

// The whole of randn(shape, seed), made on this rank alone (randn's values do not depend on the layout).
std::vector<float> host_randn(const Shape& shape, uint64_t seed) {
  return randn<float>(shape, Placement("cpu", {rank()}), sbp::broadcast, seed).to_local().to_vector();
}

std::string pad(std::string s, size_t width) { return s.size() < width ? s + std::string(width - s.size(), ' ') : s; }

// "b: S(0) -> B all_gather" for every input the resolution boxes.
std::string boxing_text(const Resolution& r) {
  std::string s;
  const char* names[] = {"a", "b"};
  for (size_t i = 0; i < r.plans.size(); ++i) {
    if (!r.plans[i]) continue;
    s += std::string(s.empty() ? "" : "; ") + names[i] + ":";
    for (const Step& step : r.plans[i]->steps)
      s += " " + step.from.nd_sbp.to_string() + "->" + step.to.nd_sbp.to_string() + " " +
           std::string(to_string(step.kind));
  }
  return s;
}

// What this rank writes to stdout while fn runs (the library's log lines included). mpirun
// forwards every rank's output on its own and may cut lines of one rank into another's, so
// the example collects each rank's lines and prints them in rank order with print_by_rank.
std::string capture_stdout(const std::function<void()>& fn) {
  std::fflush(stdout);
  FILE* file = std::tmpfile();
  const int saved = dup(STDOUT_FILENO);
  dup2(fileno(file), STDOUT_FILENO);
  auto restore = [&] {
    std::fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
  };
  try {
    fn();
  } catch (...) {
    restore();
    std::fclose(file);
    throw;
  }
  restore();
  std::string text;
  std::rewind(file);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, file)) > 0;) text.append(buf, n);
  std::fclose(file);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("SPSD_LOG", "dispatch", /*overwrite=*/0);  // before the first op reads it
  Runtime runtime(argc, argv);
  const int world = world_size(), me = rank();
  if (world < 2) {
    print_once("05_sbp_signatures needs 2 ranks (4 for the pipeline): tools/mpirun -np 4 " + std::string(argv[0]) + "\n");
    return 0;
  }

  // 1. The 1-d table the op declares, for A (m, k) = (4, 5) and B (k, n) = (5, 8).
  const Shape a_shape{4, 5}, b_shape{5, 8};
  const std::vector<TensorMeta> metas = {{a_shape, DType::kFloat32}, {b_shape, DType::kFloat32}};
  std::string text = "== matmul's 1-d SBP signatures (a, b) -> y, for a " + a_shape.to_string() + " and b " +
                     b_shape.to_string() + " ==\n";
  for (const Signature& s : detail::MatmulDef::signatures(metas, {})) text += "  " + s.to_string() + "\n";
  print_once(text + "\n");

  // 2. Every combination of input layouts on 2 ranks: what the resolver does with it. Pure
  //    computation: every rank can ask, none communicates.
  const Placement pair("cpu", {0, 1});
  const std::vector<Sbp> kinds = {sbp::split(0), sbp::split(1), sbp::broadcast, sbp::partial_sum};
  text = "== the resolver on " + pair.to_string() + ": each (a, b) layout pair ==\n" + pad("  a x b", 20) +
         pad("chosen signature", 34) + pad("cost", 11) + pad("bytes", 8) + "verdict\n";
  int legal = 0;
  for (const Sbp& sa : kinds)
    for (const Sbp& sb : kinds) {
      const std::vector<NdSbp> layouts = {sa, sb};
      std::shared_ptr<const Resolution> r = resolve(op_schema<detail::MatmulDef>(), {}, pair, metas, layouts);
      const bool as_is = r->signature().inputs == layouts;  // zero boxing: the seed's "legal"
      legal += as_is;
      char cost[32];
      std::snprintf(cost, sizeof cost, "%.1f us", r->cost_us());
      text += pad("  " + sa.to_string() + " x " + sb.to_string(), 20) + pad(r->signature().to_string(), 34) +
              pad(cost, 11) + pad(std::to_string(r->bytes()), 8) +
              (as_is            ? "legal as-is"
               : r->bytes() == 0 ? "boxed locally, no traffic: " + boxing_text(*r)
                                 : "needs boxing: " + boxing_text(*r)) +
              "\n";
    }
  text += "  " + std::to_string(legal) + " of 16 combinations are legal as they come; the others are boxed first.\n";
  print_once(text + "\n");

  // The seed's illegal example, S(0) x S(0), with every candidate the resolver priced.
  const std::vector<NdSbp> s0s0 = {sbp::split(0), sbp::split(0)};
  print_once("== Resolution::to_string() for a S(0) x b S(0) ==\n" +
             resolve(op_schema<detail::MatmulDef>(), {}, pair, metas, s0s0)->to_string() + "\n\n");

  // 3. Seed 000's pipeline: Y0 = matmul(A0, B0) on [0, 1]; Y0 moves to [2, 3] as broadcast;
  //    Y2 = matmul(Y0, B1) there. The log lines come from rank 0 (the first matmul, the move)
  //    and rank 2 (the second matmul, the gather in full()).
  if (world < 4) {
    print_once("(the pipeline across placements [0, 1] and [2, 3] needs 4 ranks)\n");
    return 0;
  }
  const Placement p0("cpu", {0, 1}), p1("cpu", {2, 3});
  print_once("== seed 000's pipeline: A0 (4, 5) S(0) x B0 (5, 8) B on [0, 1]; Y0 -> B on [2, 3]; x B1 (8, 6) S(1) ==\n"
             "(with SPSD_LOG=dispatch each op's resolution and each boxing is logged by the first rank of its\n"
             " placement as [spsd dispatch|boxing rank R]; collected here per rank)\n");
  bool ok = true;
  const std::string log = capture_stdout([&] {
    auto A0 = randn<float>({4, 5}, p0, sbp::split(0), 10);
    auto B0 = randn<float>({5, 8}, p0, sbp::broadcast, 11);
    GlobalTensor<float> Y0 = matmul(A0, B0);
    GlobalTensor<float> Y0_moved = Y0.to_global(p1, sbp::broadcast);  // boxing between the stages
    auto B1 = randn<float>({8, 6}, p1, sbp::split(1), 12);
    GlobalTensor<float> Y2 = matmul(Y0_moved, B1);

    // Each rank of [2, 3] checks the result against one process doing the whole computation.
    if (!p1.contains(me)) return;
    const std::vector<float> y0 = reference_matmul(host_randn({4, 5}, 10), host_randn({5, 8}, 11), 4, 5, 8);
    const std::vector<float> expect = reference_matmul(y0, host_randn({8, 6}, 12), 4, 8, 6);
    const std::vector<float> got = Y2.full().to_vector();
    double err = 0;
    for (size_t i = 0; i < expect.size(); ++i) err = std::max(err, std::abs(static_cast<double>(got[i]) - expect[i]));
    char line[200];
    std::snprintf(line, sizeof line, "  rank %d: Y0 %s on [0, 1], Y2 %s %s on [2, 3], local %s; max abs error vs one process %.3g %s\n",
                  me, Y0.nd_sbp().to_string().c_str(), Y2.shape().to_string().c_str(),
                  Y2.nd_sbp().to_string().c_str(), Y2.to_local().shape().to_string().c_str(), err,
                  err <= 1e-4 ? "(ok)" : "(WRONG)");
    std::printf("%s", line);
    ok = err <= 1e-4;
  });
  print_by_rank(log.empty() ? "  rank " + std::to_string(me) + ": nothing logged, not in [2, 3]\n" : log);
  return ok ? 0 : 1;
}
