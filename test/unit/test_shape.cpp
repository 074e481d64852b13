#include <catch2/catch.hpp>
#include <spsd/spsd.hpp>

using namespace spsd;

TEST_CASE("Shape basics", "[shape]") {
  Shape s{4, 5};
  CHECK(s.ndim() == 2);
  CHECK(s[1] == 5);
  CHECK(s.numel() == 20);
  CHECK(s.to_string() == "(4, 5)");
  CHECK(Shape{7}.to_string() == "(7,)");
  CHECK(Shape{}.to_string() == "()");
  CHECK(Shape{}.numel() == 1);
  CHECK(Shape(std::vector<int64_t>{3, 0, 2}).numel() == 0);
  CHECK(Shape{2, 3} == Shape(std::vector<int64_t>{2, 3}));
  CHECK(contiguous_strides(Shape{2, 3, 4}) == std::vector<int64_t>{12, 4, 1});
  CHECK_THROWS_WITH(Shape({2, -1}), Catch::Contains("non-negative") && Catch::Contains("[2, -1]"));
  CHECK_THROWS_WITH(s[2], Catch::Contains("axis 2 is out of range for shape (4, 5)"));
}
