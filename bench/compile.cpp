// bench/compile: the joint layout search of spsd::compile (docs/compile.md) on a GPT of many
// blocks: how long the search takes, how many ops it sees, and the bytes per step it predicts
// beside eager's choices. The capture runs one step of a narrow model (the search's work depends
// on the ops, their candidate signatures and the mesh, not on the width), as rank 0 of a dry run
// (spsd::dry_run: the other ranks absent, planning only), or with --simulate 1 on simulated ranks
// (rank 0 searches and the others take its choices, so the time printed is the search's own).
//
//   build/bench/compile [--blocks 48] [--mesh 2x4] [--mode 2d|tensor] [--dim 64] [--context 16] [--simulate 0|1]
//                 [--price-as cuda] [--search-problem FILE] [--exact-seconds S] [--exact-max-columns C]
//
// --search-problem FILE writes the search's problem as a 0-1 integer programme (CPLEX LP form,
// CompileOptions::search_problem_file), for an exact solver to check the plan found, e.g.
// `cbc FILE solve quit` (Debian's coinor-cbc; docs/compile.md, "Checking the search");
// --exact-seconds S gives CBC S seconds to improve the plan and prove it (CompileOptions::exact_seconds);
// --exact-max-columns C, the largest programme it takes whole (over it, by block; CompileOptions::exact_max_columns).
// --exact-chain-states S, the most states a seam between blocks may have for the dynamic programme over the chain
// (CompileOptions::exact_chain_states; 0: the bound by windows).
// --mesh DxT: a (D, T) mesh, data parallel on D and Megatron's tensor parallelism on T (mode 2d);
// mode tensor takes the D*T ranks as one tensor axis.
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <random>
#include <spsd/spsd.hpp>
#include <string>

#include "train/gpt.hpp"
#include "train/text.hpp"

using namespace spsd;

int main(int argc, char** argv) {
  int64_t blocks = 48, d = 2, t = 4, dim = 64, context = 16;
  std::string mode = "2d";
  bool simulated = false;
  std::optional<DeviceType> price_as;  // --price-as cuda: the search on a GPU's cost model
  std::string problem_file;
  double exact_seconds = 0;
  size_t exact_max_columns = CompileOptions{}.exact_max_columns;
  size_t exact_chain_states = CompileOptions{}.exact_chain_states;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--blocks") blocks = std::stoll(v);
    else if (a == "--mesh") d = std::stoll(v.substr(0, v.find('x'))), t = std::stoll(v.substr(v.find('x') + 1));
    else if (a == "--mode") mode = v;
    else if (a == "--dim") dim = std::stoll(v);
    else if (a == "--context") context = std::stoll(v);
    else if (a == "--simulate") simulated = v == "1";
    else if (a == "--price-as") price_as = v == "cuda" ? std::optional(DeviceType::kCUDA) : std::nullopt;
    else if (a == "--search-problem") problem_file = v;
    else if (a == "--exact-seconds") exact_seconds = std::stod(v);
    else if (a == "--exact-max-columns") exact_max_columns = std::stoull(v);
    else if (a == "--exact-chain-states") exact_chain_states = std::stoull(v);
    else throw Error("bench/compile: unknown option " + a);
  }
  const int n = static_cast<int>(d * t);
  const examples::Corpus corpus = examples::generated_corpus(20000, 1);
  const int64_t vocab = 64 * t;  // a multiple of the tensor axis (the token table is split on it)
  std::printf("GPT: %lld blocks, dim %lld, context %lld, mode %s on a %lldx%lld mesh (%d %s ranks)\n",
              static_cast<long long>(blocks), static_cast<long long>(dim), static_cast<long long>(context), mode.c_str(),
              static_cast<long long>(d), static_cast<long long>(t), n, simulated ? "simulated" : "dry-run");
  const auto run = [&](const std::function<void()>& body) { simulated ? simulate(n, body) : dry_run(n, body); };
  run([&] {
    // Rank 0 searches while the others wait for its choices; with many simulated ranks sharing
    // the machine's cores its wall time is many times its CPU time.
    set_timeout(std::chrono::minutes(20));
    const Placement placement = mode == "2d" ? Placement("cpu", examples::first_ranks(n), Shape{d, t})
                                             : Placement("cpu", examples::first_ranks(n));
    const nn::Plan plan = examples::gpt_plan(mode);
    examples::Gpt<float> model({vocab, context, dim, /*heads=*/4, blocks}, {placement, 1});
    nn::parallelize(model, plan);
    Adam<float> adam(model.parameters(), {});
    std::mt19937_64 g(1);
    const examples::TextBatch b = examples::draw_batch(corpus, 2 * d, context, g);
    const NdSbp layout = nn::input_layout(plan);
    const auto x = from_host(b.inputs, placement, layout), y = from_host(b.targets, placement, layout);
    auto step = spsd::compile(
        [&](const GlobalTensor<int64_t>& tokens, const GlobalTensor<int64_t>& targets) {
          adam.zero_grad();
          backward(cross_entropy(model.forward<float>(tokens), targets));
          adam.step();
        },
        {.price_as = price_as, .search_problem_file = problem_file, .exact_seconds = exact_seconds,
         .exact_max_columns = exact_max_columns, .exact_chain_states = exact_chain_states});
    const auto t0 = std::chrono::steady_clock::now();
    step(x, y);  // captures, searches
    const double capture_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rank() == 0) {
      const std::string e = step.explain();
      size_t end = 0;
      for (int line = 0; line < 5 && end != std::string::npos; ++line) end = e.find('\n', end + 1);
      std::printf("%s\ncapture with the search: %.2f s\n", e.substr(e.find('\n') + 1, end - e.find('\n')).c_str(),
                  capture_s);
    }
  });
  return 0;
}
