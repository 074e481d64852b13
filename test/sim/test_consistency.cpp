// The cross-rank consistency check (runtime/consistency.hpp) under simulate: ranks note ops
// directly (as the dispatcher does) and compare them; every disagreement must raise spsd::Error
// on every rank, naming the op and who issued what, and nothing may hang.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "data_error_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd_test;
using Catch::Matchers::Contains;
using spsd::DType;
using spsd::ReduceOp;
using spsd::detail::check_ops;
using spsd::detail::CheckMode;
using spsd::detail::note_op;
using spsd::detail::OpIdentity;
using Clock = std::chrono::steady_clock;

namespace {

std::shared_ptr<const OpIdentity> op(const std::string& description) {
  return std::make_shared<const OpIdentity>(description);
}

std::vector<int64_t> iota(int n) {
  std::vector<int64_t> r(n);
  for (int i = 0; i < n; ++i) r[i] = i;
  return r;
}

// Every rank got an spsd::Error containing every fragment.
void check_every_rank_failed(const std::vector<std::string>& errors, const std::vector<std::string>& fragments) {
  for (size_t r = 0; r < errors.size(); ++r) {
    INFO("world rank " << r << " got: \"" << errors[r] << "\"");
    CHECK(!errors[r].empty());
    for (const std::string& f : fragments) CHECK_THAT(errors[r], Contains(f));
  }
}

// After an error, the rank set is usable again: the same ops everywhere pass a check.
void expect_check_passes(const std::vector<int64_t>& ranks, Failures& f) {
  try {
    note_op(ranks, op("after(the error)"));
    check_ops(ranks);
  } catch (const spsd::Error& e) {
    f.add("world rank " + std::to_string(spsd::rank()) + ": the check after the error threw: " + e.what());
  }
}

}  // namespace

TEST_CASE("consistency: the same ops on every rank pass, on the world and on sub rank sets", "[consistency]") {
  const int n = GENERATE(1, 2, 3, 4, 12, 256);  // 12, 256: more than kPointToPointMembers, bounds reduced
  INFO(n << " simulated ranks");
  Failures failures = on_simulated_ranks(n, [&](Failures& f) {
    try {
      const std::vector<int64_t> world = iota(n);
      for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < 5; ++i) note_op(world, op("add((4, 5) float32 S(0)) #" + std::to_string(i)));
        check_ops(world);
        check_ops(world);  // nothing noted since: returns at once
      }
      // Reversed order is another rank set; a pair is one too (only its members take part).
      std::vector<int64_t> reversed(world.rbegin(), world.rend());
      note_op(reversed, op("relu((8) float32 B)"));
      check_ops(reversed);
      if (n >= 2 && spsd::rank() < 2) {
        note_op({1, 0}, op("matmul((4, 4) float32)"));
        check_ops({1, 0});
      }
    } catch (const spsd::Error& e) {
      f.add("world rank " + std::to_string(spsd::rank()) + ": " + e.what());
    }
  });
  INFO(failures.report());
  CHECK(failures.empty());
}

TEST_CASE("consistency: a different op on one rank raises spsd::Error on every rank", "[consistency]") {
  const int n = GENERATE(2, 3, 4, 12, 256);  // 256: the reduction finds it, the gather names it
  const int odd = GENERATE_COPY(0, n - 1);  // the rank that diverges
  INFO(n << " simulated ranks, world rank " << odd << " diverges");
  std::vector<Failures> after(n);
  std::vector<std::string> errors = errors_by_rank(n, [&] {
    const std::vector<int64_t> world = iota(n);
    try {
      note_op(world, op("zeros((4, 5) float32 (S(0)))"));
      note_op(world, op(spsd::rank() == odd ? "full((4, 5) float32 (B))" : "add((4, 5) float32 (S(0)), (S(0)))"));
      note_op(world, op("relu((4, 5) float32 (S(0)))"));
      check_ops(world);
    } catch (const spsd::Error&) {
      expect_check_passes(world, after[spsd::rank()]);
      throw;
    }
  });
  std::string others;
  for (int r = 0; r < n; ++r)
    if (r != odd) others += (others.empty() ? "" : ", ") + std::to_string(r);
  const std::string agree = (n - 1 == 1 ? "rank " : "ranks ") + others + " issued add((4, 5) float32 (S(0)), (S(0)))";
  const std::string one = "rank " + std::to_string(odd) + " issued full((4, 5) float32 (B))";
  check_every_rank_failed(errors, {"consistency check: ranks disagree on global op #2 on ranks " + spsd::detail::join(iota(n)),
                                   agree, one});
  // Groups appear in member order of their first member.
  const std::string expected_text =
      "consistency check: ranks disagree on global op #2 on ranks " + spsd::detail::join(iota(n)) + ": " +
      (odd == 0 ? one + "; " + agree : agree + "; " + one);
  for (const std::string& e : errors) CHECK(e == expected_text);
  for (const Failures& f : after) {
    INFO(f.report());
    CHECK(f.empty());
  }
}

