// bfloat16 and float16 conversions (core/half.hpp): every bit pattern to float and back, and
// float -> 16-bit rounding against a reference that searches the sorted 16-bit values.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include <catch2/catch.hpp>
#include "spsd/core/dtype.hpp"

using spsd::bfloat16;
using spsd::float16;

namespace {

template <class H>
bool is_nan_bits(uint16_t b) {
  return std::isnan(static_cast<float>(H::from_bits(b)));
}

// Round to nearest even by search: the finite 16-bit values sorted, with infinity standing one
// ulp above the largest (2^128 for bfloat16, 2^16 for float16), as IEEE rounding treats it.
template <class H>
class Reference {
 public:
  Reference() {
    for (uint32_t b = 0; b < 0x8000; ++b) {  // non-negative patterns, ascending in value
      const float v = static_cast<float>(H::from_bits(static_cast<uint16_t>(b)));
      if (std::isfinite(v)) values_.push_back({static_cast<double>(v), static_cast<uint16_t>(b)});
    }
    const uint16_t inf = std::numeric_limits<H>::infinity().bits;
    const double past_max = std::is_same_v<H, bfloat16> ? std::ldexp(1.0, 128) : 65536.0;
    values_.push_back({past_max, inf});
  }

  uint16_t round(float x) const {
    if (std::isnan(x)) return 0x7fff;  // any NaN; compared by class below
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::fabs(static_cast<double>(x));
    if (a >= values_.back().value) return sign | values_.back().bits;
    auto hi = std::lower_bound(values_.begin(), values_.end(), a, [](const Entry& e, double v) { return e.value < v; });
    if (hi->value == a) return sign | hi->bits;
    auto lo = hi - 1;
    const double dl = a - lo->value, dh = hi->value - a;
    if (dl < dh) return sign | lo->bits;
    if (dh < dl) return sign | hi->bits;
    return sign | ((lo->bits & 1) == 0 ? lo->bits : hi->bits);  // tie: even mantissa
  }

 private:
  struct Entry {
    double value;
    uint16_t bits;
  };
  std::vector<Entry> values_;
};

template <class H>
void check_all_patterns() {
  int nans = 0;
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const H h = H::from_bits(static_cast<uint16_t>(b));
    const float f = h;
    const H back(f);
    if (is_nan_bits<H>(static_cast<uint16_t>(b))) {
      ++nans;
      REQUIRE(std::isnan(f));
      REQUIRE(is_nan_bits<H>(back.bits));
      REQUIRE((back.bits & 0x8000) == (b & 0x8000));  // sign kept
    } else {
      INFO("bits 0x" << std::hex << b);
      REQUIRE(back.bits == b);
    }
  }
  CHECK(nans == (std::is_same_v<H, bfloat16> ? 2 * 127 : 2 * 1023));
}

template <class H>
void check_rounding(const std::vector<float>& xs) {
  static const Reference<H> ref;
  for (float x : xs) {
    const H h(x);
    INFO("x = " << std::hexfloat << x << " bits 0x" << std::hex << h.bits);
    if (std::isnan(x)) {
      REQUIRE(is_nan_bits<H>(h.bits));
    } else {
      REQUIRE(h.bits == ref.round(x));
    }
  }
}

// Edge values of H: each 16-bit value, the midpoints to its neighbours (ties), and one float ulp
// either side of each midpoint; zeros, infinities, NaN, float subnormals and the overflow edge.
template <class H>
std::vector<float> edge_values() {
  std::vector<float> xs = {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::min(), std::numeric_limits<float>::max(), 65504.0f, 65519.99f,
                           65520.0f, 65536.0f, 5.9604645e-8f, 2.9802322e-8f, 2.9802326e-8f, 1.0f, 1.00390625f,
                           1.0078125f};
  for (uint32_t b = 0; b < 0x7fff; ++b) {
    const float lo = H::from_bits(static_cast<uint16_t>(b)), hi = H::from_bits(static_cast<uint16_t>(b + 1));
    if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);  // exact: one more bit
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  return xs;
}

