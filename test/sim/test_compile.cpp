// Compiled steps under simulated ranks (compile/compile.hpp, test/common/compile_checks.hpp):
// replay equals eager bit for bit in every mode, float32 and bfloat16; what cannot be replayed is
// an Error at capture on every rank; another key captures again.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "compile_checks.hpp"
#include "failures.hpp"
#include "sim_helpers.hpp"

using namespace spsd;

namespace {

std::vector<int64_t> first(int n) {
  std::vector<int64_t> r(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) r[static_cast<size_t>(i)] = i;
  return r;
}

template <class C>
void check_replay_equals_eager(const std::string& mode, int n) {
  std::vector<spsd_test::CompiledRun> eager(n), replayed(n);
  simulate(n, [&] {
    eager[rank()] = spsd_test::gpt_compiled_run<C>(mode, first(n), 4, false);
    replayed[rank()] = spsd_test::gpt_compiled_run<C>(mode, first(n), 4, true, {.search_layouts = false});
  });
  for (int r = 0; r < n; ++r) {
    INFO(mode << " on " << n << " ranks, rank " << r << "\n" << replayed[r].explanation);
    REQUIRE(eager[r].losses.size() == 4);
    CHECK(replayed[r].losses == eager[r].losses);          // bitwise
    CHECK(replayed[r].parameters == eager[r].parameters);  // bitwise, after 3 replays
    CHECK(replayed[r].captures == 1);
  }
}

}  // namespace

TEST_CASE("compile: a replayed GPT step equals eager bit for bit, every mode, float32", "[compile]") {
  check_replay_equals_eager<float>("data", 1);
  check_replay_equals_eager<float>("data", 2);
  check_replay_equals_eager<float>("tensor", 4);
  check_replay_equals_eager<float>("2d", 4);
  check_replay_equals_eager<float>("sequence", 2);
}

TEST_CASE("compile: a replayed GPT step equals eager bit for bit in bfloat16 on float32 masters", "[compile]") {
  check_replay_equals_eager<bfloat16>("tensor", 4);
  check_replay_equals_eager<bfloat16>("2d", 4);
}

TEST_CASE("compile: what a replay cannot repeat is an Error at capture on every rank", "[compile]") {
  struct Case {
    std::string what, expected;
  };
  const std::vector<Case> cases = {{"item", "item: cannot run inside a compiled step"},
                                   {"full", "GlobalTensor::full: cannot run inside a compiled step"},
                                   {"dropout", "dropout: cannot run inside a compiled step"},
                                   {"copy_", "copy_: cannot run inside a compiled step"},
                                   {"set_lr", "Adam.set_lr: cannot run inside a compiled step"},
                                   {"accumulate", "backward: cannot run inside a compiled step"}};
  for (const Case& c : cases) {
    const std::vector<std::string> errors = spsd_test::errors_by_rank(2, [&] {
      const Placement p("cpu", first(2));
      GlobalTensor<float> w = randn<float>(Shape{4, 4}, p, NdSbp(std::vector<Sbp>{sbp::broadcast}), 7);
      w.requires_grad_();
      Adam<float> opt(std::vector<GlobalTensor<float>>{w}, {});
      if (c.what == "accumulate") {  // a gradient from before the step, which backward would add to
        backward(sum(w * w));
      }
      auto step = compile([&](const GlobalTensor<float>& x) {
        GlobalTensor<float> y = matmul(x, w);
        if (c.what == "item") (void)sum(y).item();
        if (c.what == "full") (void)y.full();
        if (c.what == "dropout") y = dropout(y, 0.5, 3);
        if (c.what == "copy_") w.copy_(y);
        if (c.what == "set_lr") opt.set_lr(0.5);
        backward(sum(y));
        return y;
      });
      step(randn<float>(Shape{4, 4}, p, NdSbp(std::vector<Sbp>{sbp::split(0)}), 8));
    });
    for (int r = 0; r < 2; ++r) {
      INFO(c.what << ", rank " << r << ": " << errors[r]);
      CHECK(errors[r].find(c.expected) != std::string::npos);
    }
  }
}