TEST_CASE("consistency: different metadata on one rank, on a rank set in another order", "[consistency]") {
  std::vector<std::string> errors = errors_by_rank(4, [&] {
    const std::vector<int64_t> ranks = {2, 0, 3};
    if (spsd::rank() == 1) return;
    for (int i = 0; i < 6; ++i) note_op(ranks, op("exp((3) float64 (B)) #" + std::to_string(i)));
    note_op(ranks, op(spsd::rank() == 3 ? "sum((4, 6) float32 (S(1)), axes [1])" : "sum((4, 6) float32 (S(0)), axes [1])"));
    check_ops(ranks);
  });
  INFO("rank 1 is not in the rank set");
  CHECK(errors[1].empty());
  errors.erase(errors.begin() + 1);
  check_every_rank_failed(errors, {"consistency check: ranks disagree on global op #7 on ranks [2, 0, 3]: "
                                   "ranks 2, 0 issued sum((4, 6) float32 (S(0)), axes [1]); "
                                   "rank 3 issued sum((4, 6) float32 (S(1)), axes [1])"});
}

TEST_CASE("consistency: a scalar operand that differs on one rank is caught before communicating", "[consistency]") {
  // The scalar is not part of the op's cached identity, but it is compared: a learning rate
  // that differs on one rank would otherwise make a B result differ between ranks unnoticed.
  std::vector<std::string> errors = errors_by_rank(3, [&] {
    const spsd::Placement p("cpu", {0, 1, 2});
    auto x = spsd::ones<float>(spsd::Shape{6}, p, spsd::sbp::broadcast);
    auto y = x * (spsd::rank() == 2 ? 0.5f : 0.25f);
    (void)y.to_global(spsd::sbp::split(0)).full();
  });
  check_every_rank_failed(errors, {"consistency check: ranks disagree on global op #2 on ranks [0, 1, 2]",
                                   "ranks 0, 1 issued mul_scalar(", "with scalar operand 0.25; rank 2 issued mul_scalar(",
                                   "with scalar operand 0.5"});
}

TEST_CASE("consistency: a rank that skips an op is named, and so is a rank that issued fewer ops", "[consistency]") {
  const int n = GENERATE(2, 3, 4);
  INFO(n << " simulated ranks");
  SECTION("skipped in the middle") {
    std::vector<std::string> errors = errors_by_rank(n, [&] {
      const std::vector<int64_t> world = iota(n);
      note_op(world, op("a()"));
      if (spsd::rank() != 1) note_op(world, op("b()"));
      note_op(world, op("c()"));
      check_ops(world);
    });
    check_every_rank_failed(errors, {"ranks disagree on global op #2 on ranks", "rank 1 issued c()", " issued b()"});
  }
  SECTION("skipped at the end") {
    std::vector<std::string> errors = errors_by_rank(n, [&] {
      const std::vector<int64_t> world = iota(n);
      note_op(world, op("a()"));
      note_op(world, op("b()"));
      if (spsd::rank() != n - 1) note_op(world, op("c()"));
      check_ops(world);
    });
    check_every_rank_failed(errors, {"ranks disagree on global op #3 on ranks", " issued c()",
                                     "rank " + std::to_string(n - 1) + " issued <no op: this rank issued only 2 ops>"});
  }
  SECTION("after a successful check, ops are numbered on") {
    std::vector<std::string> errors = errors_by_rank(n, [&] {
      const std::vector<int64_t> world = iota(n);
      for (int i = 0; i < 10; ++i) note_op(world, op("a()"));
      check_ops(world);
      note_op(world, op("b()"));
      if (spsd::rank() == 0) note_op(world, op("c()"));
      check_ops(world);
    });
    check_every_rank_failed(errors, {"ranks disagree on global op #12 on ranks", "rank 0 issued c()",
                                     "issued <no op: this rank issued only 11 ops>"});
  }
}

