// Boxing and global tensors under mpirun: the shared rank-side suite on the world's 1-d mesh,
// on a 2x2 mesh when there are 4 ranks, and across placements; every rank asserts its own findings.
#include <catch2/catch.hpp>

#include "boxing_suite.hpp"
#include "reuse_suite.hpp"

using namespace spsd;
using spsd_test::Failures;

namespace {
std::vector<int64_t> first_ranks(int64_t n) {
  std::vector<int64_t> r(n);
  for (int64_t i = 0; i < n; ++i) r[i] = i;
  return r;
}

template <class T>
void all_pairs(const Shape& shape, const Placement& from, const Placement& to, Failures& f) {
  Tensor<T> whole = spsd_test::reference_tensor<T>(shape);
  for (const NdSbp& a : spsd_test::all_nd_sbps(from.mesh().ndim(), shape.ndim()))
    for (const NdSbp& b : spsd_test::all_nd_sbps(to.mesh().ndim(), shape.ndim()))
      spsd_test::check_boxing(whole, {from, a}, {to, b}, f);
}

// float32 and bfloat16 on every pair: bfloat16 exact (the reference's integers and lopsided
// pieces are exact), with half the bytes where the planner takes the float32 path.
void float_and_bfloat16_pairs(const Shape& shape, const Placement& from, const Placement& to, Failures& f) {
  Tensor<float> whole = spsd_test::reference_tensor<float>(shape);
  Tensor<spsd::bfloat16> narrow = spsd_test::reference_tensor<spsd::bfloat16>(shape);
  for (const NdSbp& a : spsd_test::all_nd_sbps(from.mesh().ndim(), shape.ndim()))
    for (const NdSbp& b : spsd_test::all_nd_sbps(to.mesh().ndim(), shape.ndim())) {
      const Layout la{from, a}, lb{to, b};
      const CommStats wide = spsd_test::check_boxing(whole, la, lb, f);
      spsd_test::expect_half_bytes(f, "boxing " + shape.to_string() + " bfloat16 " + la.to_string() + " -> " +
                                          lb.to_string() + " on rank " + std::to_string(rank()),
                                   shape, DType::kBFloat16, la, lb, wide, spsd_test::check_boxing(narrow, la, lb, f));
    }
}
}  // namespace

TEST_CASE("mpi boxing: every NdSbp pair on the world (1-d, uneven when -np 3)", "[boxing]") {
  Placement world("cpu", first_ranks(world_size()));
  Failures f;
  for (const Shape& shape : {Shape{7}, Shape{5, 3}, Shape{0}}) {
    float_and_bfloat16_pairs(shape, world, world, f);
    all_pairs<int64_t>(shape, world, world, f);
  }
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("mpi boxing: every NdSbp pair on a 2x2 mesh", "[boxing]") {
  if (world_size() != 4) return;
  Placement grid("cpu", {{0, 1}, {2, 3}});
  Failures f;
  float_and_bfloat16_pairs(Shape{5, 3}, grid, grid, f);
  all_pairs<int64_t>(Shape{3, 1, 5}, grid, grid, f);
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("mpi boxing: across placements", "[boxing]") {
  const int64_t n = world_size();
  if (n < 2) return;
  std::vector<std::pair<Placement, Placement>> pairs = {
      {Placement("cpu", {0}), Placement("cpu", first_ranks(n))},
      {Placement("cpu", first_ranks(n)), Placement("cpu", {n - 1})},
      {Placement("cpu", {0}), Placement("cpu", {n - 1})},
  };
  if (n >= 3) pairs.push_back({Placement("cpu", {0, 1}), Placement("cpu", {1, 2})});
  if (n == 3) pairs.push_back({Placement("cpu", {0, 1, 2}), Placement("cpu", {2, 1})});
  if (n == 4) {
    pairs.push_back({Placement("cpu", {0, 1}), Placement("cpu", {2, 3})});
    pairs.push_back({Placement("cpu", {{0, 1}, {2, 3}}), Placement("cpu", {0, 1, 2, 3})});
    pairs.push_back({Placement("cpu", {0, 1}), Placement("cpu", {1, 2, 3})});
  }
  Failures f;
  for (const auto& [from, to] : pairs) all_pairs<float>(Shape{5, 3}, from, to, f);
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("mpi randn is the same for every layout", "[random]") {
  const Shape shape{6, 5};
  Placement world("cpu", first_ranks(world_size()));
  std::vector<double> reference = randn<double>(shape, world, sbp::broadcast, 9).full().to_vector();
  Failures f;
  for (const NdSbp& nd : spsd_test::all_nd_sbps(1, 2))
    spsd_test::expect_elements(f, "randn " + nd.to_string(), randn<double>(shape, world, nd, 9).full().data(), reference);
  // And equal to the single-rank values, computed on every rank alone through philox.
  for (int64_t g = 0; g < shape.numel(); ++g)
    if (reference[g] != philox::normal<double>(9, g)) f.add("randn differs from philox at " + std::to_string(g));
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("mpi from_host detects different data on every rank", "[errors]") {
  if (world_size() < 2) return;
  Placement world("cpu", first_ranks(world_size()));
  Failures f;
  spsd_test::expect_error(f, "from_host", [&] {
    from_host(Tensor<int64_t>::from_vector({2}, {1, rank() == 1 ? 5 : 2}), world, sbp::split(0));
  }, {"from_host", "ranks [1]"});
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("mpi 16-bit: moves and reductions of bfloat16 and float16", "[boxing]") {
  Placement world("cpu", first_ranks(world_size()));
  Failures f;
  auto b = from_host(spsd_test::reference_tensor<spsd::bfloat16>(Shape{6}), world, sbp::split(0)).full();
  auto h = ones<spsd::float16>(Shape{6}, world, sbp::partial_sum).to_global(world, sbp::broadcast).full();
  if (b.to_vector() != spsd_test::reference_tensor<spsd::bfloat16>(Shape{6}).to_vector())
    f.add("bfloat16 values changed by an all-gather");
  if (static_cast<float>(h.to_vector()[5]) != 1.0f)
    f.add("the sum of float16 ones (one holder, zero padding elsewhere) is " +
          std::to_string(static_cast<float>(h.to_vector()[5])));
  INFO(f.report());
  CHECK(f.empty());
}

// Boxing reuse (tensor/boxed_copies.hpp) under mpirun -np 4: the suite of reuse_suite.hpp.
TEST_CASE("mpi boxing reuse: the reuse suite on 4 ranks", "[boxing][reuse]") {
  if (world_size() != 4) return;
  Failures f;
  spsd_test::reuse_layer_norm_backward(f);
  spsd_test::reuse_copy_invalidates(f);
  spsd_test::reuse_optimizer_invalidates(f);
  spsd_test::reuse_empty_pieces_and_outside_ranks(f);
  spsd_test::reuse_entries_freed(f);
  spsd_test::reuse_eviction(f);
  spsd_test::reuse_gpt_bitwise(f);
  INFO(f.report());
  CHECK(f.empty());
  const std::string error = spsd_test::reuse_planted_divergence();
  INFO(error);
  CHECK(error.find("reusing the boxed input 0") != std::string::npos);
}
