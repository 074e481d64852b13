// bfloat16 and float16 beyond the shared suites (issue 24, Tests): cast between every pair of the
// six dtypes on known values and in every layout, the partial-sum decision of cast, 16-bit
// rand/randn against the rounded float values, and autograd through casts and through a 16-bit
// computation.
//
// References are written here, not taken from the library: 16-bit rounding by scaling to an
// integer and std::nearbyint (ties to even) in double; float -> integer by the documented rule
// (truncate, saturate, NaN -> 0); plus literal spot values (ties, overflow, saturation).
//
// Tolerances:
//   cast of known values, cast of non-P(sum) layouts, randn/rand: exact (bits).
//   cast of P(sum) between floating types: every piece exactly the converted input piece; the
//     reduced result within (n u + 2^-23) (|x| + 9/8) of the exact value x, u the target's unit
//     roundoff (2^-8 bfloat16, 2^-11 float16, 2^-24 float, 2^-53 double), n <= 4 pieces: each
//     piece rounds once (cast.hpp's bound u sum|p_i|, sum|p_i| <= |x| + 9/8 for these pieces) and
//     the reduction of the cast pieces rounds each pairwise combine (the comm backends at the time
//     of writing; one rounding of a float32 sum is within it); 2^-23: double -> 16-bit rounds
//     through float.
//   cast autograd: the gradient of cast<U>(x) is cast<T>(g), exact; finite differences of a
//     double -> float -> double chain with h = 1e-3: |fd - analytic| <= 1e-3 (1 + |analytic|)
//     (moving x_j changes one float term of the loss, rounded three times by at most 2^-24
//     relative, |w r| < 5: below 1e-6 over 2h = 2e-3, plus h^2 |f^(3)| / 6 ~ 2e-7; seen: 2e-5).
//   a bfloat16 / float16 MLP (matmul, gelu, relu, softmax, cross_entropy, sum, mean) against the
//     float32 computation of the same 16-bit inputs: per tensor, max |g16 - g32| <=
//     32 u max |g32| (about 14 rounded ops between input and gradient, each within u of its
//     float value, plus the P(sum) pieces of split matmuls on the 2x2 mesh; seen: 7.5 u); the
//     loss within 32 u |loss32|.
#include <catch2/catch.hpp>
#include <barrier>
#include <cmath>
#include <cstring>
#include <limits>

#include "boxing_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;
using spsd_test::mesh_placement;
using spsd_test::show;
using BF16 = spsd::bfloat16;  // spsd::: OpenBLAS declares a global bfloat16
using FP16 = spsd::float16;

