// The resolver (op/resolve.hpp), called directly: which N-d signature it picks for given input
// layouts, what the pick costs, its tie-breaks, its candidates and its cache. No ranks needed:
// resolution is a pure function of metadata (the planner prices, nothing runs).
#include <catch2/catch.hpp>
#include <spsd/spsd.hpp>

using namespace spsd;
using kernel::cpu::BinaryOp;
using kernel::cpu::UnaryOp;

namespace {

const Placement kLine4("cpu", {0, 1, 2, 3});
const Placement kGrid("cpu", {{0, 1}, {2, 3}});

TensorMeta f32(Shape s) { return {std::move(s), DType::kFloat32}; }

template <class Def>
std::shared_ptr<const Resolution> resolve_op(const Placement& p, std::vector<TensorMeta> metas, std::vector<NdSbp> layouts,
                                             const OpAttrs& attrs = {}) {
  return resolve(op_schema<Def>(), attrs, p, metas, layouts);
}

// "((S(0)), (B)) -> (S(0))" from 1-d Sbps.
NdSignature sig1(std::vector<Sbp> inputs, Sbp output) {
  NdSignature nd{{}, NdSbp(output)};
  for (const Sbp& s : inputs) nd.inputs.emplace_back(s);
  return nd;
}

double plan_cost(const TensorMeta& m, const Placement& p, const NdSbp& from, const NdSbp& to) {
  return plan_boxing(m.shape, m.dtype, {p, from}, {p, to})->cost_us;
}

const Candidate& candidate(const Resolution& r, const NdSignature& sig) {
  for (const Candidate& c : r.candidates)
    if (c.signature == sig) return c;
  FAIL("no candidate " << sig << " in\n" << r.to_string());
  throw std::logic_error("unreachable: FAIL throws");
}

const Sbp S0 = sbp::split(0), S1 = sbp::split(1);
constexpr Sbp B = sbp::broadcast, Psum = sbp::partial_sum;

// A toy op for the tie-break: two signatures with the same inputs (both free for an S(0) input),
// in an order the test chooses.
template <bool SplitOneFirst>
struct TieDef {
  static constexpr std::string_view name = SplitOneFirst ? "tie_s1_first" : "tie_s0_first";  // one name per op type
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) { return in[0]; }
  static std::vector<Signature> signatures(std::span<const TensorMeta>, const OpAttrs&) {
    std::vector<Signature> t = {{{sbp::split(0)}, sbp::split(1)}, {{sbp::split(0)}, sbp::split(0)}};
    if (!SplitOneFirst) std::swap(t[0], t[1]);
    t.push_back(uniform_signature(1, sbp::broadcast));
    return t;
  }
  template <Element T>
  static void kernel(const KernelArgs&) {}
};

}  // namespace

TEST_CASE("resolver: matmul keeps free layouts (0 bytes)", "[resolver]") {
  const TensorMeta a = f32({8, 6}), b = f32({6, 4});
  SECTION("S(0) x B -> S(0)") {
    auto r = resolve_op<detail::MatmulDef>(kLine4, {a, b}, {S0, B});
    INFO(r->to_string());
    CHECK(r->signature() == sig1({S0, B}, S0));
    CHECK(r->bytes() == 0);
    CHECK(r->cost_us() == 0);
    CHECK_FALSE(r->communicates());
  }
  SECTION("S(1) x S(0) -> P(sum)") {
    auto r = resolve_op<detail::MatmulDef>(kLine4, {a, b}, {S1, S0});
    INFO(r->to_string());
    CHECK(r->signature() == sig1({S1, S0}, Psum));
    CHECK(r->bytes() == 0);
  }
  SECTION("B x S(1) -> S(1)") {
    auto r = resolve_op<detail::MatmulDef>(kLine4, {a, b}, {B, S1});
    INFO(r->to_string());
    CHECK(r->signature() == sig1({B, S1}, S1));
    CHECK(r->bytes() == 0);
  }
  SECTION("P(sum) x B -> P(sum), B x P(sum) -> P(sum)") {
    CHECK(resolve_op<detail::MatmulDef>(kLine4, {a, b}, {Psum, B})->signature() == sig1({Psum, B}, Psum));
    CHECK(resolve_op<detail::MatmulDef>(kLine4, {a, b}, {B, Psum})->signature() == sig1({B, Psum}, Psum));
  }
}

