// The planner at scale (issue 27, docs/boxing.md "How a plan is priced"): a step is priced from
// one group per mesh axis and per-rank formulas, never by visiting every pair of ranks, and a
// plan holds no per-rank data. These check that the price is still the busiest rank's traffic,
// rank by rank, on small meshes, and plan on 4,096 and 16,384 ranks (metadata only: no data is
// built, so they are fast). Timings are bench/planning's, not these tests'.
#include <catch2/catch.hpp>
#include <numeric>
#include <spsd/spsd.hpp>

using namespace spsd;

namespace {

std::vector<NdSbp> all_nd_sbps(int64_t mesh_ndim, int64_t tensor_ndim) {
  std::vector<Sbp> options;
  for (int64_t i = 0; i < tensor_ndim; ++i) options.push_back(sbp::split(i));
  options.insert(options.end(), {sbp::broadcast, sbp::partial_sum, sbp::partial_max});
  std::vector<NdSbp> out;
  std::vector<size_t> digit(mesh_ndim, 0);
  for (;;) {
    std::vector<Sbp> axes;
    for (size_t d : digit) axes.push_back(options[d]);
    out.emplace_back(std::move(axes));
    size_t a = 0;
    while (a < digit.size() && ++digit[a] == options.size()) digit[a++] = 0;
    if (a == digit.size()) return out;
  }
}

Placement mesh_of(int64_t first, const Shape& mesh) {
  std::vector<int64_t> ranks(mesh.numel());
  std::iota(ranks.begin(), ranks.end(), first);
  return Placement("cpu", std::move(ranks), mesh);
}

}  // namespace

TEST_CASE("a step's price is its busiest rank's traffic, every rank computed on its own", "[planner-scale]") {
  struct Case {
    Placement from, to;
  };
  const std::vector<Case> cases = {
      {Placement("cpu", {0, 1, 2}), Placement("cpu", {0, 1, 2})},
      {Placement("cpu", {{0, 1}, {2, 3}}), Placement("cpu", {{0, 1}, {2, 3}})},
      {Placement("cpu", {{0, 1, 2}, {3, 4, 5}}), Placement("cpu", {{0, 1, 2}, {3, 4, 5}})},
      {Placement("cpu", {{0, 1}, {2, 3}}), Placement("cpu", {4, 5, 6, 7})},
      {Placement("cpu", {0, 1, 2}), Placement("cpu", {2, 4})},
      {Placement("cpu", {{3, 0}, {1, 2}}), Placement("cpu", {0, 1, 2, 3})},
  };
  int64_t steps = 0;
  for (const Case& c : cases)
    for (const Shape& shape : {Shape{7}, Shape{5, 3}, Shape{1, 6}})
      for (const NdSbp& x : all_nd_sbps(c.from.mesh().ndim(), shape.ndim()))
        for (const NdSbp& y : all_nd_sbps(c.to.mesh().ndim(), shape.ndim())) {
          auto plan = plan_boxing(shape, DType::kFloat32, {c.from, x}, {c.to, y});
          for (const Step& s : plan->steps) {
            int64_t busiest = 0;
            for (const RankTraffic& t : s.traffic()) {
              busiest = std::max({busiest, t.bytes_sent, t.bytes_received});
              // traffic() (every rank at once, explain_boxing's) is each rank's own traffic_of.
              const RankTraffic own = s.traffic_of(t.rank);
              REQUIRE(t.bytes_sent == own.bytes_sent);
              REQUIRE(t.bytes_received == own.bytes_received);
              REQUIRE(t.messages == own.messages);
            }
            INFO(plan->to_string());
            REQUIRE(s.max_bytes() == busiest);
            ++steps;
          }
        }
  CHECK(steps > 1000);
}