std::vector<float> random_values() {
  std::mt19937 gen(7);
  std::vector<float> xs;
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) xs.push_back(std::bit_cast<float>(bits(gen)));  // every exponent
  std::normal_distribution<float> normal;
  for (int i = 0; i < 100000; ++i) xs.push_back(normal(gen));
  return xs;
}

}  // namespace

TEST_CASE("every bfloat16 and float16 bit pattern converts to float and back unchanged") {
  check_all_patterns<bfloat16>();
  check_all_patterns<float16>();
}

TEST_CASE("float to bfloat16 and float16 rounds to nearest even, like the reference") {
  check_rounding<bfloat16>(edge_values<bfloat16>());
  check_rounding<float16>(edge_values<float16>());
  const std::vector<float> xs = random_values();
  check_rounding<bfloat16>(xs);
  check_rounding<float16>(xs);
}

TEST_CASE("16-bit edge cases: overflow, ties, subnormals, signed zero") {
  CHECK(bfloat16(std::numeric_limits<float>::max()).bits == 0x7f80);  // rounds up past the largest
  CHECK(float16(65504.0f).bits == 0x7bff);
  CHECK(float16(65519.0f).bits == 0x7bff);
  CHECK(float16(65520.0f).bits == 0x7c00);  // the tie above the largest goes to infinity
  CHECK(float16(1e-8f).bits == 0x0000);     // below half the least subnormal
  CHECK(float16(5.9604645e-8f).bits == 0x0001);
  CHECK(float16(-0.0f).bits == 0x8000);
  CHECK(bfloat16(-0.0f).bits == 0x8000);
  CHECK(bfloat16(1.00390625f).bits == 0x3f80);  // 1 + 2^-8: the tie goes to even (1)
  CHECK(bfloat16(1.01171875f).bits == 0x3f82);  // 1 + 3 * 2^-8: the tie goes to even (1 + 2^-6)
  CHECK(static_cast<float>(float16::from_bits(0x0001)) == std::ldexp(1.0f, -24));
  CHECK(static_cast<float>(std::numeric_limits<float16>::max()) == 65504.0f);
  CHECK(static_cast<float>(std::numeric_limits<bfloat16>::lowest()) == -static_cast<float>(std::numeric_limits<bfloat16>::max()));
  CHECK(static_cast<float>(std::numeric_limits<bfloat16>::epsilon()) == std::ldexp(1.0f, -7));
  CHECK(static_cast<float>(std::numeric_limits<float16>::epsilon()) == std::ldexp(1.0f, -10));
  CHECK(std::isinf(static_cast<float>(std::numeric_limits<float16>::infinity())));
  CHECK(std::isnan(static_cast<float>(std::numeric_limits<bfloat16>::quiet_NaN())));
  CHECK(bfloat16(3.0).bits == bfloat16(3.0f).bits);  // other arithmetic types go through float
  CHECK(float16(int64_t{2048}).bits == 0x6800);
}

TEST_CASE("the 16-bit dtypes: traits, names, sizes and printing") {
  using spsd::DType;
  STATIC_REQUIRE(spsd::dtype_of<bfloat16> == DType::kBFloat16);
  STATIC_REQUIRE(spsd::dtype_of<float16> == DType::kFloat16);
  STATIC_REQUIRE(spsd::FloatingElement<bfloat16> && spsd::FloatingElement<float16> && spsd::FloatingElement<double>);
  STATIC_REQUIRE(!spsd::FloatingElement<int32_t>);
  STATIC_REQUIRE(std::is_same_v<spsd::compute_t<bfloat16>, float> && std::is_same_v<spsd::compute_t<double>, double>);
  CHECK(spsd::size_of(DType::kBFloat16) == 2);
  CHECK(spsd::size_of(DType::kFloat16) == 2);
  CHECK(spsd::to_string(DType::kBFloat16) == "bfloat16");
  CHECK(spsd::to_string(DType::kFloat16) == "float16");
  CHECK(spsd::is_floating(DType::kFloat16));
  CHECK(spsd::is_valid(DType::kBFloat16));
  std::ostringstream os;
  os << bfloat16(1.5f) << " " << float16(-0.25f);
  CHECK(os.str() == "1.5 -0.25");
  CHECK(spsd::visit_dtype(DType::kFloat16, []<class T>() { return sizeof(T); }) == 2);
}
