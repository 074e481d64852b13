// The shared collective suite on every rank of the mpirun job (np 1..4: world, reversed world,
// even ranks, rows and columns of the 2x2 mesh at np 4).
#include <catch2/catch.hpp>

#include "collective_suite.hpp"

using namespace spsd_test;

TEST_CASE("every collective, dtype and reduce op on the world and mesh sub-communicators", "[mpi][collectives]") {
  const Family family = GENERATE(from_range(kAllFamilies.begin(), kAllFamilies.end()));
  Failures failures;
  run_collective_suite(family, failures);
  INFO(to_string(family) << " on world rank " << spsd::rank() << " of " << spsd::world_size() << "\n"
                         << failures.report());
  CHECK(failures.empty());
}

// Every rank switches at the same point, after its queued communication ran (synchronize).
TEST_CASE("bfloat16 and float16 reductions: float32 sums rounded once, 2 bytes per element or 4 on the float32 wire",
          "[mpi][collectives]") {
  const spsd::HalfReduction mode = GENERATE(spsd::HalfReduction::kNative, spsd::HalfReduction::kFloat32Wire);
  spsd::synchronize();
  struct Restore {
    ~Restore() { spsd::set_half_reduction(spsd::HalfReduction::kNative); }
  } restore;
  spsd::set_half_reduction(mode);
  Failures failures;
  run_half_reduction_suite(failures);
  INFO(mode << " on world rank " << spsd::rank() << " of " << spsd::world_size() << "\n" << failures.report());
  CHECK(failures.empty());
}

// Regression: a rank whose own all_to_all_v counts happen to be uniform must still make the same
// MPI call as ranks whose counts are not (it once chose MPI_Alltoall and the job hung).
TEST_CASE("all_to_all_v with counts uniform on one rank only", "[collectives]") {
  const int64_t n = spsd::world_size(), me = spsd::rank();
  auto count = [](int64_t from, int64_t to) { return (from == 0 || to == 0) ? int64_t{2} : (from + to) % 3; };
  std::vector<int64_t> send_counts(n), recv_counts(n);
  for (int64_t k = 0; k < n; ++k) send_counts[k] = count(me, k), recv_counts[k] = count(k, me);
  std::vector<int64_t> send, expected;
  for (int64_t k = 0; k < n; ++k)
    for (int64_t i = 0; i < send_counts[k]; ++i) send.push_back(1000 * me + 10 * k + i);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t i = 0; i < recv_counts[k]; ++i) expected.push_back(1000 * k + 10 * me + i);
  std::vector<int64_t> recv(expected.size(), -1);
  spsd::world_communicator().all_to_all_v(send.data(), send_counts, recv.data(), recv_counts, spsd::DType::kInt64);
  CHECK(recv == expected);
}