TEST_CASE("resolver: matmul S(0) x S(0) takes the cheaper of gathering b and re-splitting a", "[resolver]") {
  // The two ways out: all-gather b into B (S(0) x B -> S(0)), or all-to-all a from S(0) to S(1)
  // (S(1) x S(0) -> P(sum)). The planner prices both; the resolver must take the cheaper.
  auto check = [](const TensorMeta& a, const TensorMeta& b, const NdSignature& expected) {
    auto r = resolve_op<detail::MatmulDef>(kLine4, {a, b}, {S0, S0});
    const double gather_b = plan_cost(b, kLine4, S0, B);
    const double resplit_a = plan_cost(a, kLine4, S0, S1);
    INFO(r->to_string() << "\nall-gather b: " << gather_b << " us, re-split a: " << resplit_a << " us");
    CHECK(candidate(*r, sig1({S0, B}, S0)).cost_us == Approx(gather_b));
    CHECK(candidate(*r, sig1({S1, S0}, Psum)).cost_us == Approx(resplit_a));
    CHECK(r->signature() == expected);
    CHECK(r->cost_us() == Approx(std::min(gather_b, resplit_a)));
    for (const Candidate& c : r->candidates)
      if (c.viable) CHECK(c.cost_us >= r->cost_us());
  };
  SECTION("large square: re-splitting a (3/16 of a per rank) beats gathering b (3/4 of b per rank)") {
    // (128, 128) x (128, 128) float: all-to-all of a moves 12 KiB per rank (3 latency rounds),
    // all-gather of b 48 KiB (2 rounds): bytes dominate.
    check(f32({128, 128}), f32({128, 128}), sig1({S1, S0}, Psum));
  }
  SECTION("small square: gathering b wins on latency") {
    // (8, 8) x (8, 8) float: the all-to-all moves 48 B per rank against the all-gather's 192 B,
    // but costs 3 latency rounds (n - 1) against 2 (log2 n): 6.5 us against 4.6 us.
    check(f32({8, 8}), f32({8, 8}), sig1({S0, B}, S0));
  }
  SECTION("tall a, thin b: gathering b (48 B per rank) beats re-splitting a (24 KiB per rank)") {
    check(f32({4096, 8}), f32({8, 2}), sig1({S0, B}, S0));
  }
}

TEST_CASE("resolver: relu on P(sum) reduce-scatters rather than all-reduces", "[resolver]") {
  const TensorMeta x = f32({8, 8});
  auto r = resolve_op<detail::UnaryDef<UnaryOp::kRelu>>(kLine4, {x}, {Psum});
  INFO(r->to_string());
  // S(0) and S(1) cost the same (8 x 8 splits evenly both ways): table order picks S(0).
  CHECK(r->signature() == sig1({S0}, S0));
  CHECK(candidate(*r, sig1({S0}, S0)).cost_us == candidate(*r, sig1({S1}, S1)).cost_us);
  CHECK(r->cost_us() < candidate(*r, sig1({B}, B)).cost_us);
  REQUIRE(r->plans.size() == 1);
  REQUIRE(r->plans[0] != nullptr);
  REQUIRE(r->plans[0]->steps.size() == 1);
  CHECK(r->plans[0]->steps[0].kind == StepKind::kReduceScatter);
  // Half the bytes of an all-reduce (ring: (n-1)/n of the tensor vs 2 (n-1)/n).
  const Candidate& all_reduce = candidate(*r, sig1({B}, B));
  CHECK(r->bytes() < all_reduce.bytes);
  // The monotone rules are not taken for P(sum): P(max)/P(min) candidates box into a new partial.
  CHECK_FALSE(candidate(*r, sig1({sbp::partial_max}, sbp::partial_max)).viable);
}

