// Boxing under simulated ranks: every NdSbp to every NdSbp on the meshes and shapes,
// cross-placement moves, and seeded random cases. Results are compared with boxes of the
// reference tensor; bytes with the lower bound (S/B) or the plan (partial).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <random>

#include "boxing_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;

namespace {

Placement mesh_placement(const Shape& mesh, int64_t first_rank = 0) {
  std::vector<int64_t> ranks(mesh.numel());
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = first_rank + static_cast<int64_t>(i);
  return Placement("cpu", ranks, mesh);
}

using PairStats = std::map<std::pair<size_t, size_t>, CommStats>;

// Every NdSbp of `from` to every NdSbp of `to` (stride 1), or the pairs (i, j) with
// (i + j) % stride == phase: each source and each target NdSbp still appears, with every
// stride-th partner. Returns this rank's counters per pair.
template <class T>
PairStats all_pairs(const Shape& shape, const Placement& from, const Placement& to, Failures& f, size_t stride = 1,
                    size_t phase = 0) {
  Tensor<T> whole = spsd_test::reference_tensor<T>(shape);
  std::vector<NdSbp> sources = spsd_test::all_nd_sbps(from.mesh().ndim(), shape.ndim());
  std::vector<NdSbp> targets = spsd_test::all_nd_sbps(to.mesh().ndim(), shape.ndim());
  PairStats stats;
  for (size_t i = 0; i < sources.size(); ++i)
    for (size_t j = 0; j < targets.size(); ++j)
      if ((i + j) % stride == phase % stride)
        stats[{i, j}] = spsd_test::check_boxing(whole, {from, sources[i]}, {to, targets[j]}, f);
  return stats;
}

// The 16-bit type T on every stride-th pair: values exact (reference_tensor's integers and the
// lopsided pieces are exact in bfloat16 and float16) and half the bytes of float32 where the
// planner takes the same path (wide: the float32 counters of the same pairs). Returns the number
// of pairs run and of those whose bytes were compared.
template <class T>
std::pair<int64_t, int64_t> half_pairs(const Shape& shape, const Placement& from, const Placement& to,
                                       const PairStats& wide, Failures& f, size_t stride, size_t phase) {
  const std::vector<NdSbp> sources = spsd_test::all_nd_sbps(from.mesh().ndim(), shape.ndim());
  const std::vector<NdSbp> targets = spsd_test::all_nd_sbps(to.mesh().ndim(), shape.ndim());
  int64_t ran = 0, compared = 0;
  for (const auto& [ij, narrow] : all_pairs<T>(shape, from, to, f, stride, phase)) {
    ++ran;
    const Layout a{from, sources[ij.first]}, b{to, targets[ij.second]};
    compared += spsd_test::expect_half_bytes(
        f, "boxing " + shape.to_string() + " " + std::string(to_string(dtype_of<T>)) + " " + a.to_string() + " -> " +
               b.to_string() + " on rank " + std::to_string(rank()),
        shape, dtype_of<T>, a, b, wide.at(ij), narrow);
  }
  return {ran, compared};
}

// SPSD_BOXING_STRIDE=1 runs every pair on 2x2x2 too (about 24 minutes for float and int64 on 2 cores).
size_t stride_or(size_t fallback) {
  const char* s = std::getenv("SPSD_BOXING_STRIDE");
  return s ? std::max<size_t>(1, std::strtoull(s, nullptr, 10)) : fallback;
}

const std::vector<Shape> kShapes = {Shape{0}, Shape{1}, Shape{7}, Shape{8}, Shape{5, 3}, Shape{6, 4}, Shape{3, 1, 5}, Shape{4, 0, 2}};

// bfloat16 on every half_stride-th pair the float32 sweep runs (0: none), float16 on every
// kFloat16Stride-th of those.
constexpr size_t kFloat16Stride = 7;

void exhaustive_on(const Shape& mesh, const std::vector<Shape>& shapes, size_t stride = 1, size_t half_stride = 1) {
  const bool halves = half_stride > 0;
  Placement p = mesh_placement(mesh);
  for (const Shape& shape : shapes) {
    int64_t pairs = 0, compared = 0;
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(p.size()), [&](Failures& mine) {
      const PairStats wide = all_pairs<float>(shape, p, p, mine, stride);
      all_pairs<int64_t>(shape, p, p, mine, stride);
      if (!halves) return;
      const size_t bf16 = stride * half_stride, fp16 = bf16 * kFloat16Stride;
      const auto [ran, c] = half_pairs<spsd::bfloat16>(shape, p, p, wide, mine, bf16, 0);
      half_pairs<spsd::float16>(shape, p, p, wide, mine, fp16, bf16 * (shape.numel() % kFloat16Stride));
      if (rank() == 0) pairs = ran, compared = c;
    });
    INFO("mesh " << mesh << ", shape " << shape << ", pair stride " << stride << "\n" << f.report());
    CHECK(f.empty());
    // Most bfloat16 pairs take the float32 path (their bytes then compared); the S/B pairs' bytes
    // are the lower bound in either dtype (check_boxing).
    if (halves) CHECK(compared * 10 >= pairs * 9);
  }
}

}  // namespace

