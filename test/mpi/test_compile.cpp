// Compiled steps under mpirun (test/common/compile_checks.hpp): a replay equals eager bit for bit
// (float32 and bfloat16), and the searched layouts train alike.
#include <catch2/catch.hpp>

#include <numeric>
#include <string>
#include <vector>

#include "compile_checks.hpp"

namespace {
std::vector<int64_t> world() {
  std::vector<int64_t> r(static_cast<size_t>(spsd::world_size()));
  std::iota(r.begin(), r.end(), int64_t{0});
  return r;
}
std::vector<std::string> modes() {
  const int n = spsd::world_size();
  if (n == 1) return {"data"};
  return n % 2 == 0 ? std::vector<std::string>{"data", "tensor", "2d"} : std::vector<std::string>{"data", "tensor"};
}
// explain()'s "bytes sent per step" line, and whether every rank's is as long (the same plan
// everywhere gives the same line).
bool bytes_line_alike(const std::string& explanation) {
  const size_t at = explanation.find("bytes sent per step");  // a rank without it still joins the reduction
  const int64_t mine = at == std::string::npos ? -1 : static_cast<int64_t>(explanation.find('\n', at) - at);
  int64_t longest = 0;
  spsd::world_communicator().all_reduce(&mine, &longest, 1, spsd::DType::kInt64, spsd::ReduceOp::kMax);
  return mine >= 0 && longest == mine;
}
}  // namespace

TEST_CASE("compile: a replayed GPT step equals eager bit for bit", "[mpi][compile]") {
  for (const std::string& mode : modes()) {
    const auto eager = spsd_test::gpt_compiled_run<float>(mode, world(), 3, false);
    const auto replayed = spsd_test::gpt_compiled_run<float>(mode, world(), 3, true, {.search_layouts = false});
    INFO(mode << ", rank " << spsd::rank() << " of " << spsd::world_size());
    CHECK(replayed.losses == eager.losses);
    CHECK(replayed.parameters == eager.parameters);
  }
  const auto eager = spsd_test::gpt_compiled_run<spsd::bfloat16>(modes().back(), world(), 3, false);
  const auto replayed = spsd_test::gpt_compiled_run<spsd::bfloat16>(modes().back(), world(), 3, true, {.search_layouts = false});
  CHECK(replayed.losses == eager.losses);
  CHECK(replayed.parameters == eager.parameters);
}

TEST_CASE("compile: searched layouts train like eager's", "[mpi][compile]") {
  for (const std::string& mode : modes()) {
    const auto eager = spsd_test::gpt_compiled_run<float>(mode, world(), 3, false);
    const auto searched = spsd_test::gpt_compiled_run<float>(mode, world(), 3, true);
    INFO(mode << ", rank " << spsd::rank() << "\n" << searched.explanation);
    REQUIRE(searched.losses.size() == eager.losses.size());
    for (size_t s = 0; s < eager.losses.size(); ++s) CHECK(searched.losses[s] == Approx(eager.losses[s]).epsilon(1e-4));
  }
}

// A dry run inside an MPI job: a thread of its own with its own runtime, the job's untouched. Its
// plan for this world's size is what the job's ranks searched (explain()'s bytes line).
TEST_CASE("compile: a dry run inside an MPI job plans what the job's ranks do", "[mpi][compile]") {
  const std::string mode = modes().back();
  const auto real = spsd_test::gpt_compiled_run<float>(mode, world(), 2, true);
  spsd_test::CompiledRun dry;
  spsd::dry_run(spsd::world_size(), [&] { dry = spsd_test::gpt_compiled_run<float>(mode, world(), 2, true); });
  auto bytes_line = [](const std::string& e) {
    const size_t at = e.find("bytes sent per step");
    return at == std::string::npos ? std::string("(none)") : e.substr(at, e.find('\n', at) - at);
  };
  INFO(mode << ", rank " << spsd::rank() << "\nreal:\n" << real.explanation << "\ndry:\n" << dry.explanation);
  CHECK(bytes_line(dry.explanation) == bytes_line(real.explanation));
  CHECK(bytes_line(real.explanation) != "(none)");
  // The job goes on after it: a collective over the world still works.
  int64_t one = 1, sum = 0;
  spsd::world_communicator().all_reduce(&one, &sum, 1, spsd::DType::kInt64, spsd::ReduceOp::kSum);
  CHECK(sum == spsd::world_size());
}

// The exact solver on real ranks: rank 0 solves (CBC) while the others wait for its choices;
// every rank replays the same proven plan (the bytes line of explain() agrees) and trains alike.
TEST_CASE("compile: the exact solver's plan is every rank's and trains like eager's", "[mpi][compile]") {
  const std::string mode = spsd::world_size() == 1 ? "data" : "tensor";
  const auto eager = spsd_test::gpt_compiled_run<float>(mode, world(), 3, false);
  const auto exact = spsd_test::gpt_compiled_run<float>(mode, world(), 3, true, {.exact_seconds = 60});
  INFO(mode << ", rank " << spsd::rank() << "\n" << exact.explanation);
  CHECK(exact.explanation.find("optimal, proven") != std::string::npos);
  CHECK(bytes_line_alike(exact.explanation));
  REQUIRE(exact.losses.size() == eager.losses.size());
  for (size_t s = 0; s < eager.losses.size(); ++s) CHECK(exact.losses[s] == Approx(eager.losses[s]).epsilon(1e-4));
}

// The exact solver by block on real ranks: rank 0 finds the chain of three blocks, solves one and
// reuses it, bounds the step by windows; every rank replays that plan and trains as eager does.
TEST_CASE("compile: the exact solver by block gives every rank one plan that trains like eager's", "[mpi][compile]") {
  const std::string mode = spsd::world_size() == 1 ? "data" : "tensor";
  const spsd_test::GptSize size{16, 8, 4, 3};
  const auto eager = spsd_test::gpt_compiled_run<float>(mode, world(), 2, false, {}, size);
  // The whole programme's columns, from a run given one column (nothing solved, the count said).
  const auto counted = spsd_test::gpt_compiled_run<float>(mode, world(), 1, true, {.exact_seconds = 60, .exact_max_columns = 1}, size);
  const std::string key = "the whole programme's ";
  const size_t at = counted.explanation.find(key);
  REQUIRE(at != std::string::npos);
  const size_t columns = static_cast<size_t>(std::stod(counted.explanation.substr(at + key.size())));
  // A few seconds: the plan and the bound need not be proven here, only be every rank's.
  const auto by_block = spsd_test::gpt_compiled_run<float>(mode, world(), 2, true,
                                                           {.exact_seconds = 4, .exact_max_columns = columns - 1}, size);
  INFO(mode << ", rank " << spsd::rank() << "\n" << by_block.explanation);
  CHECK(by_block.explanation.find("on a chain of 3 repeated blocks") != std::string::npos);
  CHECK(by_block.explanation.find("one block solved and reused (") != std::string::npos);
  CHECK(bytes_line_alike(by_block.explanation));
  REQUIRE(by_block.losses.size() == eager.losses.size());
  for (size_t s = 0; s < eager.losses.size(); ++s) CHECK(by_block.losses[s] == Approx(eager.losses[s]).epsilon(1e-4));
}
