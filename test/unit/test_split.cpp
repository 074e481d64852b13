// Balanced splitting and boxes: known values, then every small layout against a reference.
#include <catch2/catch.hpp>
#include <spsd/spsd.hpp>

#include <string>
#include <vector>

using namespace spsd;

namespace {

// Reference for one part: part k of n elements in p parts has n/p + (k < n%p) elements.
int64_t part_size(int64_t n, int64_t p, int64_t k) { return n / p + (k < n % p ? 1 : 0); }

// Row-major mesh coordinates of the rank at flat position pos.
std::vector<int64_t> coords_of(const std::vector<int64_t>& mesh, int64_t pos) {
  std::vector<int64_t> c(mesh.size());
  for (size_t a = mesh.size(); a-- > 0;) {
    c[a] = pos % mesh[a];
    pos /= mesh[a];
  }
  return c;
}

// Reference box: mesh axis 0 splits the global box, each later axis splits the current piece.
Box reference_box(const std::vector<int64_t>& dims, const std::vector<int64_t>& mesh,
                  const std::vector<Sbp>& sbps, const std::vector<int64_t>& coords) {
  Box box{std::vector<int64_t>(dims.size(), 0), dims};
  for (size_t a = 0; a < mesh.size(); ++a) {
    if (!sbps[a].is_split()) continue;
    size_t i = static_cast<size_t>(sbps[a].axis());
    int64_t n = box.end[i] - box.begin[i], offset = 0;
    for (int64_t k = 0; k < coords[a]; ++k) offset += part_size(n, mesh[a], k);
    box.begin[i] += offset;
    box.end[i] = box.begin[i] + part_size(n, mesh[a], coords[a]);
  }
  return box;
}

// Calls f(values) for every vector of `count` entries, each in [0, base), in odometer order.
template <class F>
void for_each_tuple(size_t count, int64_t base, F&& f) {
  std::vector<int64_t> values(count, 0);
  while (true) {
    f(values);
    size_t a = count;
    while (a > 0 && ++values[a - 1] == base) values[--a] = 0;
    if (a == 0) return;
  }
}

// One Sbp choice for a mesh axis and how API.md spells it.
struct SbpChoice {
  Sbp sbp;
  std::string text;
};

std::vector<SbpChoice> sbp_choices(int64_t tensor_ndim) {
  std::vector<SbpChoice> choices;
  for (int64_t i = 0; i < tensor_ndim; ++i) choices.push_back({sbp::split(i), "S(" + std::to_string(i) + ")"});
  choices.push_back({sbp::broadcast, "B"});
  choices.push_back({sbp::partial_sum, "P(sum)"});
  choices.push_back({sbp::partial_max, "P(max)"});
  choices.push_back({sbp::partial_min, "P(min)"});
  return choices;
}

// Ranks given out of order and not starting at 0, so a rank is never its mesh position.
Placement scrambled_placement(const std::vector<int64_t>& mesh) {
  int64_t n = Shape(mesh).numel();
  std::vector<int64_t> ranks(n);
  for (int64_t i = 0; i < n; ++i) ranks[i] = 3 + (n - 1 - i);
  return Placement("cpu", ranks, Shape(mesh));
}

// Keeps the first few failure descriptions (for the report) and counts them all.
struct Failures {
  std::vector<std::string> first;
  int64_t count = 0;
  void add(std::string what) {
    if (first.size() < 10) first.push_back(std::move(what));
    ++count;
  }
};

// Checks every rank's box of one layout against the reference, and that the boxes cover each
// global index exactly `copies` times (the product of the non-split mesh axes' sizes).
void check_layout_math(const std::vector<int64_t>& dims, const Placement& placement, const std::vector<Sbp>& sbps,
                       const std::string& expected_text, Failures& failures) {
  const std::vector<int64_t>& mesh = placement.mesh().dims();
  Shape shape(dims);
  NdSbp nd_sbp(sbps);
  std::string where = "shape " + shape.to_string() + " as " + expected_text + " on " + placement.to_string();
  if (nd_sbp.to_string() != expected_text) failures.add(where + ": to_string gave " + nd_sbp.to_string());

  int64_t copies = 1;
  for (size_t a = 0; a < mesh.size(); ++a) copies *= sbps[a].is_split() ? 1 : mesh[a];
  std::vector<int64_t> strides = contiguous_strides(shape);
  std::vector<int64_t> hits(static_cast<size_t>(shape.numel()), 0);

  for (int64_t pos = 0; pos < placement.size(); ++pos) {
    int64_t rank = placement.ranks()[pos];
    Box expected = reference_box(dims, mesh, sbps, coords_of(mesh, pos));
    Box got = box_of(shape, placement, nd_sbp, rank);
    std::string at = where + ", rank " + std::to_string(rank) + ": ";
    if (got != expected) {
      failures.add(at + "box_of gave " + got.to_string() + ", reference " + expected.to_string());
      continue;  // coverage below assumes an in-bounds box
    }
    if (local_shape(shape, placement, nd_sbp, rank) != expected.shape())
      failures.add(at + "local_shape differs from the box shape " + expected.shape().to_string());
    // Count every index of the box: walk it as a tuple of offsets from begin.
    Shape extent = got.shape();
    for (int64_t e = 0; e < extent.numel(); ++e) {
      int64_t flat = 0, rest = e;
      for (size_t i = dims.size(); i-- > 0;) {
        flat += (got.begin[i] + rest % extent[i]) * strides[i];
        rest /= extent[i];
      }
      ++hits[static_cast<size_t>(flat)];
    }
  }
  for (size_t flat = 0; flat < hits.size(); ++flat)
    if (hits[flat] != copies) {
      failures.add(where + ": flat index " + std::to_string(flat) + " is covered " + std::to_string(hits[flat]) +
                   " times, expected " + std::to_string(copies));
      break;
    }
}

}  // namespace