TEST_CASE("compile: a gradient not cleared between calls is an Error on every rank, not a silent overwrite",
          "[compile]") {
  const std::vector<std::string> errors = spsd_test::errors_by_rank(2, [&] {
    const Placement p("cpu", first(2));
    GlobalTensor<float> w = randn<float>(Shape{4, 4}, p, NdSbp(std::vector<Sbp>{sbp::broadcast}), 7);
    w.requires_grad_();
    auto step = compile([&](const GlobalTensor<float>& x) { backward(sum(matmul(x, w))); });
    const GlobalTensor<float> x = randn<float>(Shape{4, 4}, p, NdSbp(std::vector<Sbp>{sbp::split(0)}), 8);
    step(x);  // captures; the gradient is set
    step(x);  // eager would add to it
  });
  for (int r = 0; r < 2; ++r) CHECK(errors[r].find("was not cleared before this call") != std::string::npos);
}

TEST_CASE("compile: another shape or layout captures again; each replays its own", "[compile]") {
  const spsd_test::Failures failures = spsd_test::on_simulated_ranks(2, [](spsd_test::Failures& failed) {
    const Placement p("cpu", first(2));
    const GlobalTensor<float> w = randn<float>(Shape{4, 3}, p, NdSbp(std::vector<Sbp>{sbp::broadcast}), 7);
    auto f = compile([&](const GlobalTensor<float>& x) { return relu(matmul(x, w)) * 2.0f; });
    for (int round = 0; round < 2; ++round)
      for (const auto& [rows, layout] : std::vector<std::pair<int64_t, Sbp>>{{4, sbp::split(0)}, {6, sbp::split(0)},
                                                                            {4, sbp::broadcast}}) {
        const GlobalTensor<float> x = randn<float>(Shape{rows, 4}, p, NdSbp(std::vector<Sbp>{layout}), 9 + round);
        const std::vector<float> eager = (relu(matmul(x, w)) * 2.0f).full().to_vector();
        const GlobalTensor<float> y = f(x);
        if (y.shape() != Shape{rows, 3} || y.full().to_vector() != eager || y.requires_grad())
          failed.add(detail::concat("rows ", rows, " ", layout, " round ", round, ": ", y.describe()));
      }
    if (f.captures() != 3) failed.add(detail::concat("captures ", f.captures()));
  });
  INFO(failures.report());
  CHECK(failures.empty());
}

TEST_CASE("compile: explain() names each op's signature and the bytes beside eager's", "[compile]") {
  std::vector<spsd_test::CompiledRun> runs(4);
  simulate(4, [&] { runs[rank()] = spsd_test::gpt_compiled_run<float>("tensor", first(4), 2, true, {.search_layouts = false}); });
  const std::string& e = runs[0].explanation;
  INFO(e);
  CHECK(e.find("matmul") != std::string::npos);
  CHECK(e.find("host step Adam") != std::string::npos);
  CHECK(e.find("set gradient") != std::string::npos);
  CHECK(e.find("bytes sent per step, busiest rank") != std::string::npos);
}

namespace {
// The number after `key` in text, or -1.
double number_after(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  return at == std::string::npos ? -1 : std::stod(text.substr(at + key.size()));
}
}  // namespace

// At a size where bandwidth, not latency, prices the boxing (dim 64, context 32, batch 8): the
// search never predicts a slower step than eager's choices, what it predicts is what the replay
// sends (comm_stats), and training goes as eager's up to rounding.
TEST_CASE("compile: the joint search predicts no slower a step, sends what it predicts, trains alike", "[compile]") {
  const spsd_test::GptSize size{64, 32, 8};
  for (const auto& [mode, n] : std::vector<std::pair<std::string, int>>{{"tensor", 4}, {"2d", 4}, {"data", 2}}) {
    std::vector<spsd_test::CompiledRun> eager(n), searched(n);
    simulate(n, [&] {
      eager[rank()] = spsd_test::gpt_compiled_run<float>(mode, first(n), 3, false, {}, size);
      searched[rank()] = spsd_test::gpt_compiled_run<float>(mode, first(n), 3, true, {}, size);
    });
    const std::string& e = searched[0].explanation;
    INFO(mode << " on " << n << " ranks\n" << e);
    CHECK(e.find("layouts: searched jointly") != std::string::npos);
    const double predicted = number_after(e, "; predicted "), eager_predicted = number_after(e, "against eager's ");
    CHECK(predicted > 0);
    CHECK(predicted <= eager_predicted);
    int64_t busiest = 0;
    for (int r = 0; r < n; ++r) busiest = std::max(busiest, searched[r].last_step_sent);
    CHECK(busiest == static_cast<int64_t>(number_after(e, "bytes sent per step, busiest rank: ")));
    for (int r = 0; r < n; ++r) {
      REQUIRE(searched[r].losses.size() == eager[r].losses.size());
      for (size_t s = 0; s < eager[r].losses.size(); ++s)
        CHECK(searched[r].losses[s] == Approx(eager[r].losses[s]).epsilon(1e-4));
    }
  }
}