namespace {

// ---------------------------------------------------------------------------------------------
// The six element types.

template <class F>
void for_each_dtype(F&& f) {
  f.template operator()<float>();
  f.template operator()<double>();
  f.template operator()<int32_t>();
  f.template operator()<int64_t>();
  f.template operator()<BF16>();
  f.template operator()<FP16>();
}

template <class T>
std::string name_of() {
  return std::string(spsd::to_string(dtype_of<T>));
}

// 16-bit bits, as an integer; other types' values as doubles (for messages).
template <class T>
uint16_t bits_of(T h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

// ---------------------------------------------------------------------------------------------
// Reference conversions.

// Round-to-nearest-even of the float f to a format of `digits` significant bits, least normal
// exponent emin and largest finite value max_finite (bfloat16: 8, -126, (2 - 2^-7) 2^127; float16:
// 11, -14, 65504), in double arithmetic (every step exact).
double round_to_format(float f, int digits, int emin, double max_finite) {
  const double x = f;
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  const int e = std::max(std::ilogb(x), emin);  // exponent of the quantum's binade (subnormals: emin)
  const double quantum = std::ldexp(1.0, e - (digits - 1));
  const double r = std::nearbyint(x / quantum) * quantum;  // default rounding mode: ties to even
  if (std::abs(r) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r == 0 ? std::copysign(0.0, x) : r;
}

template <class T>
double as_double(T v) {
  if constexpr (is_half_v<T>) return static_cast<float>(v);
  else return static_cast<double>(v);
}

// The expected value of converting v (From) to To, as To.
template <class To, class From>
To expected_convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_integral_v<To> && std::is_integral_v<From>) {
    return static_cast<To>(v);  // modulo 2^bits (C++20)
  } else if constexpr (std::is_integral_v<To>) {
    const double d = as_double(v);
    if (std::isnan(d)) return To{0};
    if (d >= std::ldexp(1.0, 8 * sizeof(To) - 1)) return std::numeric_limits<To>::max();
    if (d < -std::ldexp(1.0, 8 * sizeof(To) - 1)) return std::numeric_limits<To>::min();
    return static_cast<To>(std::trunc(d));
  } else if constexpr (is_half_v<To>) {
    // Through float: exact from a 16-bit type, rounded from double and the integers.
    float f;
    if constexpr (is_half_v<From>) f = static_cast<float>(v);
    else f = static_cast<float>(v);
    const double r = std::is_same_v<To, BF16> ? round_to_format(f, 8, -126, 0x1.fep127)
                                              : round_to_format(f, 11, -14, 65504.0);
    return To(static_cast<float>(r));  // r is a To value: exact
  } else if constexpr (is_half_v<From>) {
    return static_cast<To>(static_cast<float>(v));  // exact
  } else {
    return static_cast<To>(v);  // to nearest
  }
}

// Equal as values of T, NaN equal to NaN, and zeros of the same sign.
template <class T>
bool same_value(T got, T want) {
  if constexpr (std::is_integral_v<T>) {
    return got == want;
  } else {
    const double g = as_double(got), w = as_double(want);
    if (std::isnan(g) || std::isnan(w)) return std::isnan(g) && std::isnan(w);
    return g == w && std::signbit(g) == std::signbit(w);
  }
}

template <class T>
std::string show_value(T v) {
  if constexpr (is_half_v<T>) return show(static_cast<float>(v)) + " (bits " + std::to_string(bits_of(v)) + ")";
  else return show(v);
}

// The known inputs of a source type: edges of every target (ties, overflow, subnormals, integer
// limits, NaN and infinities for the floating types).
template <class T>
std::vector<T> known_values() {
  if constexpr (std::is_integral_v<T>) {
    const std::vector<int64_t> v = {0, 1, -1, 7, -7, 255, 256, 257, 259, 2049, 2051, 65504, 65519, 65520, 70000,
                                    (1 << 24) + 1, -(1 << 24) - 3, 2147483647, -2147483647 - 1,
                                    (int64_t{1} << 32) + 5, (int64_t{1} << 53) + 1,
                                    std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
    std::vector<T> out;
    for (int64_t x : v) out.push_back(static_cast<T>(x));
    return out;
  } else {
    const double inf = std::numeric_limits<double>::infinity();
    const std::vector<double> v = {0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -2.5, 3.7, -3.7,
                                   1 + 0x1p-8, 1 + 3 * 0x1p-8, -(1 + 0x1p-8),  // bfloat16 ties
                                   1 + 0x1p-11, 1 + 3 * 0x1p-11,             // float16 ties
                                   1 + 0x1p-8 + 0x1p-30,  // float: a tie for bfloat16 after the first rounding
                                   65504, 65519.99, 65520, -65520, 1e10, -1e10, 3e38, 0x1.fep127, 0x1.ffp127,
                                   2147483520.0, 2147483648.0, -2147483648.0, -2147483904.0, 0x1p63, -0x1p63, 1e20,
                                   6e-8, 0x1p-25, 0x1.8p-25, 1e-8, 1e-40, -1e-40, 1e-300, 1e300,
                                   std::numeric_limits<double>::quiet_NaN(), inf, -inf};
    std::vector<T> out;
    for (double x : v) out.push_back(static_cast<T>(x));
    return out;
  }
}

template <class T>
Tensor<T> tensor_of(std::vector<T> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor<T>::from_vector(Shape{n}, std::move(v));
}

// cast<To> of every known From value on one rank, element by element against the reference.
template <class From, class To>
void check_known_values(const Placement& one, Failures& f) {
  const std::vector<From> in = known_values<From>();
  const std::vector<To> got = cast<To>(from_host(tensor_of(in), one, sbp::broadcast)).full().to_vector();
  for (size_t i = 0; i < in.size(); ++i) {
    const To want = expected_convert<To>(in[i]);
    if (!same_value(got[i], want))
      f.add("cast " + name_of<From>() + " -> " + name_of<To>() + " of " + show_value(in[i]) + " (element " +
            std::to_string(i) + "): got " + show_value(got[i]) + ", expected " + show_value(want));
  }
}

// One literal value: cast<To>(From v) must be want (written out, not computed).
template <class To, class From>
void spot(const Placement& one, Failures& f, From v, To want) {
  const To got = cast<To>(from_host(tensor_of(std::vector<From>{v}), one, sbp::broadcast)).full().to_vector()[0];
  if (!same_value(got, want))
    f.add("cast " + name_of<From>() + " -> " + name_of<To>() + " of " + show_value(v) + ": got " + show_value(got) +
          ", expected " + show_value(want));
}

}  // namespace

TEST_CASE("cast between every pair of the six dtypes on known values", "[half][cast]") {
  Failures failures = spsd_test::on_simulated_ranks(1, [](Failures& f) {
    const Placement one("cpu", {0});
    for_each_dtype([&]<class From>() { for_each_dtype([&]<class To>() { check_known_values<From, To>(one, f); }); });

    const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    // Ties to even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 in bfloat16.
    spot<BF16>(one, f, 1.0f + 0x1p-8f, BF16(1.0f));
    spot<BF16>(one, f, 1.0f + 3 * 0x1p-8f, BF16(1.0f + 0x1p-6f));
    spot<BF16>(one, f, -(1.0f + 0x1p-8f), BF16(-1.0f));
    spot<FP16>(one, f, 1.0f + 0x1p-11f, FP16(1.0f));
    spot<FP16>(one, f, 1.0f + 3 * 0x1p-11f, FP16(1.0f + 0x1p-9f));
    // double -> bfloat16 rounds through float: 1 + 2^-8 + 2^-30 becomes the tie 1 + 2^-8, then 1.
    spot<BF16>(one, f, 1.0 + 0x1p-8 + 0x1p-30, BF16(1.0f));
    // Overflow: 65520 is halfway between 65504 and 2^16 (odd mantissa): infinity.
    spot<FP16>(one, f, 65520.0f, FP16(static_cast<float>(inf)));
    spot<FP16>(one, f, 65519.0f, FP16(65504.0f));
    spot<FP16>(one, f, 0x1p-24f, FP16::from_bits(1));  // the least subnormal
    spot<FP16>(one, f, 0x1p-25f, FP16(0.0f));          // half of it: ties to even (0)
    spot<FP16>(one, f, 0x1.8p-25f, FP16::from_bits(1));
    // bfloat16's largest finite value (2 - 2^-7) 2^127 has an odd mantissa: the midpoint above it
    // rounds to infinity, anything below the midpoint to it.
    spot<BF16>(one, f, 0x1.ffp127f, BF16(static_cast<float>(inf)));
    spot<BF16>(one, f, 0x1.fefffep127f, BF16::from_bits(0x7f7f));
    spot<float>(one, f, 1e300, static_cast<float>(inf));
    spot<float>(one, f, BF16::from_bits(0x3f81), 1.0078125f);  // 1 + 2^-7
    // float -> integer: truncation, saturation, NaN -> 0.
    spot<int32_t>(one, f, 3.7f, 3);
    spot<int32_t>(one, f, -3.7, -3);
    spot<int32_t>(one, f, 1e10f, std::numeric_limits<int32_t>::max());
    spot<int32_t>(one, f, -1e10, std::numeric_limits<int32_t>::min());
    spot<int32_t>(one, f, 2147483648.0f, std::numeric_limits<int32_t>::max());
    spot<int32_t>(one, f, 2147483520.0f, 2147483520);
    spot<int32_t>(one, f, static_cast<float>(nan), 0);
    spot<int64_t>(one, f, -inf, std::numeric_limits<int64_t>::min());
    spot<int64_t>(one, f, BF16(static_cast<float>(inf)), std::numeric_limits<int64_t>::max());
    spot<int64_t>(one, f, FP16(-2.5f), int64_t{-2});
    // integer -> integer modulo 2^32; integer -> 16-bit through float, ties to even.
    spot<int32_t>(one, f, (int64_t{1} << 32) + 5, 5);
    spot<int32_t>(one, f, int64_t{1} << 31, std::numeric_limits<int32_t>::min());
    spot<BF16>(one, f, int32_t{257}, BF16(256.0f));
    spot<BF16>(one, f, int32_t{259}, BF16(260.0f));
    spot<FP16>(one, f, int32_t{2049}, FP16(2048.0f));
    spot<FP16>(one, f, int64_t{70000}, FP16(static_cast<float>(inf)));
  });
  INFO(failures.report());
  CHECK(failures.empty());
}

namespace {

// ---------------------------------------------------------------------------------------------
// cast in every layout.

template <class T>
constexpr double unit_roundoff() {
  if constexpr (std::is_same_v<T, BF16>) return 0x1p-8;
  else if constexpr (std::is_same_v<T, FP16>) return 0x1p-11;
  else if constexpr (std::is_same_v<T, float>) return 0x1p-24;
  else return 0x1p-53;
}

// The whole tensor of a source type: for the floating types values whose lopsided P(sum) pieces
// (build_layout with parts that are multiples of 1/16) are exact in the type: multiples of 1/16
// for the 16-bit types, arbitrary float / double values below 3 in magnitude otherwise (v - S is
// exact: S is a multiple of 1/16 below 1, the result below 4); small integers for the integers.
template <class T>
Tensor<T> cast_source(const Shape& shape) {
  if constexpr (std::is_integral_v<T>) {
    return spsd_test::reference_tensor<T>(shape);
  } else {
    std::vector<T> v(shape.numel());
    for (int64_t g = 0; g < shape.numel(); ++g) {
      double x = 3.0 * philox::uniform<double>(41, static_cast<uint64_t>(g)) * 2 - 3.0;
      if constexpr (is_half_v<T>) x = std::round(x * 16) / 16;
      v[g] = static_cast<T>(x);
    }
    return Tensor<T>::from_vector(shape, std::move(v));
  }
}

constexpr double kPartScale = 1.0 / 16;

// The layout of cast<To> of an input in layout `in`: the input's (cast<T> of a T returns the
// input), except where a partial must be reduced first: P(sum) unless both types are floating,
// and P(max)/P(min) for int64 -> int32 (modulo 2^32 is not monotone). Then none of those is
// left, and every axis is the input's Sbp, a split or B (the dispatcher takes the cheapest: a
// reduce-scatter to S(1) for (5, 3) on 4 ranks, where cast.hpp used to say "to B", and on 2x2
// a P(max) or P(min) beside the P(sum) is reduced too).
template <class From, class To>
bool must_reduce(const Sbp& s) {
  if (std::is_same_v<From, To> || !s.is_partial()) return false;
  if (s == sbp::partial_sum) return std::is_integral_v<From> || std::is_integral_v<To>;
  return std::is_integral_v<From> && std::is_integral_v<To> && sizeof(To) < sizeof(From);
}

template <class From, class To>
bool cast_layout_ok(const NdSbp& in, const NdSbp& out) {
  if (in.size() != out.size()) return false;
  if (std::none_of(in.begin(), in.end(), must_reduce<From, To>)) return in == out;
  for (size_t a = 0; a < in.size(); ++a)
    if (must_reduce<From, To>(out[a]) || !(out[a] == in[a] || out[a].is_split() || out[a] == sbp::broadcast)) return false;
  return true;
}

template <class From, class To>
void check_cast_layout(const Tensor<From>& whole, const Layout& layout, int64_t members, Failures& f) {
  const std::string what = "cast " + name_of<From>() + " -> " + name_of<To>() + " of " + layout.to_string() +
                           " on rank " + std::to_string(rank());
  const GlobalTensor<From> x = spsd_test::build_layout(whole, layout, kPartScale);
  const GlobalTensor<To> y = cast<To>(x);
  if (!cast_layout_ok<From, To>(layout.nd_sbp, y.nd_sbp()))
    f.add(what + ": output layout " + y.nd_sbp().to_string() +
          ", expected the input's, with P(sum) reduced unless both types are floating (P(max)/P(min) too for "
          "int64 -> int32)");
  const std::vector<To> got = y.full().to_vector();
  const std::vector<From> w = whole.to_vector();
  const bool summed = !std::is_same_v<From, To> && std::any_of(y.nd_sbp().begin(), y.nd_sbp().end(), [](const Sbp& s) {
    return s == sbp::partial_sum;
  });
  if (!summed) {
    // Every piece holds values of the whole (P(max)/P(min): no greater / no smaller), or the
    // P(sum) was reduced before the cast: the result is the whole converted, exactly (the
    // sources' pieces and every partial sum of them are exact, cast_source).
    int64_t bad = 0;
    for (size_t g = 0; g < w.size(); ++g)
      if (!same_value(got[g], expected_convert<To>(w[g])) && bad++ < 3)
        f.add(what + ": element " + std::to_string(g) + ": got " + show_value(got[g]) + ", expected " +
              show_value(expected_convert<To>(w[g])) + " (the whole " + show_value(w[g]) + " converted)");
    return;
  }
  // P(sum) between floating types: each piece converted on its own...
  if (x.to_local().defined()) {
    const std::vector<From> in_piece = x.to_local().to_vector();
    const std::vector<To> out_piece = y.to_local().to_vector();
    for (size_t i = 0; i < in_piece.size(); ++i)
      if (!same_value(out_piece[i], expected_convert<To>(in_piece[i]))) {
        f.add(what + ": local element " + std::to_string(i) + ": got " + show_value(out_piece[i]) +
              ", expected the piece " + show_value(in_piece[i]) + " converted, " +
              show_value(expected_convert<To>(in_piece[i])));
        break;
      }
  }
  // ... and the reduced value within the bound of the header.
  const double u = unit_roundoff<To>();
  for (size_t g = 0; g < w.size(); ++g) {
    const double exact = as_double(w[g]);
    const double bound = (static_cast<double>(members) * u + 0x1p-23) * (std::abs(exact) + 18 * kPartScale);
    if (!(std::abs(as_double(got[g]) - exact) <= bound)) {
      f.add(what + ": element " + std::to_string(g) + ": got " + show_value(got[g]) + ", exact " + show(exact) +
            ", allowed error " + show(bound));
      return;
    }
  }
}

template <class From, class To>
void check_cast_every_layout(const Placement& p, const Shape& shape, Failures& f) {
  const Tensor<From> whole = cast_source<From>(shape);
  for (const NdSbp& nd : spsd_test::all_nd_sbps(p.mesh().ndim(), shape.ndim()))
    check_cast_layout<From, To>(whole, {p, nd}, p.size(), f);
}

}  // namespace

TEST_CASE("cast keeps the layout, P(sum) only between floating types, P(max)/P(min) unless it wraps",
          "[half][cast]") {
  for (const Shape& mesh : {Shape{4}, Shape{2, 2}}) {
    Failures failures = spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()), [&](Failures& f) {
      const Placement p = mesh_placement(mesh);
      for_each_dtype([&]<class From>() {
        for_each_dtype([&]<class To>() { check_cast_every_layout<From, To>(p, Shape{5, 3}, f); });
      });
    });
    INFO("mesh " << mesh << "\n" << failures.report());
    CHECK(failures.empty());
  }
}