TEST_CASE("consistency: a rank that never comes to the check is named by the others within the timeout",
          "[consistency]") {
  const int n = GENERATE(2, 3, 4, 12);  // the in-process backend names the missing rank either way
  INFO(n << " simulated ranks; the last never checks");
  const auto timeout = std::chrono::milliseconds(300);
  const auto start = Clock::now();
  std::vector<std::string> errors = errors_by_rank(n, [&] {
    spsd::set_timeout(timeout);
    const std::vector<int64_t> world = iota(n);
    note_op(world, op("add()"));
    if (spsd::rank() == n - 1) {
      std::this_thread::sleep_for(timeout * 2);
      return;
    }
    check_ops(world);
  });
  CHECK(Clock::now() - start < timeout * 2 + std::chrono::seconds(3));
  CHECK(errors[n - 1].empty());
  errors.pop_back();
  check_every_rank_failed(errors, {"consistency check: ranks " + spsd::detail::join(iota(n)) +
                                       " could not compare their global ops",
                                   "is at op #1, add()", "timed out after 0.3 s",
                                   "world ranks [" + std::to_string(n - 1) + "] never arrived"});
}

TEST_CASE("consistency: SPSD_CHECK=op checks after every op, SPSD_CHECK=off never", "[consistency]") {
  const int n = GENERATE(2, 4);
  INFO(n << " simulated ranks");
  SECTION("op: the note of the diverging op throws") {
    std::vector<int> where(n, -1);
    std::vector<std::string> errors = errors_by_rank(n, [&] {
      spsd::detail::set_check_mode(CheckMode::kEveryOp);
      const std::vector<int64_t> world = iota(n);
      for (int i = 0; i < 8; ++i) {
        where[spsd::rank()] = i;
        note_op(world, op(i == 5 && spsd::rank() == 1 ? "mul()" : "add() #" + std::to_string(i)));
      }
      where[spsd::rank()] = -1;
    });
    check_every_rank_failed(errors, {"ranks disagree on global op #6 on ranks", " issued add() #5", "rank 1 issued mul()"});
    for (int r = 0; r < n; ++r) CHECK(where[r] == 5);
  }
  SECTION("off: nothing is compared") {
    std::vector<int> off(n, 0);
    std::vector<std::string> errors = errors_by_rank(n, [&] {
      spsd::detail::set_check_mode(CheckMode::kOff);
      off[spsd::rank()] = spsd::detail::check_mode() == CheckMode::kOff;
      const std::vector<int64_t> world = iota(n);
      note_op(world, op("rank " + std::to_string(spsd::rank())));
      if (spsd::rank() == 0) check_ops(world);  // returns at once: no partner is needed
    });
    for (const std::string& e : errors) CHECK(e.empty());
    for (int r = 0; r < n; ++r) CHECK(off[r] == 1);
  }
}

TEST_CASE("consistency: 256 ops noted without a check trigger one", "[consistency]") {
  const int n = GENERATE(2, 3);
  INFO(n << " simulated ranks");
  SECTION("a divergence at op 100 surfaces at the note of op 256") {
    std::vector<int> where(n, -1);
    std::vector<std::string> errors = errors_by_rank(n, [&] {
      const std::vector<int64_t> world = iota(n);
      for (int i = 0; i < 400; ++i) {
        where[spsd::rank()] = i;
        note_op(world, op(i == 99 && spsd::rank() == n - 1 ? "other()" : "op()"));
      }
      where[spsd::rank()] = -1;
    });
    check_every_rank_failed(errors, {"ranks disagree on global op #100 on ranks", " issued op()", " issued other()"});
    for (int r = 0; r < n; ++r) CHECK(where[r] == static_cast<int>(spsd::detail::kMaxPendingOps) - 1);
  }
  SECTION("thousands of agreeing ops without an explicit check") {
    std::vector<std::string> errors = errors_by_rank(n, [&] {
      const std::vector<int64_t> world = iota(n);
      auto same = op("op()");
      for (int i = 0; i < 3000; ++i) note_op(world, same);
      check_ops(world);
    });
    for (const std::string& e : errors) CHECK(e.empty());
  }
}

