// Sbp, NdSbp and Box: kinds, printing, equality, and box arithmetic.
#include <catch2/catch.hpp>
#include <spsd/spsd.hpp>

#include <iterator>
#include <sstream>
#include <string>

using namespace spsd;

namespace {
template <class T>
std::string streamed(const T& value) {
  std::ostringstream os;
  os << value;
  return os.str();
}
}  // namespace

TEST_CASE("Sbp kinds, accessors and printing", "[sbp]") {
  Sbp s1 = sbp::split(1);
  CHECK(s1.is_split());
  CHECK_FALSE(s1.is_broadcast());
  CHECK_FALSE(s1.is_partial());
  CHECK(s1.axis() == 1);
  CHECK(sbp::broadcast.is_broadcast());
  CHECK(Sbp{} == sbp::broadcast);  // a default Sbp is B
  CHECK(sbp::partial_max.is_partial());
  CHECK(sbp::partial_sum.reduce_op() == ReduceOp::kSum);
  CHECK(sbp::partial_max.reduce_op() == ReduceOp::kMax);
  CHECK(sbp::partial_min.reduce_op() == ReduceOp::kMin);
  CHECK(sbp::partial(ReduceOp::kMin) == sbp::partial_min);

  CHECK(sbp::split(0).to_string() == "S(0)");
  CHECK(sbp::split(12).to_string() == "S(12)");
  CHECK(sbp::broadcast.to_string() == "B");
  CHECK(sbp::partial_sum.to_string() == "P(sum)");
  CHECK(sbp::partial_max.to_string() == "P(max)");
  CHECK(sbp::partial_min.to_string() == "P(min)");
  CHECK(streamed(sbp::split(3)) == "S(3)");
}

TEST_CASE("Sbp equality distinguishes kind, axis and op", "[sbp]") {
  const Sbp all[] = {sbp::split(0), sbp::split(1), sbp::broadcast, sbp::partial_sum, sbp::partial_max,
                     sbp::partial_min};
  for (size_t i = 0; i < std::size(all); ++i)
    for (size_t j = 0; j < std::size(all); ++j) {
      INFO(all[i] << " vs " << all[j]);
      CHECK((all[i] == all[j]) == (i == j));
    }
  CHECK(sbp::split(2) == sbp::split(2));
}

TEST_CASE("NdSbp construction, access and printing", "[sbp]") {
  NdSbp two{sbp::split(0), sbp::broadcast};
  CHECK(two.size() == 2);
  CHECK(two[0] == sbp::split(0));
  CHECK(two[1] == sbp::broadcast);
  CHECK(two.to_string() == "(S(0), B)");
  CHECK(streamed(two) == "(S(0), B)");
  CHECK_FALSE(two.has_partial());

  NdSbp one = sbp::split(0);  // an Sbp converts to a 1-d NdSbp
  CHECK(one.size() == 1);
  CHECK(one.to_string() == "(S(0))");
  CHECK(one == NdSbp{sbp::split(0)});

  NdSbp three(std::vector<Sbp>{sbp::partial_sum, sbp::split(2), sbp::partial_min});
  CHECK(three.to_string() == "(P(sum), S(2), P(min))");
  CHECK(three.has_partial());

  CHECK(two == NdSbp(std::vector<Sbp>{sbp::split(0), sbp::broadcast}));
  CHECK_FALSE(two == NdSbp{sbp::broadcast, sbp::split(0)});  // order matters
  CHECK_FALSE(two == NdSbp{sbp::split(1), sbp::broadcast});
  CHECK_FALSE(one == NdSbp{sbp::split(0), sbp::split(0)});  // length matters
}

TEST_CASE("Box printing, shape, numel and intersection", "[box]") {
  Box b{{0, 1}, {2, 5}};
  CHECK(b.to_string() == "[0:2, 1:5]");
  CHECK(streamed(b) == "[0:2, 1:5]");
  CHECK(b.ndim() == 2);
  CHECK(b.shape() == Shape{2, 4});
  CHECK(b.numel() == 8);
  CHECK_FALSE(b.empty());
  CHECK(Box{{3}, {3}}.empty());
  CHECK(Box{}.numel() == 1);  // 0-d: one element
  CHECK(Box{}.to_string() == "[]");
  CHECK(full_box(Shape{4, 6}) == Box{{0, 0}, {4, 6}});

  CHECK(intersect(b, Box{{1, 3}, {4, 9}}) == Box{{1, 3}, {2, 5}});
  CHECK(intersect(b, b) == b);
  // Disjoint boxes meet in an empty box, clamped so that no extent is negative.
  Box none = intersect(b, Box{{0, 6}, {2, 8}});
  CHECK(none.empty());
  CHECK(none.numel() == 0);
  CHECK(none.begin[1] == none.end[1]);
}

// Issue 25: a negative split axis counts from the end wherever a layout meets a shape.
TEST_CASE("negative split axes: normalize_axes and the box functions", "[sbp][negative-axis]") {
  CHECK(sbp::split(-1).axis() == -1);  // kept as written until a shape is known
  CHECK(sbp::split(-1).to_string() == "S(-1)");
  CHECK(normalize_axes(sbp::split(-1), 2) == NdSbp(sbp::split(1)));
  CHECK(normalize_axes(NdSbp{sbp::split(-2), sbp::partial_sum}, 3) == NdSbp{sbp::split(1), sbp::partial_sum});
  CHECK(normalize_axes(NdSbp{sbp::split(0), sbp::broadcast}, 2) == NdSbp{sbp::split(0), sbp::broadcast});
  CHECK(normalize_axes(sbp::split(-3), 2) == NdSbp(sbp::split(-3)));  // out of range: left for the check
  const Placement grid("cpu", {0, 1, 2, 3}, Shape{2, 2});
  const Shape shape{5, 7};
  for (int64_t r = 0; r < 4; ++r) {
    CHECK(box_of(shape, grid, {sbp::split(-1), sbp::split(-2)}, r) ==
          box_of(shape, grid, {sbp::split(1), sbp::split(0)}, r));
    CHECK(local_shape(shape, grid, {sbp::split(-1), sbp::split(1)}, r) ==
          local_shape(shape, grid, {sbp::split(1), sbp::split(1)}, r));
  }
  CHECK(boxes_of(shape, grid, {sbp::split(-2), sbp::broadcast}) == boxes_of(shape, grid, {sbp::split(0), sbp::broadcast}));
  CHECK_FALSE(fits(shape, grid.mesh(), {sbp::split(-1), sbp::broadcast}));  // the checks take normalized layouts
}