namespace {

// ---------------------------------------------------------------------------------------------
// rand / randn.

// randn<T> (or rand<T>) in layout nd: the whole (and every rank's piece, but for P(max)/P(min)
// padding), bit for bit, equal to cast<T> of the float tensor in the same layout, and the whole
// equal to T(the philox value in float).
template <class T>
void check_random(const Placement& p, const Shape& shape, const NdSbp& nd, bool normal, Failures& f) {
  const uint64_t seed = 5;
  const std::string what = std::string(normal ? "randn<" : "rand<") + name_of<T>() + "> " + nd.to_string() +
                           " on mesh " + p.mesh().to_string() + " rank " + std::to_string(rank());
  const GlobalTensor<T> h = normal ? randn<T>(shape, p, nd, seed) : rand<T>(shape, p, nd, seed);
  const GlobalTensor<float> wide = normal ? randn<float>(shape, p, nd, seed) : rand<float>(shape, p, nd, seed);
  const GlobalTensor<T> rounded = cast<T>(wide);
  auto bits = [](const std::vector<T>& v) {
    std::vector<uint16_t> b;
    for (T x : v) b.push_back(bits_of(x));
    return b;
  };
  // The pieces too, but for the padding of P(max)/P(min) (16-bit's own lowest finite value, where
  // cast rounds float's to infinity: the same global values).
  const bool padded = std::any_of(nd.begin(), nd.end(), [](const Sbp& s) { return s.is_partial() && !(s == sbp::partial_sum); });
  if (!padded && (h.to_local().defined() != rounded.to_local().defined() ||
                  (h.to_local().defined() && bits(h.to_local().to_vector()) != bits(rounded.to_local().to_vector()))))
    f.add(what + ": the local piece differs from cast of the float tensor's");
  const std::vector<T> whole = h.full().to_vector();
  const std::vector<uint16_t> want = bits(rounded.full().to_vector());
  for (int64_t g = 0; g < shape.numel(); ++g) {
    const float ref = normal ? philox::normal<float>(seed, static_cast<uint64_t>(g)) : philox::uniform<float>(seed, static_cast<uint64_t>(g));
    if (bits_of(whole[g]) != want[g] || bits_of(whole[g]) != bits_of(T(ref))) {
      f.add(what + ": element " + std::to_string(g) + ": " + show_value(whole[g]) + ", cast of the float tensor " +
            show_value(rounded.full().to_vector()[g]) + ", the float value " + show(ref) + " rounded " + show_value(T(ref)));
      return;
    }
  }
}

}  // namespace

