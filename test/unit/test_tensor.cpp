// Local Tensor<T>: undefined, zero-filled and from-vector tensors, shared storage, printing.
#include <catch2/catch.hpp>
#include <spsd/spsd.hpp>

#include <cstdint>
#include <sstream>
#include <vector>

using namespace spsd;

namespace {
// 1, 2, 3, ... as T: values that differ from the zero fill.
template <class T>
std::vector<T> counting(int64_t n) {
  std::vector<T> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(i + 1);
  return v;
}
}  // namespace

TEMPLATE_TEST_CASE("Tensor: default is undefined with no elements", "[tensor]", float, double, int32_t, int64_t) {
  Tensor<TestType> t;
  CHECK_FALSE(t.defined());
  CHECK(t.shape() == Shape{});
  CHECK(t.numel() == 0);  // not Shape{}.numel(): there is no storage
  CHECK(t.data() == nullptr);
  CHECK(t.to_vector().empty());
  CHECK(t.device_type() == DeviceType::kCPU);
  CHECK(t.dtype() == dtype_of<TestType>);
}

TEMPLATE_TEST_CASE("Tensor: from a shape is zero-filled", "[tensor]", float, double, int32_t, int64_t) {
  Tensor<TestType> t(Shape{2, 3});
  CHECK(t.defined());
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.numel() == 6);
  CHECK(t.to_vector() == std::vector<TestType>(6, TestType{0}));

  Tensor<TestType> empty(Shape{0, 4});  // zero-size is a defined tensor with no elements
  CHECK(empty.defined());
  CHECK(empty.numel() == 0);
  CHECK(empty.to_vector().empty());

  Tensor<TestType> scalar(Shape{});
  CHECK(scalar.numel() == 1);
  CHECK(scalar.to_vector() == std::vector<TestType>{TestType{0}});
}

TEMPLATE_TEST_CASE("Tensor: from_vector and to_vector round trip", "[tensor]", float, double, int32_t, int64_t) {
  std::vector<TestType> values = counting<TestType>(12);
  Tensor<TestType> t = Tensor<TestType>::from_vector(Shape{3, 4}, values);
  CHECK(t.shape() == Shape{3, 4});
  CHECK(t.numel() == 12);
  CHECK(t.to_vector() == values);
  // data() is the row-major buffer itself.
  const Tensor<TestType>& ct = t;
  REQUIRE(ct.data() == t.data());
  CHECK(ct.data()[1 * 4 + 2] == values[6]);
  t.data()[0] = TestType{42};
  CHECK(t.to_vector()[0] == TestType{42});
}

TEST_CASE("Tensor: copies share storage", "[tensor]") {
  auto a = Tensor<int64_t>::from_vector(Shape{2}, {1, 2});
  Tensor<int64_t> b = a;
  CHECK(b.data() == a.data());
  b.data()[1] = 7;
  CHECK(a.to_vector() == std::vector<int64_t>{1, 7});
  Tensor<int64_t> c(Shape{2});  // a new tensor gets new storage
  CHECK(c.data() != a.data());
}

TEST_CASE("Tensor: operator<< prints shape and values", "[tensor]") {
  auto print = [](const auto& t) {
    std::ostringstream os;
    os << t;
    return os.str();
  };
  CHECK(print(Tensor<int32_t>::from_vector(Shape{2, 2}, {1, 2, 3, 4})) == "Tensor(2, 2) [1, 2, 3, 4]");
  CHECK(print(Tensor<double>::from_vector(Shape{3}, {0.5, -1, 2})) == "Tensor(3,) [0.5, -1, 2]");
  CHECK(print(Tensor<float>()) == "Tensor() []");
}