TEST_CASE("balanced_split: known values", "[split]") {
  CHECK(balanced_split(10, 4) == std::vector<int64_t>{3, 3, 2, 2});
  CHECK(balanced_split(3, 4) == std::vector<int64_t>{1, 1, 1, 0});  // zero-size parts are allowed
  CHECK(balanced_split(0, 3) == std::vector<int64_t>{0, 0, 0});
  CHECK(balanced_split(7, 1) == std::vector<int64_t>{7});
  CHECK(balanced_split(8, 4) == std::vector<int64_t>{2, 2, 2, 2});
}

TEST_CASE("balanced_range: parts are contiguous, in order, sized n/p + (k < n%p)", "[split]") {
  for (int64_t n = 0; n <= 20; ++n)
    for (int64_t p = 1; p <= 8; ++p) {
      INFO(n << " elements into " << p << " parts");
      std::vector<int64_t> sizes = balanced_split(n, p);
      REQUIRE(static_cast<int64_t>(sizes.size()) == p);
      int64_t begin = 0;
      for (int64_t k = 0; k < p; ++k) {
        Range r = balanced_range(n, p, k);
        CHECK(r.begin == begin);
        CHECK(r.size() == part_size(n, p, k));
        CHECK(sizes[k] == r.size());
        begin = r.end;
      }
      CHECK(begin == n);
    }
}