namespace {
// explain()'s lines, less the search's timing (the only thing in it that is not a function of
// the shapes, layouts and mesh).
std::string without_timing(const std::string& explanation) {
  std::string kept, line;
  for (const char c : explanation + "\n") {
    if (c != '\n') {
      line += c;
      continue;
    }
    if (line.find("rank 0's CPU") == std::string::npos) kept += line + "\n";
    line.clear();
  }
  return kept;
}
}  // namespace

// dry_run plans as the real ranks do: the searched step (every signature, boxing and byte count
// of explain()) and the bytes rank 0 sends per step are those of the same step on simulated ranks.
TEST_CASE("compile: a step captured in a dry run plans as on the real ranks", "[compile]") {
  const spsd_test::GptSize size{64, 32, 8};
  for (const auto& [mode, n] : std::vector<std::pair<std::string, int>>{{"tensor", 4}, {"2d", 4}, {"sequence", 2}}) {
    std::vector<spsd_test::CompiledRun> real(n);
    simulate(n, [&] { real[rank()] = spsd_test::gpt_compiled_run<float>(mode, first(n), 2, true, {}, size); });
    spsd_test::CompiledRun dry;
    int world = 0, me = -1;
    dry_run(n, [&] {
      world = world_size(), me = rank();
      dry = spsd_test::gpt_compiled_run<float>(mode, first(n), 2, true, {}, size);
    });
    CHECK(world == n);
    CHECK(me == 0);
    INFO(mode << " on " << n << " ranks\nreal:\n" << real[0].explanation << "\ndry:\n" << dry.explanation);
    CHECK(dry.explanation.find("layouts: searched jointly") != std::string::npos);
    CHECK(without_timing(dry.explanation) == without_timing(real[0].explanation));
    CHECK(dry.last_step_sent == real[0].last_step_sent);
    CHECK(dry.last_step_sent > 0);
  }
}

TEST_CASE("dry_run: bad arguments and a body's error are spsd::Errors naming what failed", "[compile]") {
  CHECK_THROWS_WITH(dry_run(0, [] {}), Catch::Contains("dry_run") && Catch::Contains("got 0"));
  CHECK_THROWS_WITH(dry_run(2, {}), Catch::Contains("dry_run") && Catch::Contains("body is empty"));
  CHECK_THROWS_WITH(dry_run(4, [] { (void)randn<float>({4, 4}, Placement("cpu", {0, 4}), {sbp::split(0)}); }),
                    Catch::Contains("names rank 4") && Catch::Contains("4 ranks"));
  CHECK_THROWS_WITH(dry_run(2, [] { (void)randn<float>({4, 4}, Placement("cuda", {0, 1}), {sbp::split(0)}); }),
                    Catch::Contains("dry run cannot take"));
}

// A memory budget below what the search picks without one: the search keeps it (splitting more
// results), says so, and still trains as eager does. Read from explain(): "results R B per rank".
TEST_CASE("compile: a memory budget below the unbudgeted plan's is kept and said", "[compile]") {
  const spsd_test::GptSize size{64, 32, 8};
  for (const auto& [mode, n] : std::vector<std::pair<std::string, int>>{{"tensor", 4}, {"2d", 4}}) {
    std::vector<spsd_test::CompiledRun> eager(n), free(n), budgeted(n);
    int64_t budget = 0;
    simulate(n, [&] {
      eager[rank()] = spsd_test::gpt_compiled_run<float>(mode, first(n), 3, false, {}, size);
      free[rank()] = spsd_test::gpt_compiled_run<float>(mode, first(n), 3, true, {}, size);
    });
    const double unbudgeted = number_after(free[0].explanation, " %); results ");
    REQUIRE(unbudgeted > 0);
    budget = static_cast<int64_t>(unbudgeted * 0.9);
    simulate(n, [&] {
      budgeted[rank()] = spsd_test::gpt_compiled_run<float>(mode, first(n), 3, true, {.memory_budget_bytes = budget}, size);
    });
    const std::string& e = budgeted[0].explanation;
    INFO(mode << " on " << n << " ranks, budget " << budget << "\nunbudgeted:\n" << free[0].explanation << "\nbudgeted:\n" << e);
    CHECK(number_after(e, " %); results ") <= static_cast<double>(budget));
    CHECK(e.find("memory budget " + std::to_string(budget) + " B met") != std::string::npos);
    for (int r = 0; r < n; ++r)
      for (size_t s = 0; s < eager[r].losses.size(); ++s)
        CHECK(budgeted[r].losses[s] == Approx(eager[r].losses[s]).epsilon(1e-4));
  }
}

