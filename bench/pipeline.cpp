// bench/pipeline: pipeline schedules (issue 39), one section per flag.
//   pipeline [--simulated]
//   --simulated   the cost model alone (spsd::pipeline::simulate, no ranks run, instant): for
//                 p in {2, 4, 8} pipeline ranks, m in {1, 2, 4, 8, 16, 32} micro-batches and each
//                 schedule (gpipe, 1f1b, interleaved with 2 chunks, zb-h1), the makespan and bubble
//                 fraction with the papers' formula beside it, and rank 0's peak activations; then
//                 the p = 4, m = 8 action lists. Costs: forward 1, backward 2 (zb-h1: backward
//                 input 1, backward weight 1), a rank's whole share per micro-batch.
// With no flag, every section runs (for now the simulated one only).
#include <cstdio>
#include <cstring>
#include <functional>
#include <spsd/spsd.hpp>
#include <string>
#include <vector>

namespace {

namespace pp = spsd::pipeline;

struct Generator {
  const char* name;
  std::function<pp::Schedule(int64_t p, int64_t m)> make;
  // The bubble fraction the papers give with the default Costs, and where it is exact.
  std::function<double(double p, double m)> formula;
  std::function<bool(int64_t p, int64_t m)> exact;
};

constexpr int64_t kChunks = 2;

std::vector<Generator> generators() {
  const auto always = [](int64_t, int64_t) { return true; };
  return {
      {"gpipe", pp::gpipe, [](double p, double m) { return (p - 1) / (m + p - 1); }, always},
      {"1f1b", pp::one_f_one_b, [](double p, double m) { return (p - 1) / (m + p - 1); }, always},
      // Megatron: (p - 1) / v micro-batch times idle per rank; exact for whole groups of p.
      {"interleaved-v2", [](int64_t p, int64_t m) { return pp::interleaved_one_f_one_b(p, m, kChunks); },
       [](double p, double m) { return (p - 1) / (kChunks * m + p - 1); },
       [](int64_t p, int64_t m) { return m % p == 0; }},
      // Zero bubble: (p - 1)(F + BI - BW) = p - 1 idle per rank against 3m of work.
      {"zb-h1", pp::zero_bubble, [](double p, double m) { return (p - 1) / (3 * m + p - 1); },
       [](int64_t p, int64_t m) { return m >= p; }},
  };
}

// The cost model's figures beside the formulas (a formula marked * is a bound, not exact, there).
void simulated() {
  std::printf("## Simulated schedules (forward 1, backward 2 = input 1 + weight 1)\n\n");
  std::printf("| p | m | schedule | makespan | bubble | formula | peak activations, rank 0 |\n");
  std::printf("|--:|--:|---|--:|--:|--:|--:|\n");
  for (int64_t p : {2, 4, 8}) {
    for (int64_t m : {1, 2, 4, 8, 16, 32}) {
      for (const Generator& g : generators()) {
        const pp::Timeline t = pp::simulate(g.make(p, m));
        std::printf("| %lld | %lld | %s | %.1f | %.3f | %.3f%s | %lld |\n", static_cast<long long>(p),
                    static_cast<long long>(m), g.name, t.makespan, t.bubble_fraction,
                    g.formula(static_cast<double>(p), static_cast<double>(m)), g.exact(p, m) ? "" : "*",
                    static_cast<long long>(t.peak_activations[0]));
      }
    }
  }
  std::printf("\n* m %% p != 0 (interleaved) or m < p (zb-h1): the formula is not exact there.\n");
  std::printf("Interleaved peaks count chunk activations, each half a micro-batch's on the rank.\n");
  std::printf("\n## Action lists, p = 4, m = 8 (one line per pipeline rank; F3.1: micro-batch 3, chunk 1)\n");
  for (const Generator& g : generators()) std::printf("\n%s:\n%s", g.name, g.make(4, 8).to_string().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  bool want_simulated = argc == 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--simulated") == 0) {
      want_simulated = true;
    } else {
      std::fprintf(stderr, "bench/pipeline: unknown option '%s' (usage: pipeline [--simulated])\n", argv[i]);
      return 2;
    }
  }
  if (want_simulated) simulated();
  return 0;
}