TEST_CASE("randn and rand in 16 bits are the float values rounded once, in every layout", "[half][random]") {
  for (const Shape& mesh : {Shape{4}, Shape{2, 2}}) {
    Failures failures = spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()), [&](Failures& f) {
      const Placement p = mesh_placement(mesh);
      const Shape shape{6, 5};
      for (const NdSbp& nd : spsd_test::all_nd_sbps(mesh.ndim(), shape.ndim()))
        for (bool normal : {true, false}) {
          check_random<BF16>(p, shape, nd, normal, f);
          check_random<FP16>(p, shape, nd, normal, f);
        }
    });
    INFO("mesh " << mesh << "\n" << failures.report());
    CHECK(failures.empty());
  }
}

// ---------------------------------------------------------------------------------------------
// Autograd through casts.

namespace {

template <class T>
Tensor<T> normal_tensor(const Shape& shape, uint64_t seed, double scale = 1.0) {
  std::vector<T> v(shape.numel());
  for (int64_t g = 0; g < shape.numel(); ++g)
    v[g] = static_cast<T>(scale * philox::normal<double>(seed, static_cast<uint64_t>(g)));
  return Tensor<T>::from_vector(shape, std::move(v));
}

// x in every layout of p: backward(cast<To>(x), g) leaves x.grad() = cast<From>(g), exactly.
template <class From, class To>
void check_cast_gradient(const Placement& p, Failures& f) {
  const Shape shape{4, 3};
  const Tensor<From> hx = cast_source<From>(shape);
  const Tensor<To> hg = normal_tensor<To>(shape, 7);
  const NdSbp all_b(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast));
  for (const NdSbp& nd : spsd_test::all_nd_sbps(p.mesh().ndim(), shape.ndim())) {
    const std::string what = "gradient of cast " + name_of<From>() + " -> " + name_of<To>() + " of " + nd.to_string() +
                             " on rank " + std::to_string(rank());
    try {
      GlobalTensor<From> x = spsd_test::build_layout(hx, {p, nd}, kPartScale).requires_grad_();
      backward(cast<To>(x), from_host(hg, p, all_b));
      const std::vector<From> got = x.grad().full().to_vector();
      for (int64_t g = 0; g < shape.numel(); ++g) {
        const From want = expected_convert<From>(hg.data()[g]);
        if (!same_value(got[g], want)) {
          f.add(what + ": element " + std::to_string(g) + ": got " + show_value(got[g]) + ", expected " +
                show_value(want) + " (the output gradient " + show_value(hg.data()[g]) + " converted)");
          break;
        }
      }
    } catch (const spsd::Error& e) {
      f.add(what + ": threw " + e.what());
    }
  }
}

}  // namespace