TEST_CASE("box_of: hand-computed boxes", "[split]") {
  Placement mesh("cpu", {{0, 1}, {2, 3}});
  // (S(0), S(1)): rows by mesh axis 0, columns by mesh axis 1.
  CHECK(box_of(Shape{4, 6}, mesh, {sbp::split(0), sbp::split(1)}, 1) == Box{{0, 3}, {2, 6}});
  // (S(1), S(0)): columns by mesh axis 0, so rank 1 (coords (0, 1)) gets the left columns.
  CHECK(box_of(Shape{4, 6}, mesh, {sbp::split(1), sbp::split(0)}, 1) == Box{{2, 0}, {4, 3}});
  // (S(0), S(0)) nests: 5 rows -> 3 + 2, then 3 -> 2 + 1 and 2 -> 1 + 1.
  std::vector<Box> nested;
  for (int64_t r = 0; r < 4; ++r) nested.push_back(box_of(Shape{5, 3}, mesh, {sbp::split(0), sbp::split(0)}, r));
  CHECK(nested == std::vector<Box>{Box{{0, 0}, {2, 3}}, Box{{2, 0}, {3, 3}}, Box{{3, 0}, {4, 3}}, Box{{4, 0}, {5, 3}}});
  // B and P hold the whole tensor.
  CHECK(box_of(Shape{4, 6}, mesh, {sbp::broadcast, sbp::partial_min}, 3) == Box{{0, 0}, {4, 6}});
  // Rank order is the placement's: rank 0 sits at position 2 of {{3, 1}, {0, 2}}.
  Placement scrambled("cpu", {{3, 1}, {0, 2}});
  CHECK(box_of(Shape{4, 6}, scrambled, {sbp::split(0), sbp::split(1)}, 0) == Box{{2, 0}, {4, 3}});
  // Uneven and empty: 3 elements over 4 ranks.
  Placement line("cpu", {0, 1, 2, 3});
  CHECK(box_of(Shape{3}, line, sbp::split(0), 3) == Box{{3}, {3}});
  CHECK(local_shape(Shape{3, 2}, line, sbp::split(0), 3) == Shape{0, 2});
  CHECK(local_shape(Shape{10, 2}, line, sbp::split(0), 1) == Shape{3, 2});
  CHECK(local_shape(Shape{10, 2}, line, sbp::split(0), 2) == Shape{2, 2});
  // A 0-d tensor is one element everywhere.
  CHECK(box_of(Shape{}, line, sbp::partial_sum, 2) == Box{});
}

TEST_CASE("box_of: every layout of every small shape matches the reference and covers each index", "[split]") {
  const std::vector<std::vector<int64_t>> meshes = {{1}, {2}, {3}, {4}, {2, 2}, {2, 3}, {2, 2, 2}};
  constexpr int64_t kMaxDim = 7;
  int64_t layouts = 0, expected_layouts = 0;
  for (const auto& mesh : meshes) {
    Placement placement = scrambled_placement(mesh);
    Failures failures;
    for (size_t ndim = 0; ndim <= 3; ++ndim) {
      std::vector<SbpChoice> choices = sbp_choices(static_cast<int64_t>(ndim));
      // Independent count: (kMaxDim + 1)^ndim shapes times choices^mesh axes layouts.
      int64_t shapes = 1, nd_sbps = 1;
      for (size_t i = 0; i < ndim; ++i) shapes *= kMaxDim + 1;
      for (size_t a = 0; a < mesh.size(); ++a) nd_sbps *= static_cast<int64_t>(choices.size());
      expected_layouts += shapes * nd_sbps;

      for_each_tuple(ndim, kMaxDim + 1, [&](const std::vector<int64_t>& dims) {
        for_each_tuple(mesh.size(), static_cast<int64_t>(choices.size()), [&](const std::vector<int64_t>& pick) {
          std::vector<Sbp> sbps;
          std::string text = "(";
          for (size_t a = 0; a < pick.size(); ++a) {
            sbps.push_back(choices[pick[a]].sbp);
            text += (a ? ", " : "") + choices[pick[a]].text;
          }
          check_layout_math(dims, placement, sbps, text + ")", failures);
          ++layouts;
        });
      });
    }
    INFO("mesh " << Shape(mesh) << ": " << failures.count << " failures");
    CHECK(failures.first == std::vector<std::string>{});  // prints the first failures
  }
  CHECK(layouts == expected_layouts);
}