TEST_CASE("resolver: element-wise ops keep partials they are linear in", "[resolver]") {
  const TensorMeta x = f32({6, 5});
  SECTION("add(P(sum), P(sum)) -> P(sum)") {
    auto r = resolve_op<detail::BinaryDef<BinaryOp::kAdd>>(kLine4, {x, x}, {Psum, Psum});
    INFO(r->to_string());
    CHECK(r->signature() == sig1({Psum, Psum}, Psum));
    CHECK(r->bytes() == 0);
    CHECK(r->cost_us() == 0);
  }
  SECTION("mul(P(sum), B) -> P(sum); add(P(max), B) -> P(max); sub(B, P(max)) -> P(min)") {
    CHECK(resolve_op<detail::BinaryDef<BinaryOp::kMul>>(kLine4, {x, x}, {Psum, B})->signature() ==
          sig1({Psum, B}, Psum));
    CHECK(resolve_op<detail::BinaryDef<BinaryOp::kAdd>>(kLine4, {x, x}, {sbp::partial_max, B})->signature() ==
          sig1({sbp::partial_max, B}, sbp::partial_max));
    CHECK(resolve_op<detail::BinaryDef<BinaryOp::kSub>>(kLine4, {x, x}, {B, sbp::partial_max})->signature() ==
          sig1({B, sbp::partial_max}, sbp::partial_min));
  }
  SECTION("add(B, B) stays B (free) rather than slicing both into a split") {
    auto r = resolve_op<detail::BinaryDef<BinaryOp::kAdd>>(kLine4, {x, x}, {B, B});
    INFO(r->to_string());
    CHECK(r->signature() == sig1({B, B}, B));
    CHECK(r->cost_us() == 0);
  }
  SECTION("broadcasting: (6, 5) S(0) + (5) B -> S(0), free") {
    auto r = resolve_op<detail::BinaryDef<BinaryOp::kAdd>>(kLine4, {x, f32({5})}, {S0, B});
    INFO(r->to_string());
    CHECK(r->signature() == sig1({S0, B}, S0));
    CHECK(r->bytes() == 0);
  }
}

TEST_CASE("resolver: 2x2 mesh, per-axis products (seed 003)", "[resolver]") {
  // x (B, S(0)) x w (S(1), B): mesh axis 0 is B x S(1) -> S(1), axis 1 is S(0) x B -> S(0).
  const TensorMeta x = f32({8, 6}), w = f32({6, 4});
  auto r = resolve_op<detail::MatmulDef>(kGrid, {x, w}, {NdSbp{B, S0}, NdSbp{S1, B}});
  INFO(r->to_string());
  CHECK(r->signature().output == NdSbp{S1, S0});
  CHECK(r->signature().inputs[0] == NdSbp{B, S0});
  CHECK(r->signature().inputs[1] == NdSbp{S1, B});
  CHECK(r->bytes() == 0);
  CHECK(r->cost_us() == 0);
}

TEST_CASE("resolver: candidates are every per-axis product, in table order", "[resolver]") {
  auto check = [](const OpSchema& op, const std::vector<TensorMeta>& metas, const std::vector<NdSbp>& layouts) {
    auto r = resolve(op, {}, kGrid, metas, layouts);
    const std::vector<Signature> table = op.signatures(metas, {});
    INFO(r->to_string());
    REQUIRE(r->candidates.size() == table.size() * table.size());  // every split fits these shapes
    for (size_t i = 0; i < table.size(); ++i)
      for (size_t j = 0; j < table.size(); ++j) {
        const size_t choice[] = {i, j};
        CHECK(r->candidates[i * table.size() + j].signature == nd_signature(table, choice));
      }
  };
  const TensorMeta x = f32({8, 6});
  // add float: S(0), S(1), P(sum) x P(sum), 4 max/min rules, B: 8 entries, 64 candidates.
  check(op_schema<detail::BinaryDef<BinaryOp::kAdd>>(), {x, x}, {NdSbp{S0, B}, NdSbp{B, Psum}});
  check(op_schema<detail::MatmulDef>(), {x, f32({6, 4})}, {NdSbp{S0, S1}, NdSbp{B, B}});
  check(op_schema<detail::UnaryDef<UnaryOp::kRelu>>(), {x}, {NdSbp{Psum, S1}});
}