TEST_CASE("boxing: every NdSbp to every NdSbp on 1-d meshes", "[boxing]") {
  for (int64_t n : {1, 2, 3, 4}) exhaustive_on(Shape{n}, kShapes);
}

TEST_CASE("boxing: every NdSbp to every NdSbp on 2x2 and 2x3", "[boxing]") {
  exhaustive_on(Shape{2, 2}, kShapes, 1, 2);  // 16-bit on every other pair
  exhaustive_on(Shape{2, 3}, kShapes, 1, 3);
}

// 2x2x2 has 125 to 343 NdSbps per tensor rank: all pairs of the 1-d tensors, and by default a
// stratified subset for 2-d and 3-d tensors (every NdSbp as source and as target).
TEST_CASE("boxing: every NdSbp to every NdSbp on 2x2x2, 1-d tensors", "[boxing][slow]") {
  exhaustive_on(Shape{2, 2, 2}, {Shape{0}, Shape{1}, Shape{7}, Shape{8}}, stride_or(3), 0);
}

TEST_CASE("boxing: NdSbp pairs on 2x2x2, 2-d and 3-d tensors", "[boxing][slow]") {
  exhaustive_on(Shape{2, 2, 2}, {Shape{5, 3}, Shape{6, 4}}, stride_or(23), 0);
  exhaustive_on(Shape{2, 2, 2}, {Shape{3, 1, 5}, Shape{4, 0, 2}}, stride_or(59), 0);
}