// Priced as on GPUs (CompileOptions::price_as), the search runs on the cpu ranks with a GPU's
// cost model: it says so, predicts no slower a step than eager's choices on that model, and the
// replay sends what it predicts.
TEST_CASE("compile: a search priced as on GPUs keeps its guarantees on that model", "[compile]") {
  const spsd_test::GptSize size{64, 32, 8};
  for (const auto& [mode, n] : std::vector<std::pair<std::string, int>>{{"tensor", 4}, {"2d", 4}}) {
    std::vector<spsd_test::CompiledRun> runs(n);
    simulate(n, [&] {
      runs[rank()] = spsd_test::gpt_compiled_run<float>(mode, first(n), 2, true, {.price_as = DeviceType::kCUDA}, size);
    });
    const std::string& e = runs[0].explanation;
    INFO(mode << " on " << n << " ranks\n" << e);
    CHECK(e.find("priced as cuda") != std::string::npos);
    CHECK(number_after(e, "; predicted ") <= number_after(e, "against eager's "));
    int64_t busiest = 0;
    for (int r = 0; r < n; ++r) busiest = std::max(busiest, runs[r].last_step_sent);
    CHECK(busiest == static_cast<int64_t>(number_after(e, "bytes sent per step, busiest rank: ")));
  }
}

// nn::search_plan on a (2, 2) mesh from data parallelism with every parameter replicated on the
// tensor axis: under a budget that the replicated parameters alone (four copies each) exceed,
// it splits parameters, says so, and the plan it returns trains as the start plan does.
TEST_CASE("search_plan: under a budget the parameters' layouts are chosen and the plan trains alike", "[compile]") {
  const spsd_test::GptSize size{64, 32, 8};
  const nn::Plan start{nn::data_parallel(), nn::AxisPlan{.name = "tensor"}};
  std::vector<nn::SearchedPlan> free(4), budgeted(4);
  simulate(4, [&] { free[rank()] = spsd_test::search_gpt_plan("2d", first(4), start, {}, size); });
  const double unbudgeted = number_after(free[0].explanation, " %); results ");
  REQUIRE(unbudgeted > 0);
  const auto budget = static_cast<int64_t>(unbudgeted * 0.8);
  simulate(4, [&] {
    budgeted[rank()] = spsd_test::search_gpt_plan("2d", first(4), start, {.memory_budget_bytes = budget}, size);
  });
  const nn::SearchedPlan& found = budgeted[0];
  INFO("budget " << budget << "\nunbudgeted:\n" << free[0].explanation << "\nbudgeted:\n" << found.explanation);
  CHECK(found.explanation.find("memory budget " + std::to_string(budget) + " B met") != std::string::npos);
  CHECK(!found.changed.empty());
  for (int r = 1; r < 4; ++r) CHECK(budgeted[r].changed == found.changed);  // one plan, every rank
  std::vector<spsd_test::CompiledRun> reference(4), trained(4);
  simulate(4, [&] {
    reference[rank()] = spsd_test::gpt_compiled_run<float>("2d", first(4), 3, false, {}, size, start);
    trained[rank()] = spsd_test::gpt_compiled_run<float>("2d", first(4), 3, true, {}, size, found.plan);
  });
  for (int r = 0; r < 4; ++r)
    for (size_t s = 0; s < reference[r].losses.size(); ++s)
      CHECK(trained[r].losses[s] == Approx(reference[r].losses[s]).epsilon(1e-4));
}

