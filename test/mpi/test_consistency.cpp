// The cross-rank consistency check under mpirun: ranks that disagree on their global ops get
// spsd::Error on every rank, each process asserting its own. Timeouts end an MPI job, so they are
// tested by diverge_timeout.cpp (check_diverge_timeout.sh), not here. Other suites in this
// program note ops on the same rank sets (to_global, factories), so op numbers are checked
// relative to the first error of each case: after an error a rank set counts from 1 again.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "data_error_suite.hpp"
#include "failures.hpp"

using Catch::Matchers::Contains;
using spsd::DType;
using spsd::ReduceOp;
using spsd::detail::check_ops;
using spsd::detail::CheckMode;
using spsd::detail::note_op;
using spsd::detail::OpIdentity;

namespace {

std::shared_ptr<const OpIdentity> op(const std::string& description) {
  return std::make_shared<const OpIdentity>(description);
}

std::vector<int64_t> world() {
  std::vector<int64_t> r(spsd::world_size());
  for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<int64_t>(i);
  return r;
}

// The spsd::Error message f throws, "" when it returns.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const spsd::Error& e) {
    return e.what();
  }
  return "";
}

// The rank set agrees again after an error: a check of the same op passes, and the data
// communicator still sums correctly.
void expect_usable_after_error(const std::vector<int64_t>& ranks) {
  CHECK(error_of([&] {
          note_op(ranks, op("after(the error)"));
          check_ops(ranks);
        }) == "");
  int64_t one = 1, total = 0;
  spsd::communicator(ranks).all_reduce(&one, &total, 1, DType::kInt64, ReduceOp::kSum);
  CHECK(total == static_cast<int64_t>(ranks.size()));
}

}  // namespace

TEST_CASE("consistency: the same ops on every rank pass", "[mpi][consistency]") {
  const std::vector<int64_t> all = world();
  CHECK(error_of([&] {
          for (int round = 0; round < 3; ++round) {
            for (int i = 0; i < 5; ++i) note_op(all, op("add((4, 5) float32 (S(0))) #" + std::to_string(i)));
            check_ops(all);
            check_ops(all);
          }
          std::vector<int64_t> reversed(all.rbegin(), all.rend());
          note_op(reversed, op("relu()"));
          check_ops(reversed);
        }) == "");
}

TEST_CASE("consistency: a different op on the last rank raises spsd::Error on every rank", "[mpi][consistency]") {
  const int n = spsd::world_size();
  if (n < 2) return;
  const std::vector<int64_t> all = world();
  auto diverge = [&] {
    note_op(all, op("zeros((4, 5) float32 (S(0)))"));
    note_op(all, op(spsd::rank() == n - 1 ? "full((4, 5) float32 (B))" : "add((4, 5) float32 (S(0)), (S(0)))"));
    check_ops(all);
  };
  // The first error's op number depends on the ops other suites noted; the second counts from 1.
  CHECK_THAT(error_of(diverge), Contains("consistency check: ranks disagree on global op #"));
  std::string e = error_of(diverge);
  std::string others = "0";
  for (int r = 1; r < n - 1; ++r) others += ", " + std::to_string(r);
  INFO("world rank " << spsd::rank() << " got \"" << e << "\"");
  CHECK(e == "consistency check: ranks disagree on global op #2 on ranks " + spsd::detail::join(all) + ": " +
                 (n == 2 ? "rank " : "ranks ") + others + " issued add((4, 5) float32 (S(0)), (S(0))); rank " +
                 std::to_string(n - 1) + " issued full((4, 5) float32 (B))");
  expect_usable_after_error(all);
}

TEST_CASE("consistency: different metadata on rank 0, on ranks in reverse order", "[mpi][consistency]") {
  const int n = spsd::world_size();
  if (n < 2) return;
  std::vector<int64_t> ranks = world();
  std::reverse(ranks.begin(), ranks.end());
  std::string e = error_of([&] {
    for (int i = 0; i < 4; ++i) note_op(ranks, op("exp() #" + std::to_string(i)));
    note_op(ranks, op(spsd::rank() == 0 ? "sum((4, 6) float32 (S(1)), axes [1])" : "sum((4, 6) float32 (S(0)), axes [1])"));
    check_ops(ranks);
  });
  INFO("world rank " << spsd::rank() << " got \"" << e << "\"");
  CHECK_THAT(e, Contains("consistency check: ranks disagree on global op #") &&
                    Contains(" on ranks " + spsd::detail::join(ranks) + ": "));
  CHECK_THAT(e, Contains("rank 0 issued sum((4, 6) float32 (S(1)), axes [1])"));
  std::string others = std::to_string(n - 1);
  for (int r = n - 2; r >= 1; --r) others += ", " + std::to_string(r);
  CHECK_THAT(e, Contains((n == 2 ? ": rank " : ": ranks ") + others + " issued sum((4, 6) float32 (S(0)), axes [1]); "));
  expect_usable_after_error(ranks);
}