TEST_CASE("consistency: checks do not interfere with data collectives on the same rank set", "[consistency]") {
  const int n = GENERATE(2, 3, 4);
  INFO(n << " simulated ranks");
  Failures failures = on_simulated_ranks(n, [&](Failures& f) {
    const std::vector<int64_t> world = iota(n);
    spsd::Communicator& c = spsd::communicator(world);
    const std::string me = "world rank " + std::to_string(spsd::rank());
    try {
      for (int round = 0; round < 20; ++round) {
        spsd::reset_comm_stats();
        note_op(world, op("step " + std::to_string(round)));
        check_ops(world);
        // The check's traffic is not the user's: the counters stay at zero.
        if (!(spsd::comm_stats() == spsd::CommStats{}))
          f.add(me + ": check_ops changed comm_stats(): " + spsd::comm_stats().to_string());
        int64_t mine = spsd::rank() + round, sum = 0;
        c.all_reduce(&mine, &sum, 1, DType::kInt64, ReduceOp::kSum);
        if (sum != n * (n - 1) / 2 + n * round) f.add(me + ": all_reduce after a check gave " + std::to_string(sum));
        // Checks on sub rank sets between data collectives of the world.
        if (n >= 4) {
          std::vector<int64_t> half = spsd::rank() < 2 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{2, 3};
          note_op(half, op("half"));
          check_ops(half);
        }
        std::vector<int64_t> gathered(n);
        c.all_gather(&mine, gathered.data(), 1, DType::kInt64);
        for (int r = 0; r < n; ++r)
          if (gathered[r] != r + round) f.add(me + ": all_gather after a check gave the wrong value");
      }
      // A mismatch found by a check leaves the data communicator usable.
      note_op(world, op(spsd::rank() == 0 ? "x" : "y"));
      try {
        check_ops(world);
        f.add(me + ": the mismatched check did not throw");
      } catch (const spsd::Error&) {
      }
      int64_t one = 1, total = 0;
      c.all_reduce(&one, &total, 1, DType::kInt64, ReduceOp::kSum);
      if (total != n) f.add(me + ": all_reduce after the mismatch gave " + std::to_string(total));
    } catch (const spsd::Error& e) {
      f.add(me + ": " + e.what());
    }
  });
  INFO(failures.report());
  CHECK(failures.empty());
}

TEST_CASE("consistency: misuse of note_op and the op identity", "[consistency]") {
  std::vector<std::string> errors = errors_by_rank(2, [] { note_op({1}, op("a()")); });
  CHECK_THAT(errors[0], Contains("note_op: rank 0 is not among the ranks [1]"));
  CHECK(errors[1].empty());
  CHECK_THROWS_WITH(note_op({0}, op("a()")), Contains("note_op: no spsd::Runtime is active"));
  CHECK(OpIdentity("add()").hash == OpIdentity("add()").hash);
  CHECK(OpIdentity("add()").hash != OpIdentity("add( )").hash);
}

TEST_CASE("consistency: data errors ride on the next check, and a call's entries are compared one by one",
          "[consistency]") {
  const int n = GENERATE(1, 2, 3, 4, 12);  // 12: bounds reduced, records all-gathered
  INFO(n << " simulated ranks");
  Failures failures = on_simulated_ranks(n, [&](Failures& f) { run_data_error_suite(iota(n), f); });
  INFO(failures.report());
  CHECK(failures.empty());
}

// The host half of the device flag (runtime/value_errors.hpp): a launch's find, as a kernel
// writes it, becomes a data error of its rank set, named by the launch's own description.
TEST_CASE("consistency: a value a device launch found becomes a data error raised on every rank", "[consistency]") {
  using spsd::detail::FoundValue;
  using spsd::detail::ValueCheck;
  using spsd::detail::ValueCheckLedger;
  Failures failures = on_simulated_ranks(3, [&](Failures& f) {
    const std::vector<int64_t> ranks = iota(3);
    const auto describe = [](std::string op) {
      return [op](int64_t position, int64_t value) {
        return std::pair(position + 10, op + ": indices[" + std::to_string(position + 10) + "] = " + std::to_string(value));
      };
    };
    ValueCheckLedger ledger;
    FoundValue found{0, 0, 0};
    note_op(ranks, op("embedding()"));
    ledger.add({ranks, spsd::detail::op_number(ranks), describe("embedding")});
    note_op(ranks, op("pick()"));
    const int64_t second = ledger.add({ranks, spsd::detail::op_number(ranks), describe("pick")});
    ledger.poll(found, false);  // nothing found yet, launches may still run: both kept
    if (ledger.size() != 2) f.add("a poll before any launch finished dropped launches");
    if (spsd::rank() == 2) found = {second, 4, 99};  // as record_out_of_range_kernel writes it
    ledger.poll(found, false);
    ledger.poll(found, false);  // reported once
    if (spsd::rank() == 2 && ledger.size() != 0) f.add("launches up to the one that found a value are kept");
    ledger.poll(found, true);
    if (found.tag != 0 || ledger.size() != 0) f.add("a complete poll left the record set, or launches listed");
    std::string e;
    try {
      note_op(ranks, op("full()"));
      check_ops(ranks);
      spsd::synchronize();
    } catch (const spsd::Error& x) {
      e = x.what();
    }
    if (e.find("pick: indices[14] = 99 (found by world rank 2") == std::string::npos)
      f.add("rank " + std::to_string(spsd::rank()) + " got \"" + e + "\"");
  });
  INFO(failures.report());
  CHECK(failures.empty());
}