// The exact solver (CompileOptions::exact_seconds, COIN-OR CBC) on the search's integer programme:
// on one tensor axis it proves a plan optimal on the cost model (the gap closes), that plan is no
// dearer than the search's alone, the step sends the bytes explain() predicts, and it trains as
// eager does. The solver's plan is checked against the search's own objective, so a programme
// that priced plans otherwise would be an Error here.
TEST_CASE("compile: the exact solver proves a plan optimal, no dearer than the search's, that trains alike",
          "[compile]") {
  const spsd_test::GptSize size{64, 32, 8};
  for (const auto& [mode, n] : std::vector<std::pair<std::string, int>>{{"tensor", 4}, {"sequence", 4}, {"data", 2}}) {
    std::vector<spsd_test::CompiledRun> eager(n), searched(n), exact(n);
    simulate(n, [&] {
      eager[rank()] = spsd_test::gpt_compiled_run<float>(mode, first(n), 3, false, {}, size);
      searched[rank()] = spsd_test::gpt_compiled_run<float>(mode, first(n), 3, true, {}, size);
      exact[rank()] = spsd_test::gpt_compiled_run<float>(mode, first(n), 3, true, {.exact_seconds = 60}, size);
    });
    const std::string& e = exact[0].explanation;
    INFO(mode << " on " << n << " ranks\nsearch alone:\n" << searched[0].explanation << "\nwith the exact solver:\n" << e);
    CHECK(e.find("exact solver (CBC, ") != std::string::npos);
    CHECK(e.find("optimal, proven") != std::string::npos);
    const double predicted = number_after(e, "; predicted ");
    CHECK(predicted > 0);
    CHECK(predicted <= number_after(searched[0].explanation, "; predicted ") + 1e-6);
    CHECK(number_after(e, "; lower bound ") == Approx(predicted).epsilon(1e-9));
    int64_t busiest = 0;
    for (int r = 0; r < n; ++r) busiest = std::max(busiest, exact[r].last_step_sent);
    CHECK(busiest == static_cast<int64_t>(number_after(e, "bytes sent per step, busiest rank: ")));
    for (int r = 0; r < n; ++r)
      for (size_t s = 0; s < eager[r].losses.size(); ++s)
        CHECK(exact[r].losses[s] == Approx(eager[r].losses[s]).epsilon(1e-4));
  }
}

// The whole programme's columns from explain()'s "exact solver (CBC, T s, N columns)": every
// rank's report says it (none: 0, and the checks after fail).
size_t whole_columns(const std::string& explanation) {
  const size_t at = explanation.find("exact solver (CBC, ");
  return at == std::string::npos ? 0 : static_cast<size_t>(number_after(explanation.substr(at), " s, "));
}

