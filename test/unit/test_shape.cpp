#include <catch2/catch.hpp>
#include <spsd/spsd.hpp>

#include <sstream>

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

TEST_CASE("Shape access, comparison and printing", "[shape]") {
  Shape s{2, 3, 4};
  s[1] = 7;  // operator[] writes through
  CHECK(s.dims() == std::vector<int64_t>{2, 7, 4});
  CHECK(s.numel() == 56);
  CHECK_FALSE(s == Shape{2, 3, 4});
  CHECK_FALSE(Shape{2, 3} == Shape{3, 2});
  CHECK_FALSE(Shape{} == Shape{1});  // 0-d is not 1-d even with equal numel
  std::ostringstream os;
  os << Shape{1, 0};
  CHECK(os.str() == "(1, 0)");
  CHECK(contiguous_strides(Shape{}).empty());
  CHECK(contiguous_strides(Shape{5}) == std::vector<int64_t>{1});
}