TEST_CASE("resolver: deterministic tie-break", "[resolver]") {
  const TensorMeta x = f32({8, 8});
  SECTION("two zero-cost candidates: table order wins") {
    // Both (S(0)) -> S(1) and (S(0)) -> S(0) need no boxing of an S(0) input.
    auto first = resolve(op_schema<TieDef<true>>(), {}, kLine4, std::vector<TensorMeta>{x}, std::vector<NdSbp>{S0});
    auto second = resolve(op_schema<TieDef<false>>(), {}, kLine4, std::vector<TensorMeta>{x}, std::vector<NdSbp>{S0});
    INFO(first->to_string() << "\n" << second->to_string());
    CHECK(first->cost_us() == 0);
    CHECK(second->cost_us() == 0);
    CHECK(first->signature() == sig1({S0}, S1));
    CHECK(second->signature() == sig1({S0}, S0));
  }
  SECTION("on a 2x2 mesh, mesh axis 0 is the most significant") {
    // Input (S(0), S(0)): all four products of the two free rules cost 0; the first is
    // (rule 0 on axis 0, rule 0 on axis 1).
    auto r = resolve(op_schema<TieDef<true>>(), {}, kGrid, std::vector<TensorMeta>{x}, std::vector<NdSbp>{NdSbp{S0, S0}});
    INFO(r->to_string());
    CHECK(r->signature().output == NdSbp{S1, S1});
  }
  SECTION("equal non-zero costs: table order (relu on P(sum): S(0) before S(1))") {
    auto r = resolve_op<detail::UnaryDef<UnaryOp::kRelu>>(kLine4, {x}, {Psum});
    CHECK(r->signature() == sig1({S0}, S0));
  }
}

TEST_CASE("resolver: the cache returns the same resolution", "[resolver]") {
  const TensorMeta a = f32({5, 7}), b = f32({7, 3});
  auto r1 = resolve_op<detail::MatmulDef>(kLine4, {a, b}, {S0, B});
  auto r2 = resolve_op<detail::MatmulDef>(kLine4, {a, b}, {S0, B});
  CHECK(r1.get() == r2.get());
  // Any difference in the key gives another resolution: layouts, shapes, dtype, placement, op.
  CHECK(resolve_op<detail::MatmulDef>(kLine4, {a, b}, {B, B}).get() != r1.get());
  CHECK(resolve_op<detail::MatmulDef>(kLine4, {a, f32({7, 4})}, {S0, B}).get() != r1.get());
  CHECK(resolve_op<detail::MatmulDef>(kLine4, {{a.shape, DType::kFloat64}, {b.shape, DType::kFloat64}}, {S0, B}).get() !=
        r1.get());
  CHECK(resolve_op<detail::MatmulDef>(Placement("cpu", {3, 2, 1, 0}), {a, b}, {S0, B}).get() != r1.get());
  CHECK(resolve_op<detail::BinaryDef<BinaryOp::kAdd>>(kLine4, {a, a}, {S0, B}).get() !=
        resolve_op<detail::BinaryDef<BinaryOp::kSub>>(kLine4, {a, a}, {S0, B}).get());
}

TEST_CASE("resolver: the cache is bounded and starts over when full", "[resolver]") {
  const Placement one("cpu", {0});
  auto relu_of = [&](int64_t n) { return resolve_op<detail::UnaryDef<UnaryOp::kRelu>>(one, {f32({n})}, {B}); };
  auto first = relu_of(1);
  const std::string first_text = first->to_string();
  // More distinct shapes than the cache holds: it must start over, not grow.
  for (int64_t n = 2; n <= static_cast<int64_t>(kMaxCachedResolutions) + 10; ++n) relu_of(n);
  auto again = relu_of(1);
  CHECK(again.get() != first.get());            // computed again after the cache started over
  CHECK(again->to_string() == first_text);      // and the same resolution
  CHECK(first->signature().output == NdSbp(B));  // the old one stays valid for its holders
}

TEST_CASE("resolver: invalid inputs give errors naming the op", "[resolver]") {
  CHECK_THROWS_WITH(resolve_op<detail::MatmulDef>(kLine4, {f32({4, 5}), f32({6, 3})}, {B, B}),
                    Catch::Contains("matmul") && Catch::Contains("(4, 5)") && Catch::Contains("(6, 3)"));
  CHECK_THROWS_WITH(resolve_op<detail::MatmulDef>(kLine4, {f32({2, 3, 4}), f32({3, 4, 5})}, {B, B}),
                    Catch::Equals("matmul: batch dimensions do not broadcast: a is (2, 3, 4), b is (3, 4, 5) "
                                  "(batch axis -1: 2 vs 3)"));
  CHECK_THROWS_WITH(resolve_op<detail::BinaryDef<BinaryOp::kAdd>>(kLine4, {f32({4, 5}), f32({4, 3})}, {B, B}),
                    Catch::Contains("add") && Catch::Contains("broadcast"));
}