// The exact solver by block (CompileOptions::exact_max_columns below the whole programme's
// columns): on a GPT of three blocks it finds the chain, solves one block and reuses it, and
// proves the step's optimum by the dynamic programme over the chain's seams, or (with
// exact_chain_states 0) bounds it by windows. Against the optimum CBC proves on the whole
// programme: the dynamic programme's is it; the plan reused is no cheaper and no dearer than the
// search's alone; the windows' bound is well above the search's own and no higher than the
// optimum (above it would be wrong); the tied programme is solved to its optimum; the step sends
// what explain() predicts and trains as eager does. A step of one block is no chain: explain()
// says the solver did not run.
TEST_CASE("compile: the exact solver by block reuses one block's plan and proves it by the chain's programme or bounds it by windows",
          "[compile]") {
  const spsd_test::GptSize size{64, 16, 8, 3};
  std::vector<spsd_test::CompiledRun> eager(4), searched(4), whole(4), by_block(4), by_windows(4), single(4);
  simulate(4, [&] {
    eager[rank()] = spsd_test::gpt_compiled_run<float>("tensor", first(4), 2, false, {}, size);
    searched[rank()] = spsd_test::gpt_compiled_run<float>("tensor", first(4), 2, true, {}, size);
    whole[rank()] = spsd_test::gpt_compiled_run<float>("tensor", first(4), 2, true, {.exact_seconds = 60}, size);
    const size_t columns = whole_columns(whole[rank()].explanation);
    by_block[rank()] = spsd_test::gpt_compiled_run<float>("tensor", first(4), 2, true,
                                                          {.exact_seconds = 300, .exact_max_columns = columns - 1}, size);
    by_windows[rank()] = spsd_test::gpt_compiled_run<float>(
        "tensor", first(4), 2, true, {.exact_seconds = 60, .exact_max_columns = columns - 1, .exact_chain_states = 0}, size);
    single[rank()] = spsd_test::gpt_compiled_run<float>("tensor", first(4), 1, true, {.exact_seconds = 60, .exact_max_columns = 100},
                                                        {64, 16, 8, 1});
  });
  const std::string& e = by_block[0].explanation;
  const std::string& w = by_windows[0].explanation;
  INFO("whole programme:\n" << whole[0].explanation << "\nby block:\n" << e << "\nbound by windows:\n" << w);
  REQUIRE(whole[0].explanation.find("optimal, proven") != std::string::npos);
  const double optimum = number_after(whole[0].explanation, "; predicted ");
  for (const std::string& x : {e, w}) {
    CHECK(x.find("on a chain of 3 repeated blocks") != std::string::npos);
    CHECK(x.find("one block solved and reused (") != std::string::npos);
    CHECK(x.find(" columns, optimal among plans repeating it") != std::string::npos);
    const double reused = number_after(x, "; predicted ");
    CHECK(reused >= optimum - 1e-6 * optimum);
    CHECK(reused <= number_after(searched[0].explanation, "; predicted ") + 1e-6 * optimum);
  }
  // The chain's programme: five stages (the ops before the blocks, three blocks, the ops after),
  // the step's optimum, and a plan that costs it.
  CHECK(e.find("the dynamic programme over its seams (5 stages, ") != std::string::npos);
  CHECK(e.find(" proves it optimal") != std::string::npos);
  CHECK(e.find("windows") == std::string::npos);
  CHECK(number_after(e, "; predicted ") == Approx(optimum).epsilon(1e-9));
  CHECK(number_after(e, "; lower bound ") == Approx(optimum).epsilon(1e-9));
  // The windows' bound: above the search's own (the independent bound), not above the optimum.
  CHECK(w.find("no dynamic programme over its seams (exact_chain_states 0)") != std::string::npos);
  CHECK(w.find("lower bound by windows of ") != std::string::npos);
  const double bound = number_after(w, "; lower bound ");
  CHECK(bound > number_after(searched[0].explanation, "; lower bound ") * 1.5);
  CHECK(bound <= optimum + 1e-6 * optimum);
  for (const auto* runs : {&by_block, &by_windows}) {
    int64_t busiest = 0;
    for (int r = 0; r < 4; ++r) busiest = std::max(busiest, (*runs)[r].last_step_sent);
    CHECK(busiest == static_cast<int64_t>(number_after((*runs)[0].explanation, "bytes sent per step, busiest rank: ")));
    for (int r = 0; r < 4; ++r)
      for (size_t s = 0; s < eager[r].losses.size(); ++s) CHECK((*runs)[r].losses[s] == Approx(eager[r].losses[s]).epsilon(1e-4));
  }
  CHECK(single[0].explanation.find("exact solver not run: ") != std::string::npos);
  CHECK(single[0].explanation.find("the step is no chain of repeated blocks") != std::string::npos);
}

// The dynamic programme over a longer chain: a chain of 8 blocks goes to it before the whole
// programme; once its least costs move alike from one block to the next, the blocks after are not
// solved again but reuse that block's solutions; the optimum is still the whole programme's, and
// the plan assembled from the reused blocks costs it (explain() would be an Error otherwise) and
// trains as eager does.
TEST_CASE("compile: the chain's dynamic programme reuses alike blocks and meets the whole programme's optimum", "[compile]") {
  const spsd_test::GptSize size{64, 16, 8, 8};
  std::vector<spsd_test::CompiledRun> eager(4), whole(4), by_block(4);
  simulate(4, [&] {
    eager[rank()] = spsd_test::gpt_compiled_run<float>("tensor", first(4), 1, false, {}, size);
    // The whole programme (with the chain's programme off: 8 blocks would go to it first).
    whole[rank()] = spsd_test::gpt_compiled_run<float>("tensor", first(4), 1, true, {.exact_seconds = 300, .exact_chain_states = 0}, size);
    // By default: the whole programme fits, but a chain of 8 blocks goes to the chain's first.
    by_block[rank()] = spsd_test::gpt_compiled_run<float>("tensor", first(4), 1, true, {.exact_seconds = 300}, size);
  });
  const std::string& e = by_block[0].explanation;
  INFO("whole programme:\n" << whole[0].explanation << "\nby block:\n" << e);
  REQUIRE(whole[0].explanation.find("optimal, proven") != std::string::npos);
  const double optimum = number_after(whole[0].explanation, "; predicted ");
  CHECK(e.find(detail::concat("the whole programme's ", whole_columns(whole[0].explanation),
                      " columns left for the chain's programme (8 blocks or more")) != std::string::npos);
  CHECK(e.find("the dynamic programme over its seams (10 stages, ") != std::string::npos);
  CHECK(e.find(", the other blocks' reused) proves it optimal") != std::string::npos);
  CHECK(number_after(e, " programmes solved in ") < 10);
  CHECK(number_after(e, "; predicted ") == Approx(optimum).epsilon(1e-9));
  CHECK(number_after(e, "; lower bound ") == Approx(optimum).epsilon(1e-9));
  for (int r = 0; r < 4; ++r)
    for (size_t s = 0; s < eager[r].losses.size(); ++s) CHECK(by_block[r].losses[s] == Approx(eager[r].losses[s]).epsilon(1e-4));
}

