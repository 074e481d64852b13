// Communicator and runtime misuse under simulate: the shared argument catalogue, plus what
// only the in-process backend detects (calls that do not match across ranks, diverging and
// failing ranks). Ranks catch their errors; assertions run on the main thread.
#include <catch2/catch.hpp>
#include <chrono>

#include "misuse_catalogue.hpp"
#include "sim_helpers.hpp"

using namespace spsd_test;
using Catch::Matchers::Contains;
using spsd::DType;
using spsd::ReduceOp;
using Clock = std::chrono::steady_clock;

namespace {

// Every rank got an spsd::Error containing every fragment.
void check_every_rank_failed(const std::vector<std::string>& errors, const std::vector<std::string>& fragments) {
  for (size_t r = 0; r < errors.size(); ++r) {
    INFO("world rank " << r << " got: \"" << errors[r] << "\"");
    CHECK(!errors[r].empty());
    for (const std::string& f : fragments) CHECK_THAT(errors[r], Contains(f));
  }
}

// All members sum their world rank + 1 on c and check the result: c still works.
void expect_usable(spsd::Communicator& c, Failures& f) {
  int64_t mine = spsd::rank() + 1, total = 0, expected = 0;
  for (int64_t w : c.world_ranks()) expected += w + 1;
  c.all_reduce(&mine, &total, 1, DType::kInt64, ReduceOp::kSum);
  if (total != expected)
    f.add("world rank " + std::to_string(spsd::rank()) + ": all_reduce after the error gave " + std::to_string(total) +
          ", expected " + std::to_string(expected));
}

}  // namespace

TEST_CASE("misuse catalogue: each invalid call throws spsd::Error naming op, argument and values", "[sim][errors]") {
  const int n = GENERATE(1, 2, 3, 4);
  INFO(n << " simulated ranks");
  std::vector<int> cases(n, 0);
  Failures failures = on_simulated_ranks(n, [&](Failures& f) { cases[spsd::rank()] = run_misuse_catalogue(f); });
  INFO(failures.report());
  CHECK(failures.empty());
  CHECK(cases[0] >= 40);
}

TEST_CASE("simulate rejects a world size below 1", "[sim][errors]") {
  CHECK_THROWS_AS(spsd::simulate(0, [] {}), spsd::Error);
  CHECK_THROWS_WITH(spsd::simulate(0, [] {}), Contains("simulate") && Contains("world_size") && Contains("got 0"));
}

TEST_CASE("the runtime functions need a Runtime on the calling thread", "[sim][errors]") {
  CHECK_THROWS_AS(spsd::rank(), spsd::Error);
  CHECK_THROWS_WITH(spsd::rank(), Contains("rank: no spsd::Runtime is active on this thread"));
  CHECK_THROWS_WITH(spsd::world_communicator(), Contains("world_communicator: no spsd::Runtime"));
  CHECK_THROWS_WITH(spsd::reset_comm_stats(), Contains("reset_comm_stats: no spsd::Runtime"));
  CHECK_THROWS_WITH(spsd::set_timeout(std::chrono::milliseconds(5)), Contains("set_timeout: no spsd::Runtime"));
}

TEST_CASE("a second Runtime inside a simulated rank is refused and the rank keeps working", "[sim][errors]") {
  std::vector<std::string> errors = errors_by_rank(2, [] {
    int before = spsd::rank();
    try {
      spsd::Runtime second;
    } catch (const spsd::Error& e) {
      // The refused constructor must not have replaced or cleared this rank's context.
      if (spsd::rank() != before) throw spsd::Error("rank changed after the refused Runtime");
      int64_t one = 1, total = 0;
      spsd::world_communicator().all_reduce(&one, &total, 1, DType::kInt64, ReduceOp::kSum);
      if (total != 2) throw spsd::Error("world all_reduce broken after the refused Runtime");
      throw;
    }
  });
  check_every_rank_failed(errors, {"Runtime", "a Runtime is already active on this thread"});
}

// Calls that disagree across members: every member must throw, naming both calls, and the
// communicator must work again afterwards (every member left the failed call alike).
struct Mismatch {
  std::string name;
  int ranks;
  std::vector<int64_t> comm;  // world ranks of the communicator used, empty: the world
  std::function<void(spsd::Communicator&, int64_t member)> call;
  std::vector<std::string> fragments;
};

