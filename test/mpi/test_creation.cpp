// Communicator creation under mpirun (run at -np 4, a 2x2 mesh, and -np 9, a 3x3 one): one
// communicator per mesh-axis group a rank uses, created once, at first use; the handshake's
// messages per member; and members creating different communicators at the same point throw
// spsd::Error naming each other. Each case runs with both handshakes: the all-pairs one of small
// rank sets and the rounds of large ones (forced by set_handshake_all_pairs_limit(1)).
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <vector>

#include <spsd/spsd.hpp>
#include <spsd/comm/creation.hpp>

#include "error_matchers.hpp"

namespace {

using namespace spsd;

// rows x cols, rows the largest divisor of n up to sqrt(n): 2x2 at 4 ranks, 3x3 at 9. Reversed
// rank order gives every axis group and the placement other ordered rank sets: new communicators.
Placement square_mesh(int64_t n, bool reversed) {
  int64_t rows = 1;
  for (int64_t r = 1; r * r <= n; ++r)
    if (n % r == 0) rows = r;
  std::vector<int64_t> ranks(n);
  for (int64_t i = 0; i < n; ++i) ranks[i] = reversed ? n - 1 - i : i;
  return Placement("cpu", ranks, Shape{rows, n / rows});
}

void expect_ones(const GlobalTensor<float>& t) {
  const std::vector<float> v = t.to_local().to_vector();
  CHECK(std::all_of(v.begin(), v.end(), [](float x) { return x == 1.0f; }));
}

// Boxings along each mesh axis: a partial value is reduced along its own axis (forced: summing
// over the placement would count the other axis' replicas too), then an exchange between axes.
void run_ops(const Placement& p) {
  expect_ones(ones<float>(Shape{6, 4}, p, {sbp::partial_sum, sbp::broadcast}).to_global(p, {sbp::broadcast, sbp::broadcast}));
  expect_ones(ones<float>(Shape{6, 4}, p, {sbp::broadcast, sbp::partial_sum}).to_global(p, {sbp::broadcast, sbp::broadcast}));
  expect_ones(ones<float>(Shape{6, 6}, p, {sbp::split(0), sbp::split(1)}).to_global(p, {sbp::split(1), sbp::split(0)}));
}

// Restores the default exchange when a case ends, also by an exception.
struct AllPairsLimit {
  explicit AllPairsLimit(int64_t members) { detail::set_handshake_all_pairs_limit(members); }
  ~AllPairsLimit() { detail::set_handshake_all_pairs_limit(detail::kAllPairsHandshakeMembers); }
};

}  // namespace

TEST_CASE("one communicator per mesh-axis group, created once, at first use", "[creation]") {
  const int64_t n = world_size();
  REQUIRE(n >= 4);  // a 2-d mesh with two axes of more than one rank
  for (const bool rounds : {false, true}) {
    INFO("handshake " << (rounds ? "in rounds" : "all pairs where small"));
    AllPairsLimit limit(rounds ? 1 : detail::kAllPairsHandshakeMembers);
    const Placement p = square_mesh(n, rounds);
    REQUIRE(p.mesh().ndim() == 2);
    const CreationStats before = creation_stats();
    run_ops(p);
    const CreationStats first = creation_stats();
    CHECK(first.communicators - before.communicators >= 2);  // the two axis groups this rank is in
    // The check runs on the sorted union of the ranks converted between: both passes' placements
    // give the same rank set, whose check communicator the first pass created.
    const int64_t checks = rounds ? 0 : 1;
    CHECK(first.check_communicators - before.check_communicators == checks);
    for (int repeat = 0; repeat < 3; ++repeat) run_ops(p);
    CHECK(creation_stats() == first);  // no communicator and no handshake more
    // Whatever the ops created is among these three: then creating them adds exactly the rest.
    const std::vector<int64_t> axis0 = mesh_group(p, rank(), {0}), axis1 = mesh_group(p, rank(), {1});
    communicator(axis0);
    communicator(axis1);
    communicator(p);
    const CreationStats after = creation_stats();
    CHECK(after.communicators - before.communicators == 3);
    CHECK(after.check_communicators == first.check_communicators);
    const int64_t all_pairs = detail::handshake_all_pairs_limit();
    const int64_t messages = detail::handshake_messages(static_cast<int64_t>(axis0.size()), all_pairs) +
                             detail::handshake_messages(static_cast<int64_t>(axis1.size()), all_pairs) +
                             (1 + checks) * detail::handshake_messages(n, all_pairs);
    CHECK(after.handshake_messages_sent - before.handshake_messages_sent == messages);
    CHECK(after.handshake_messages_received - before.handshake_messages_received == messages);
  }
}

TEST_CASE("members creating different communicators at the same point throw, naming each other", "[creation]") {
  const int64_t n = world_size();
  REQUIRE(n >= 2);
  for (const bool rounds : {false, true}) {
    INFO("handshake " << (rounds ? "in rounds" : "all pairs where small"));
    AllPairsLimit limit(rounds ? 1 : detail::kAllPairsHandshakeMembers);
    // A rank set no other case uses: the world rotated by one (two, for the second pass).
    std::vector<int64_t> ranks(n);
    for (int64_t i = 0; i < n; ++i) ranks[i] = (i + (rounds ? 2 : 1)) % n;
    const int64_t me = std::find(ranks.begin(), ranks.end(), rank()) - ranks.begin();
    std::vector<int64_t> others;
    for (int64_t r = 1; r < n; ++r) others.push_back(r);
    // World rank 0 creates the data communicator of the set; the others its consistency check's.
    detail::note_op(ranks, std::make_shared<const detail::OpIdentity>("diverging_creation()"));
    if (rank() == 0) {
      CHECK_THAT(ERROR_OF(communicator(ranks)),
                 ContainsAll({"communicator: while creating communicator(world ranks " + detail::join(ranks) + ", rank " +
                                  std::to_string(me) + "): world ranks " + detail::join(others) +
                                  " were creating a different communicator at the same point"}));
    } else {
      CHECK_THAT(error_of([&] {
                   detail::check_ops(ranks);
                   synchronize();
                 }),
                 ContainsAll({"consistency check: ranks " + detail::join(ranks) + " could not compare",
                              "communicator: while creating communicator(world ranks " + detail::join(ranks) + ", rank " +
                                  std::to_string(me) + ") for consistency checks: world ranks [0] were creating a "
                                                       "different communicator at the same point"}));
    }
    // Nothing was left pending: creating the data communicator together then works.
    int64_t one = 1, total = 0;
    communicator(ranks).all_reduce(&one, &total, 1, DType::kInt64, ReduceOp::kSum);
    CHECK(total == n);
  }
}