TEST_CASE("the gradient of cast is the output gradient cast back, in every layout", "[half][cast][autograd]") {
  Failures failures = spsd_test::on_simulated_ranks(2, [&](Failures& f) {
    const Placement p = mesh_placement(Shape{2});
    check_cast_gradient<double, float>(p, f);
    check_cast_gradient<float, double>(p, f);
    check_cast_gradient<float, BF16>(p, f);
    check_cast_gradient<BF16, float>(p, f);  // the float gradient rounds to bfloat16
    check_cast_gradient<FP16, BF16>(p, f);
    check_cast_gradient<double, FP16>(p, f);
  });
  INFO(failures.report());
  CHECK(failures.empty());
}

TEST_CASE("cast autograd by finite differences in float64 through a float32 middle", "[half][cast][autograd]") {
  Failures failures = spsd_test::on_simulated_ranks(1, [&](Failures& f) {
    const Placement one("cpu", {0});
    const Shape shape{3, 4};
    const Tensor<float> w = normal_tensor<float>(shape, 21);
    const Tensor<double> r = normal_tensor<double>(shape, 22);
    // L(x) = sum(cast<double>(tanh(cast<float>(x)) * w) * r)
    auto loss = [&](const GlobalTensor<double>& x) {
      const GlobalTensor<float> mid = tanh(cast<float>(x)) * from_host(w, one, sbp::broadcast);
      return sum(cast<double>(mid) * from_host(r, one, sbp::broadcast));
    };
    Tensor<double> hx = normal_tensor<double>(shape, 23);
    GlobalTensor<double> x = from_host(hx, one, sbp::broadcast).requires_grad_();
    backward(loss(x));
    const std::vector<double> analytic = x.grad().full().to_vector();
    const double h = 1e-3;
    for (int64_t j = 0; j < shape.numel(); ++j) {
      const double keep = hx.data()[j];
      hx.data()[j] = keep + h;
      const double up = loss(from_host(hx, one, sbp::broadcast)).full().to_vector()[0];
      hx.data()[j] = keep - h;
      const double down = loss(from_host(hx, one, sbp::broadcast)).full().to_vector()[0];
      hx.data()[j] = keep;
      const double fd = (up - down) / (2 * h);
      if (!(std::abs(fd - analytic[j]) <= 1e-3 * (1 + std::abs(analytic[j]))))
        f.add("d/dx element " + std::to_string(j) + ": analytic " + show(analytic[j]) + ", finite differences " + show(fd));
    }
  });
  INFO(failures.report());
  CHECK(failures.empty());
}