TEST_CASE("boxing: across placements, every NdSbp pair", "[boxing]") {
  // 8 simulated ranks; ranks outside both placements must not be blocked.
  auto p1 = [](std::vector<int64_t> r) { return Placement("cpu", std::move(r)); };
  auto p2 = [](std::vector<int64_t> r, int64_t rows, int64_t cols) { return Placement("cpu", std::move(r), Shape{rows, cols}); };
  std::vector<std::pair<Placement, Placement>> pairs = {
      {p1({0, 1}), p1({2, 3})},                        // disjoint
      {p1({0, 1}), p1({1, 2})},                        // overlapping
      {p1({0, 1}), p1({2, 3, 4})},                     // 2 -> 3
      {p1({0, 1, 2}), p1({3, 4})},                     // 3 -> 2
      {p1({0}), p1({0, 1, 2, 3})},                     // one rank -> many, containing it
      {p1({5}), p1({0, 1, 2, 3, 4, 6, 7})},            // one rank -> all the others
      {p1({0, 1, 2, 3}), p1({6})},                     // many -> one
      {p1({0, 1, 2, 3}), p1({3, 2, 1, 0})},            // same ranks, reversed order
      {p1({0, 1, 2, 3}), p1({1, 2, 3, 0})},            // rotated
      {p1({0, 2, 4, 6}), p1({1, 3, 5, 7})},            // interleaved, disjoint
      {p1({0, 1, 2, 3}), p1({2, 3, 4, 5})},            // half overlap
      {p1({0, 1, 2}), p1({0, 1, 2, 3, 4, 5, 6, 7})},   // 3 -> 8
      {p1({7, 6, 5, 4, 3, 2, 1, 0}), p1({0, 1, 2})},   // 8 -> 3
      {p2({0, 1, 2, 3}, 2, 2), p1({0, 1, 2, 3})},      // 2x2 -> 1-d, same ranks
      {p2({0, 1, 2, 3}, 2, 2), p1({4, 5, 6, 7})},      // 2x2 -> 1-d, disjoint
      {p1({0, 1, 2, 3}), p2({0, 1, 2, 3}, 2, 2)},      // 1-d -> 2x2
      {p1({4, 5}), p2({0, 1, 2, 3}, 2, 2)},            // 2 -> 2x2
      {p2({0, 1, 2, 3}, 2, 2), p2({0, 2, 1, 3}, 2, 2)},  // transposed mesh
      {p2({0, 1, 2, 3}, 2, 2), p2({4, 5, 6, 7}, 2, 2)},  // 2x2 -> 2x2 disjoint
      {p2({0, 1, 2, 3}, 2, 2), p2({2, 3, 4, 5}, 2, 2)},  // 2x2 -> 2x2 overlapping
      {p2({0, 1, 2, 3, 4, 5}, 2, 3), p2({0, 1, 2, 3, 4, 5}, 3, 2)},  // 2x3 -> 3x2
      {p2({0, 1, 2, 3, 4, 5}, 2, 3), p1({6, 7})},      // 2x3 -> 2
      {p1({6, 7}), p2({0, 1, 2, 3, 4, 5}, 3, 2)},      // 2 -> 3x2
      {p2({0, 1, 2, 3}, 1, 4), p2({0, 1, 2, 3}, 4, 1)},  // 1x4 -> 4x1
      {p2({0, 1, 2, 3}, 2, 2), p1({0})},               // 2x2 -> 1
      {p1({3}), p1({4})},                              // one rank to another
      {p1({0, 1, 2, 3, 4}), p1({3, 4, 5, 6, 7})},      // 5 -> 5, overlapping by 2
      {p2({1, 3, 5, 7}, 2, 2), p2({0, 1, 2, 3}, 2, 2)},  // odd ranks -> first four
      {p1({2, 5}), p2({0, 1, 6, 7}, 2, 2)},            // scattered
      {p2({0, 1, 2, 3, 4, 5}, 3, 2), p2({2, 3, 4, 5, 6, 7}, 2, 3)},  // 3x2 -> 2x3 shifted
  };
  REQUIRE(pairs.size() >= 30);
  for (size_t k = 0; k < pairs.size(); ++k)
    for (const Shape& shape : {Shape{5, 3}, Shape{7}}) {
      const auto& [from, to] = pairs[k];
      Failures f = spsd_test::on_simulated_ranks(8, [&](Failures& mine) {
        if (shape.ndim() == 1) {
          all_pairs<int64_t>(shape, from, to, mine);
          return;
        }
        // bfloat16 on every third NdSbp pair (the phase varies with the placement pair).
        const PairStats wide = all_pairs<float>(shape, from, to, mine);
        half_pairs<spsd::bfloat16>(shape, from, to, wide, mine, 3, k);
      });
      INFO(from << " -> " << to << ", shape " << shape << "\n" << f.report());
      CHECK(f.empty());
    }
}