// The search's restarts: in sequence mode the plan that makes the whole tensor axis data parallel
// is one no sequence of single or pair moves reaches from eager's (each move on the way costs
// more); the restart from it is kept, and it is the optimum the exact solver proves.
TEST_CASE("compile: a restart reaches the optimum that single and pair moves cannot", "[compile]") {
  const spsd_test::GptSize size{128, 64, 16};
  std::vector<spsd_test::CompiledRun> searched(4), exact(4);
  simulate(4, [&] {
    searched[rank()] = spsd_test::gpt_compiled_run<float>("sequence", first(4), 1, true, {}, size);
    exact[rank()] = spsd_test::gpt_compiled_run<float>("sequence", first(4), 1, true, {.exact_seconds = 60}, size);
  });
  const std::string& e = searched[0].explanation;
  INFO(e << "\nwith the exact solver:\n" << exact[0].explanation);
  CHECK(e.find("1 restart (a restart's plan kept)") != std::string::npos);
  REQUIRE(exact[0].explanation.find("optimal, proven") != std::string::npos);
  CHECK(number_after(e, "; predicted ") == Approx(number_after(exact[0].explanation, "; predicted ")).epsilon(1e-9));
}

// CompileOptions::search_problem_file: rank 0 writes the integer programme in CPLEX LP form (one
// binary per candidate of every node); a file that cannot be written is an Error on every rank.
TEST_CASE("compile: the search's problem is written for an outside solver; an unwritable file is an Error",
          "[compile]") {
  const std::string path = "compile_search_problem.lp";
  std::vector<spsd_test::CompiledRun> runs(2);
  simulate(2, [&] {
    runs[rank()] = spsd_test::gpt_compiled_run<float>("tensor", first(2), 1, true, {.search_problem_file = path});
  });
  std::ifstream file(path);
  REQUIRE(file.good());
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const size_t binaries = text.find("\nBinary\n");
  REQUIRE(binaries != std::string::npos);
  CHECK(text.rfind("\\ spsd layout search: ", 0) == 0);
  CHECK(text.find("\nMinimize\n obj:") != std::string::npos);
  CHECK(text.find("\nSubject To\n one_0: ") != std::string::npos);
  CHECK(text.find("\nEnd\n") != std::string::npos);
  // As many binaries as the nodes' candidates, and one "one_" row per node.
  const size_t x_count = static_cast<size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(binaries), text.end(), 'x'));
  const size_t nodes = static_cast<size_t>(number_after(text, "spsd layout search: "));
  size_t one_rows = 0;
  for (size_t at = text.find("\n one_"); at != std::string::npos; at = text.find("\n one_", at + 1)) ++one_rows;
  CHECK(one_rows == nodes);
  CHECK(x_count >= nodes);
  std::remove(path.c_str());
  const std::vector<std::string> errors = spsd_test::errors_by_rank(2, [&] {
    (void)spsd_test::gpt_compiled_run<float>("tensor", first(2), 1, true,
                                             {.search_problem_file = "/nonexistent-directory/problem.lp"});
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK(errors[r].find("cannot write the search's problem to \"/nonexistent-directory/problem.lp\"") != std::string::npos);
  }
}