namespace {

// A small MLP in T on inputs given as float values exact in T, in the given layouts of p:
// loss = cross_entropy(logits, labels) + mean(softmax(logits) * logits) + mean(relu(h)),
// h = x W1 + b1, logits = gelu(h) W2. Returns the loss and the gradients of x, W1, b1, W2.
struct MlpResult {
  double loss = 0;
  std::vector<std::vector<double>> grads;
};

constexpr int64_t kBatch = 8, kIn = 6, kHidden = 16, kClasses = 4;

template <class T>
MlpResult run_mlp(const std::vector<Tensor<float>>& values, const Tensor<int64_t>& labels, const Placement& p,
                  const std::vector<NdSbp>& layouts) {
  std::vector<GlobalTensor<T>> in;
  for (size_t i = 0; i < values.size(); ++i) {
    std::vector<T> v;
    for (float x : values[i].to_vector()) v.push_back(static_cast<T>(x));
    in.push_back(from_host(Tensor<T>::from_vector(values[i].shape(), std::move(v)), p, layouts[i]).requires_grad_());
  }
  const GlobalTensor<int64_t> y = from_host(labels, p, layouts.back());
  const GlobalTensor<T> h = matmul(in[0], in[1]) + in[2];
  const GlobalTensor<T> logits = matmul(gelu(h), in[3]);
  const GlobalTensor<T> loss = cross_entropy(logits, y) + mean(softmax(logits, 1) * logits) + mean(relu(h));
  backward(loss);
  MlpResult r;
  r.loss = as_double(loss.full().to_vector()[0]);
  for (const GlobalTensor<T>& t : in) {
    std::vector<double> g;
    for (T v : t.grad().full().to_vector()) g.push_back(as_double(v));
    r.grads.push_back(std::move(g));
  }
  return r;
}

// The MLP's inputs, rounded to T (so the float32 run computes on the same values).
template <class T>
std::vector<Tensor<float>> mlp_inputs() {
  std::vector<Tensor<float>> out;
  const std::vector<Shape> shapes = {Shape{kBatch, kIn}, Shape{kIn, kHidden}, Shape{kHidden}, Shape{kHidden, kClasses}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::vector<float> v;
    for (float x : normal_tensor<float>(shapes[i], 31 + i, i == 0 ? 1.0 : 0.5).to_vector())
      v.push_back(static_cast<float>(static_cast<T>(x)));
    out.push_back(Tensor<float>::from_vector(shapes[i], std::move(v)));
  }
  return out;
}

Tensor<int64_t> mlp_labels() {
  std::vector<int64_t> v(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) v[i] = (i * 3 + 1) % kClasses;
  return Tensor<int64_t>::from_vector(Shape{kBatch}, std::move(v));
}

// Per tensor, max |got - want| <= 32 u max |want|; the loss within 32 u |loss|.
template <class T>
void compare_mlp(const std::string& what, const MlpResult& got, const MlpResult& want, Failures& f) {
  const double tol = 32 * unit_roundoff<T>();
  if (!(std::abs(got.loss - want.loss) <= tol * std::abs(want.loss)))
    f.add(what + ": loss " + show(got.loss) + ", float32 " + show(want.loss));
  static const char* names[] = {"x", "W1", "b1", "W2"};
  for (size_t i = 0; i < want.grads.size(); ++i) {
    double scale = 0, worst = 0;
    size_t at = 0;
    for (size_t j = 0; j < want.grads[i].size(); ++j) {
      scale = std::max(scale, std::abs(want.grads[i][j]));
      const double e = std::abs(got.grads[i][j] - want.grads[i][j]);
      if (!(e <= worst)) worst = e, at = j;
    }
    if (!(worst <= tol * scale))
      f.add(what + ": d loss / d " + names[i] + " element " + std::to_string(at) + ": " + show(got.grads[i][at]) +
            ", float32 " + show(want.grads[i][at]) + " (allowed " + show(tol * scale) + ")");
  }
}

template <class T>
void check_mlp(Failures& failures) {
  const std::vector<Tensor<float>> values = mlp_inputs<T>();
  const Tensor<int64_t> labels = mlp_labels();
  MlpResult reference;
  failures.merge(spsd_test::on_simulated_ranks(1, [&](Failures& f) {
    const Placement one("cpu", {0});
    const std::vector<NdSbp> b(5, NdSbp(sbp::broadcast));
    reference = run_mlp<float>(values, labels, one, b);
    compare_mlp<T>(name_of<T>() + " MLP on one rank", run_mlp<T>(values, labels, one, b), reference, f);
  }));
  // Data x tensor parallel, a split contraction axis (P(sum) pieces in 16 bits), all B.
  const NdSbp bb{sbp::broadcast, sbp::broadcast};
  const std::vector<std::pair<std::string, std::vector<NdSbp>>> layouts = {
      {"data x tensor parallel",
       {{sbp::split(0), sbp::broadcast}, {sbp::broadcast, sbp::split(1)}, {sbp::broadcast, sbp::split(0)},
        {sbp::broadcast, sbp::split(0)}, {sbp::split(0), sbp::broadcast}}},
      {"split contraction",
       {{sbp::broadcast, sbp::split(1)}, {sbp::broadcast, sbp::split(0)}, bb, {sbp::split(0), sbp::broadcast}, bb}},
      {"broadcast", {bb, bb, bb, bb, bb}},
  };
  failures.merge(spsd_test::on_simulated_ranks(4, [&](Failures& f) {
    const Placement grid = mesh_placement(Shape{2, 2});
    for (const auto& [name, l] : layouts) {
      try {
        compare_mlp<T>(name_of<T>() + " MLP on 2x2, " + name + ", rank " + std::to_string(rank()),
                       run_mlp<T>(values, labels, grid, l), reference, f);
      } catch (const spsd::Error& e) {
        f.add(name + ": threw " + e.what());
      }
    }
  }));
}

}  // namespace

TEST_CASE("autograd through a bfloat16 / float16 MLP is close to float32 on the same inputs", "[half][autograd]") {
  Failures failures;
  check_mlp<BF16>(failures);
  check_mlp<FP16>(failures);
  INFO(failures.report());
  CHECK(failures.empty());
}