TEST_CASE("consistency: a rank that skips an op is named", "[mpi][consistency]") {
  const int n = spsd::world_size();
  if (n < 2) return;
  const std::vector<int64_t> all = world();
  SECTION("in the middle") {
    std::string e = error_of([&] {
      note_op(all, op("a()"));
      if (spsd::rank() != 1) note_op(all, op("b()"));
      note_op(all, op("c()"));
      check_ops(all);
    });
    INFO("world rank " << spsd::rank() << " got \"" << e << "\"");
    CHECK_THAT(e, Contains("ranks disagree on global op #") && Contains("rank 1 issued c()") &&
                      Contains(" issued b()"));
  }
  SECTION("at the end") {
    std::string e = error_of([&] {
      note_op(all, op("a()"));
      if (spsd::rank() != 0) note_op(all, op("b()"));
      check_ops(all);
    });
    INFO("world rank " << spsd::rank() << " got \"" << e << "\"");
    CHECK_THAT(e, Contains("ranks disagree on global op #") &&
                      Contains("rank 0 issued <no op: this rank issued only ") && Contains(" issued b()"));
  }
  expect_usable_after_error(all);
}

TEST_CASE("consistency: SPSD_CHECK=op names the op at its note; 256 ops trigger a check", "[mpi][consistency]") {
  const int n = spsd::world_size();
  if (n < 2) return;
  const std::vector<int64_t> all = world();
  // Start counting from 1: a deliberate mismatch resets the rank set.
  note_op(all, op("reset by rank " + std::to_string(spsd::rank())));
  CHECK_THAT(error_of([&] { check_ops(all); }), Contains("ranks disagree"));
  SECTION("every op") {
    int where = -1;
    spsd::detail::set_check_mode(CheckMode::kEveryOp);
    std::string e = error_of([&] {
      for (int i = 0; i < 6; ++i) {
        where = i;
        note_op(all, op(i == 3 && spsd::rank() == n - 1 ? "mul()" : "add() #" + std::to_string(i)));
      }
    });
    spsd::detail::set_check_mode(CheckMode::kOn);
    CHECK(where == 3);
    CHECK_THAT(e, Contains("ranks disagree on global op #4 on ranks") && Contains(" issued mul()"));
  }
  SECTION("256 pending ops") {
    int where = -1;
    std::string e = error_of([&] {
      for (int i = 0; i < 300; ++i) {
        where = i;
        note_op(all, op(i == 9 && spsd::rank() == 0 ? "other()" : "op()"));
      }
    });
    CHECK(where == static_cast<int>(spsd::detail::kMaxPendingOps) - 1);
    CHECK_THAT(e, Contains("ranks disagree on global op #10 on ranks") && Contains("rank 0 issued other()"));
  }
  expect_usable_after_error(all);
}

TEST_CASE("consistency: checks leave data collectives and counters alone", "[mpi][consistency]") {
  const int n = spsd::world_size();
  const std::vector<int64_t> all = world();
  spsd::Communicator& c = spsd::communicator(all);
  for (int round = 0; round < 10; ++round) {
    spsd::reset_comm_stats();
    note_op(all, op("step " + std::to_string(round)));
    check_ops(all);
    CHECK(spsd::comm_stats() == spsd::CommStats{});
    int64_t mine = spsd::rank() + round, sum = 0;
    c.all_reduce(&mine, &sum, 1, DType::kInt64, ReduceOp::kSum);
    CHECK(sum == n * (n - 1) / 2 + n * round);
    if (n >= 4 && spsd::rank() < 4) {
      std::vector<int64_t> half = spsd::rank() < 2 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{2, 3};
      note_op(half, op("half"));
      check_ops(half);
    }
  }
}

TEST_CASE("consistency: data errors ride on the next check, and a call's entries are compared one by one",
          "[mpi][consistency]") {
  spsd_test::Failures f;
  spsd_test::run_data_error_suite(world(), f);
  INFO(f.report());
  CHECK(f.empty());
}