TEST_CASE("on 64 ranks, prices from the rank classes are the busiest rank's traffic", "[planner-scale]") {
  // Meshes of 64 ranks refined into one another, even and uneven tensors: here the rank classes
  // walk groups of up to 64 coordinates, count runs of value maps, carry the value-holder flag of
  // partial targets and the local copies of broadcast sources, which the small meshes above
  // barely reach. Every step of every plan is checked against each rank's own traffic.
  const std::vector<Shape> meshes = {Shape{4, 4, 4}, Shape{8, 8}, Shape{64}, Shape{2, 32}};
  int64_t steps = 0, pairs = 0;
  for (const Shape& shape : {Shape{64, 32}, Shape{66, 30}})
    for (const Shape& from_mesh : meshes)
      for (const Shape& to_mesh : meshes) {
        const Placement from = mesh_of(0, from_mesh), to = mesh_of(0, to_mesh);
        const std::vector<NdSbp> xs = all_nd_sbps(from_mesh.ndim(), 2), ys = all_nd_sbps(to_mesh.ndim(), 2);
        for (size_t i = 0; i < xs.size(); ++i)
          for (size_t j = 0; j < ys.size(); ++j) {
            if ((i * 31 + j * 17) % 19 != 0) continue;  // a spread-out sample of the pairs
            ++pairs;
            auto plan = plan_boxing(shape, DType::kFloat32, {from, xs[i]}, {to, ys[j]});
            for (const Step& s : plan->steps) {
              int64_t busiest = 0;
              for (int64_t r = 0; r < 64; ++r) {
                const RankTraffic t = s.traffic_of(r);
                busiest = std::max({busiest, t.bytes_sent, t.bytes_received});
              }
              INFO(plan->to_string());
              REQUIRE(s.max_bytes() == busiest);
              ++steps;
            }
          }
      }
  CHECK(pairs > 500);
  CHECK(steps > 500);
}

TEST_CASE("a broadcast source with uneven pieces: dealt by blocks, the same as request by request", "[planner-scale]") {
  // Each piece of a broadcast source goes to the ranks that need it from the least-loaded of its
  // copies. Where the requests differ in size the price deals them by blocks of equal ones
  // (piece_requests.hpp, least_loaded.hpp), while a rank's own traffic deals its piece request by
  // request: the two must agree on the busiest sender, and senders must be the busiest in many
  // of these steps for that to be checked.
  const std::vector<Shape> meshes = {Shape{4, 4, 4}, Shape{2, 4, 8}, Shape{8, 8}, Shape{4, 16}, Shape{64}};
  int64_t steps = 0, sender_busiest = 0;
  for (const Shape& shape : {Shape{70, 29}, Shape{13, 100}, Shape{67, 67}})
    for (const Shape& from_mesh : meshes)
      for (const Shape& to_mesh : meshes) {
        const Placement from = mesh_of(0, from_mesh), to = mesh_of(0, to_mesh);
        const std::vector<NdSbp> xs = all_nd_sbps(from_mesh.ndim(), 2), ys = all_nd_sbps(to_mesh.ndim(), 2);
        for (size_t i = 0; i < xs.size(); ++i) {
          const NdSbp& x = xs[i];
          bool broadcast = false, partial = false;
          for (const Sbp& s : x) broadcast = broadcast || s.is_broadcast(), partial = partial || s.is_partial();
          if (!broadcast || partial || x.size() == 3 && x[0].is_broadcast()) continue;
          for (size_t j = 0; j < ys.size(); ++j) {
            if ((i * 7 + j) % 5 != 0) continue;  // a spread-out sample of the pairs
            auto plan = plan_boxing(shape, DType::kFloat32, {from, x}, {to, ys[j]});
            if (plan->steps.size() != 1 || plan->steps[0].kind != StepKind::kExchange) continue;
            const Step& s = plan->steps[0];
            int64_t sent = 0, received = 0;
            for (int64_t r = 0; r < 64; ++r) {
              const RankTraffic t = s.traffic_of(r);
              sent = std::max(sent, t.bytes_sent);
              received = std::max(received, t.bytes_received);
            }
            INFO(plan->to_string());
            REQUIRE(s.max_bytes() == std::max(sent, received));
            sender_busiest += sent > received ? 1 : 0;
            ++steps;
          }
        }
      }
  WARN(steps << " " << sender_busiest);
  CHECK(steps > 2000);
  CHECK(sender_busiest > 150);
}