TEST_CASE("mismatched collectives across ranks raise spsd::Error on every rank", "[sim][errors]") {
  float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[16] = {};
  int64_t big[8] = {};
  using Send = std::vector<spsd::SendSpec>;
  using Recv = std::vector<spsd::RecvSpec>;
  const DType f32 = DType::kFloat32;
  const std::vector<Mismatch> cases = {
      {"all_reduce against all_gather", 2, {},
       [&](spsd::Communicator& c, int64_t m) {
         if (m == 0) c.all_reduce(in, out, 4, f32, ReduceOp::kSum);
         else c.all_gather(in, out, 2, f32);
       },
       {"different collectives", "world rank 0 called all_reduce(float32, sum, counts [4])",
        "world rank 1 called all_gather(float32, counts [2, 2])"}},
      {"all_reduce against all_gather on 2 of 3 ranks", 3, {},
       [&](spsd::Communicator& c, int64_t m) {
         if (m == 0) c.all_reduce(in, out, 4, f32, ReduceOp::kSum);
         else c.all_gather(in, out, 2, f32);
       },
       {"world rank 0 called all_reduce(", "world rank 1 called all_gather("}},
      {"all_reduce counts 4 and 5", 3, {},
       [&](spsd::Communicator& c, int64_t m) { c.all_reduce(in, out, m == 2 ? 5 : 4, f32, ReduceOp::kSum); },
       {"all_reduce", "world rank 0 called all_reduce(float32, sum, counts [4])", "world rank 2 called",
        "counts [5]"}},
      {"all_reduce sum against max", 2, {},
       [&](spsd::Communicator& c, int64_t m) { c.all_reduce(in, out, 4, f32, m ? ReduceOp::kMax : ReduceOp::kSum); },
       {"all_reduce(float32, sum", "all_reduce(float32, max"}},
      {"reduce_scatter min against sum", 2, {},
       [&](spsd::Communicator& c, int64_t m) { c.reduce_scatter(in, out, 2, f32, m ? ReduceOp::kSum : ReduceOp::kMin); },
       {"reduce_scatter(float32, min", "reduce_scatter(float32, sum"}},
      {"all_reduce float32 against int64", 2, {},
       [&](spsd::Communicator& c, int64_t m) {
         if (m == 0) c.all_reduce(in, out, 4, f32, ReduceOp::kSum);
         else c.all_reduce(big, big, 4, DType::kInt64, ReduceOp::kSum);
       },
       {"all_reduce(float32", "all_reduce(int64"}},
      {"broadcast roots 0 and 1", 2, {},
       [&](spsd::Communicator& c, int64_t m) { c.broadcast(out, 3, f32, m); },
       {"broadcast", "root 0", "root 1"}},
      {"all_gather_v counts [1, 2] against [2, 1]", 2, {},
       [&](spsd::Communicator& c, int64_t m) {
         std::vector<int64_t> counts = m ? std::vector<int64_t>{2, 1} : std::vector<int64_t>{1, 2};
         c.all_gather_v(in, out, counts, f32);
       },
       {"all_gather", "counts [1, 2]", "counts [2, 1]"}},
      {"all_to_all_v: 2 elements sent where 3 are expected", 2, {},
       [&](spsd::Communicator& c, int64_t m) {
         std::vector<int64_t> send = m ? std::vector<int64_t>{1, 1} : std::vector<int64_t>{1, 2};
         std::vector<int64_t> recv = m ? std::vector<int64_t>{3, 1} : std::vector<int64_t>{1, 1};
         c.all_to_all_v(in, send, out, recv, f32);
       },
       {"all_to_all", "world rank 0 sends 2 elements to world rank 1, which expects 3"}},
      {"send_recv: 4 elements sent, 3 received", 2, {},
       [&](spsd::Communicator& c, int64_t m) {
         if (m == 0) c.send_recv(Send{{1, in, 4}}, {}, f32);
         else c.send_recv({}, Recv{{0, out, 3}}, f32);
       },
       {"send_recv", "world rank 0 sends messages of [4] elements to world rank 1, which receives [3]"}},
      {"send_recv: two messages sent, one received", 2, {},
       [&](spsd::Communicator& c, int64_t m) {
         if (m == 0) c.send_recv(Send{{1, in, 2}, {1, in + 2, 2}}, {}, f32);
         else c.send_recv({}, Recv{{0, out, 2}}, f32);
       },
       {"send_recv", "sends messages of [2, 2] elements to world rank 1, which receives [2]"}},
      {"send_recv: a receive nobody sends", 3, {},
       [&](spsd::Communicator& c, int64_t m) { c.send_recv({}, m == 2 ? Recv{{1, out, 1}} : Recv{}, f32); },
       {"send_recv", "world rank 1 sends messages of [] elements to world rank 2, which receives [1]"}},
      // World ranks, not member indices, must be named: member 0 is world rank 2 here.
      {"on communicator [2, 1, 0]: world rank 0 calls all_gather", 3, {2, 1, 0},
       [&](spsd::Communicator& c, int64_t m) {
         if (m == 2) c.all_gather(in, out, 1, f32);
         else c.all_reduce(in, out, 3, f32, ReduceOp::kSum);
       },
       {"communicator of world ranks [2, 1, 0]", "world rank 2 called all_reduce(", "world rank 0 called all_gather("}},
  };
  for (const Mismatch& k : cases) {
    INFO(k.name);
    std::vector<Failures> after(k.ranks);
    std::vector<std::string> errors = errors_by_rank(k.ranks, [&] {
      std::vector<int64_t> world(k.ranks);
      for (int i = 0; i < k.ranks; ++i) world[i] = i;
      spsd::Communicator& c = spsd::communicator(k.comm.empty() ? world : k.comm);
      try {
        k.call(c, c.rank());
      } catch (const spsd::Error&) {
        expect_usable(c, after[spsd::rank()]);
        throw;
      }
    });
    check_every_rank_failed(errors, k.fragments);
    for (const Failures& f : after) {
      INFO(f.report());
      CHECK(f.empty());
    }
  }
}