namespace {
// One random case: shape, dtype, two placements from a world of 8 and an NdSbp for each.
struct FuzzCase {
  Shape shape;
  int dtype;
  Layout from, to;
  std::string to_string() const {
    return "shape " + shape.to_string() + ", dtype " + std::to_string(dtype) + ", " + from.to_string() + " -> " + to.to_string();
  }
};

Placement random_placement(std::mt19937_64& rng) {
  static const std::vector<Shape> meshes = {Shape{1}, Shape{2}, Shape{3}, Shape{4}, Shape{5}, Shape{8},
                                            Shape{2, 2}, Shape{2, 3}, Shape{3, 2}, Shape{1, 3}, Shape{2, 2, 2}, Shape{2, 1, 2}};
  Shape mesh = meshes[rng() % meshes.size()];
  std::vector<int64_t> all = {0, 1, 2, 3, 4, 5, 6, 7};
  std::shuffle(all.begin(), all.end(), rng);
  return Placement("cpu", std::vector<int64_t>(all.begin(), all.begin() + mesh.numel()), mesh);
}

NdSbp random_nd_sbp(std::mt19937_64& rng, int64_t mesh_ndim, int64_t tensor_ndim) {
  std::vector<Sbp> axes;
  for (int64_t a = 0; a < mesh_ndim; ++a) {
    int64_t k = static_cast<int64_t>(rng() % (tensor_ndim + 4));
    axes.push_back(k < tensor_ndim ? sbp::split(k) : k == tensor_ndim ? sbp::broadcast : sbp::partial(static_cast<ReduceOp>(k - tensor_ndim - 1)));
  }
  return NdSbp(axes);
}

FuzzCase random_case(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> dims(rng() % 4);
  for (int64_t& d : dims) d = static_cast<int64_t>(rng() % 8);
  Shape shape(dims);
  Placement a = random_placement(rng), b = random_placement(rng);
  return {shape, static_cast<int>(rng() % 4), {a, random_nd_sbp(rng, a.mesh().ndim(), shape.ndim())},
          {b, random_nd_sbp(rng, b.mesh().ndim(), shape.ndim())}};
}

void run_case(const FuzzCase& c, Failures& f) {
  switch (c.dtype) {
    case 0: spsd_test::check_boxing(spsd_test::reference_tensor<float>(c.shape), c.from, c.to, f); break;
    case 1: spsd_test::check_boxing(spsd_test::reference_tensor<double>(c.shape), c.from, c.to, f); break;
    case 2: spsd_test::check_boxing(spsd_test::reference_tensor<int32_t>(c.shape), c.from, c.to, f); break;
    default: spsd_test::check_boxing(spsd_test::reference_tensor<int64_t>(c.shape), c.from, c.to, f); break;
  }
}
}  // namespace

// SPSD_FUZZ_SEED=<seed> replays one case (the seed a failure prints); SPSD_FUZZ_CASES sets the count.
TEST_CASE("boxing: seeded random cases", "[boxing][fuzz]") {
  const char* replay = std::getenv("SPSD_FUZZ_SEED");
  const char* count = std::getenv("SPSD_FUZZ_CASES");
  uint64_t first = replay ? std::strtoull(replay, nullptr, 10) : 20261122;
  int64_t cases = replay ? 1 : count ? std::atoll(count) : 5000;
  std::vector<int64_t> involved(8, 0);  // cases each rank took part in: proof the cases ran
  Failures f = spsd_test::on_simulated_ranks(8, [&](Failures& mine) {
    for (int64_t i = 0; i < cases; ++i) {
      FuzzCase c = random_case(first + i);
      if (c.from.placement.contains(rank()) || c.to.placement.contains(rank())) ++involved[rank()];
      Failures one;
      run_case(c, one);
      if (!one.empty()) mine.add("seed " + std::to_string(first + i) + " (" + c.to_string() + "):\n" + one.report());
    }
  });
  INFO("replay a case with SPSD_FUZZ_SEED=<seed>\n" << f.report());
  CHECK(f.empty());
  for (int64_t n : involved) CHECK(n >= cases / 4);
}