TEST_CASE("planning on 4,096 and 16,384 ranks builds no per-rank state", "[planner-scale]") {
  const Shape shape{65536, 65536};
  const NdSbp s0s1{sbp::split(0), sbp::split(1)}, s1s0{sbp::split(1), sbp::split(0)};
  std::vector<int64_t> footprints;
  int64_t first = 0;
  for (int64_t n : {int64_t{4096}, int64_t{16384}}) {
    const Shape mesh2{n / 8, 8}, mesh3{n / 64, 8, 8};
    const Placement p2 = mesh_of(first, mesh2), p3 = mesh_of(first, mesh3), p1 = mesh_of(first, Shape{n});
    first += n;
    // The swap of the two split axes is one exchange; each rank receives what it needs and does
    // not hold (its box in the target less its own box).
    auto swap = plan_boxing(shape, DType::kFloat32, {p2, s0s1}, {p2, s1s0});
    REQUIRE(swap->steps.size() == 1);
    CHECK(swap->steps[0].kind == StepKind::kExchange);
    for (int64_t r : {first - n, first - n + 1, first - n + 9, first - 1}) {
      const Box need = box_of(shape, p2, s1s0, r), held = box_of(shape, p2, s0s1, r);
      CHECK(swap->bytes_received(r) == (need.numel() - overlap(need, held)) * 4);
      CHECK(swap->bytes_sent(r) == (held.numel() - overlap(need, held)) * 4);
    }
    CHECK(swap->steps[0].max_bytes() == 65536LL * 65536 / n * 4);
    // The reduction first, along the partial axis, then the exchange into the 1-d layout.
    auto reduce = plan_boxing(shape, DType::kFloat32, {p3, NdSbp{sbp::split(0), sbp::partial_sum, sbp::split(1)}},
                              {p1, NdSbp{sbp::split(1)}});
    REQUIRE(reduce->steps.size() == 2);
    CHECK(reduce->steps[0].mesh_axis == 1);
    CHECK((reduce->steps[0].kind == StepKind::kReduceScatter || reduce->steps[0].kind == StepKind::kAllReduce));
    CHECK(reduce->steps[1].kind == StepKind::kExchange);
    // A broadcast source (8 copies of each piece) into a 2-d layout: one exchange, each rank
    // receiving its shortfall, the copies sharing the sending.
    const NdSbp b3{sbp::split(0), sbp::split(1), sbp::broadcast}, b2{sbp::split(1), sbp::broadcast};
    auto replicated = plan_boxing(shape, DType::kFloat32, {p3, b3}, {p2, b2});
    REQUIRE(replicated->steps.size() == 1);
    for (int64_t r : {first - n, first - 1}) {
      const Box need = box_of(shape, p2, b2, r), held = box_of(shape, p3, b3, r);
      CHECK(replicated->bytes_received(r) == (need.numel() - overlap(need, held)) * 4);
    }
    for (const auto& plan : {swap, reduce, replicated}) footprints.push_back(plan->footprint_bytes());
    // A matmul's first call prices its candidates through the same planner.
    const std::vector<TensorMeta> metas{{shape, DType::kFloat32}, {shape, DType::kFloat32}};
    if (n == 4096) {
      auto r = resolve(op_schema<detail::MatmulDef>(), {}, p2, metas, std::vector<NdSbp>{s0s1, s1s0});
      int64_t bytes = 0;
      for (const auto& plan : r->plans)
        if (plan)
          for (const Step& s : plan->steps) bytes += s.max_bytes();
      CHECK(bytes == r->bytes());
    }
  }
  // The same plans on 4x as many ranks hold as many bytes, but for a digit more in the rank
  // numbers of their descriptions ("ranks=4096..20479 on mesh (2048, 8)").
  for (size_t i = 0; i < 3; ++i) CHECK(footprints[i + 3] - footprints[i] <= 8);
}