TEST_CASE("a rank that skips a collective: the others fail within the timeout, naming it", "[sim][errors]") {
  struct Divergence {
    int ranks;
    std::vector<int64_t> comm;     // empty: the world
    std::vector<int64_t> skipping;  // world ranks that never call
    std::string missing;            // as the message lists them
  };
  const Divergence d = GENERATE(Divergence{3, {}, {2}, "world ranks [2] never arrived"},
                                Divergence{4, {}, {1, 3}, "world ranks [1, 3] never arrived"},
                                Divergence{3, {2, 1, 0}, {0}, "world ranks [0] never arrived"},
                                Divergence{4, {3, 1}, {3}, "world ranks [3] never arrived"});
  INFO(d.missing);
  const auto timeout = std::chrono::milliseconds(300);
  std::vector<std::chrono::milliseconds> second_call(d.ranks, std::chrono::milliseconds(0));
  const auto start = Clock::now();
  std::vector<std::string> errors = errors_by_rank(d.ranks, [&] {
    spsd::set_timeout(timeout);
    const int64_t me = spsd::rank();
    std::vector<int64_t> world(d.ranks);
    for (int i = 0; i < d.ranks; ++i) world[i] = i;
    const std::vector<int64_t>& ranks = d.comm.empty() ? world : d.comm;
    if (std::find(ranks.begin(), ranks.end(), me) == ranks.end()) return;
    if (std::find(d.skipping.begin(), d.skipping.end(), me) != d.skipping.end()) return;
    spsd::Communicator& c = spsd::communicator(ranks);
    float x = 1, y = 0;
    try {
      c.all_reduce(&x, &y, 1, DType::kFloat32, ReduceOp::kSum);
    } catch (const spsd::Error&) {
      // The broken communicator fails at once afterwards instead of waiting again.
      const auto again = Clock::now();
      try {
        c.barrier();
      } catch (const spsd::Error&) {
      }
      second_call[me] = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - again);
      throw;
    }
  });
  const auto elapsed = Clock::now() - start;
  CHECK(elapsed < timeout + std::chrono::seconds(3));
  for (int64_t r = 0; r < d.ranks; ++r) {
    const std::vector<int64_t>& ranks = d.comm.empty() ? std::vector<int64_t>{} : d.comm;
    bool member = ranks.empty() || std::find(ranks.begin(), ranks.end(), r) != ranks.end();
    bool skips = std::find(d.skipping.begin(), d.skipping.end(), r) != d.skipping.end();
    INFO("world rank " << r << " got: \"" << errors[r] << "\"");
    if (!member || skips) {
      CHECK(errors[r].empty());
      continue;
    }
    CHECK_THAT(errors[r], Contains("all_reduce") && Contains("timed out after 0.3 s") && Contains(d.missing));
    CHECK(second_call[r] < std::chrono::milliseconds(200));
  }
}

namespace {
struct Original : std::runtime_error {
  using std::runtime_error::runtime_error;
};
}  // namespace

TEST_CASE("a rank that throws: the others blocked in a collective fail, simulate rethrows the original",
          "[sim][errors]") {
  const bool others_catch = GENERATE(true, false);
  INFO((others_catch ? "the other ranks catch their errors" : "the other ranks let their errors escape"));
  // Repeated: which rank reaches simulate's bookkeeping first must not matter.
  for (int round = 0; round < 10; ++round) {
    constexpr int n = 4;
    std::vector<std::string> errors(n);
    const auto start = Clock::now();
    try {
      spsd::simulate(n, [&] {
        spsd::Communicator& c = spsd::world_communicator();
        if (spsd::rank() == 1) throw Original("original failure on rank 1");
        float x = 1, y = 0;
        try {
          c.all_reduce(&x, &y, 1, DType::kFloat32, ReduceOp::kSum);
        } catch (const spsd::Error& e) {
          errors[spsd::rank()] = e.what();
          if (!others_catch) throw;
        }
      });
      FAIL("simulate returned normally");
    } catch (const Original& e) {
      CHECK(std::string(e.what()) == "original failure on rank 1");
    }
    // The default timeout is a minute: only the failing rank's abort can have released the others.
    CHECK(Clock::now() - start < std::chrono::seconds(10));
    for (int r : {0, 2, 3}) {
      INFO("world rank " << r << " got: \"" << errors[r] << "\"");
      CHECK_THAT(errors[r], Contains("all_reduce") && Contains("simulated rank 1 failed") &&
                                Contains("original failure on rank 1"));
    }
  }
}

TEST_CASE("simulate rethrows an spsd::Error of one rank unchanged", "[sim][errors]") {
  CHECK_THROWS_WITH(spsd::simulate(3,
                                   [] {
                                     if (spsd::rank() == 2) throw spsd::Error("rank 2 gives up");
                                     spsd::world_communicator().barrier();
                                   }),
                    "rank 2 gives up");
}
