// Plans between cpu and cuda layouts (boxing/planner.cpp): the host plan with device_copy steps
// around it, each rank copying its piece between memory spaces; the executor runs exactly these
// steps, so the plan (what explain_boxing prints and the boxing suite checks traffic against) is
// what runs. Pure metadata: no GPU needed.
#include <catch2/catch.hpp>
#include <spsd/spsd.hpp>

using namespace spsd;

namespace {

Placement on(const char* type, const Placement& p) { return Placement(type, p.ranks(), p.mesh()); }

void check_around_host_plan(const Shape& shape, const Placement& p, const NdSbp& from, const NdSbp& to, bool from_cuda) {
  const Placement cpu = on("cpu", p), cuda = on("cuda", p);
  const Layout src{from_cuda ? cuda : cpu, from}, dst{from_cuda ? cpu : cuda, to};
  auto plan = plan_boxing(shape, DType::kFloat32, src, dst);
  auto host = plan_boxing(shape, DType::kFloat32, {cpu, from}, {cpu, to});
  INFO(plan->to_string());
  REQUIRE(plan->steps.size() == host->steps.size() + 1);
  const Step& copy = from_cuda ? plan->steps.front() : plan->steps.back();
  CHECK(copy.kind == StepKind::kDeviceCopy);
  CHECK(copy.from.placement.device_type() == (from_cuda ? DeviceType::kCUDA : DeviceType::kCPU));
  CHECK(copy.to.placement.device_type() == (from_cuda ? DeviceType::kCPU : DeviceType::kCUDA));
  CHECK(copy.from.nd_sbp == copy.to.nd_sbp);
  CHECK(copy.max_bytes() == 0);
  CHECK(plan->from == src);
  CHECK(plan->to == dst);
  for (size_t i = 0; i < host->steps.size(); ++i) CHECK(plan->steps[i + (from_cuda ? 1 : 0)].kind == host->steps[i].kind);
  for (int64_t r : p.ranks()) {
    CHECK(plan->bytes_sent(r) == host->bytes_sent(r));
    CHECK(plan->bytes_received(r) == host->bytes_received(r));
  }
  CHECK(plan->communicates() == host->communicates());
  CHECK(plan->cost_us > host->cost_us);
  CHECK(plan->to_string().find("device_copy") != std::string::npos);
  // What the cross-rank check compares is the boxing among host buffers.
  REQUIRE(plan->identity != nullptr);
  CHECK(plan->identity->description == host->identity->description);
}

}  // namespace

TEST_CASE("planner: cpu <-> cuda plans are the host plan with a device copy around it", "[planner][cuda]") {
  const Placement line("cpu", {0, 1}), grid("cpu", {{0, 1}, {2, 3}});
  for (bool from_cuda : {false, true}) {
    check_around_host_plan({5, 7}, line, NdSbp(sbp::split(0)), NdSbp(sbp::partial_sum), from_cuda);
    check_around_host_plan({5, 7}, line, NdSbp(sbp::partial_max), NdSbp(sbp::split(0)), from_cuda);
    check_around_host_plan({5, 7}, line, NdSbp(sbp::split(1)), NdSbp(sbp::broadcast), from_cuda);
    check_around_host_plan({5, 7}, grid, NdSbp({sbp::split(0), sbp::split(0)}), NdSbp({sbp::partial_sum, sbp::split(0)}),
                           from_cuda);
  }
  // The same layout in the other memory space: one copy step, no traffic.
  auto same = plan_boxing({4}, DType::kFloat32, {Placement("cuda", {0, 1}), NdSbp(sbp::split(0))},
                          {Placement("cpu", {0, 1}), NdSbp(sbp::split(0))});
  REQUIRE(same->steps.size() == 1);
  CHECK(same->steps[0].kind == StepKind::kDeviceCopy);
  CHECK_FALSE(same->communicates());
  CHECK(same->identity == nullptr);  // each rank moves its own piece: nothing to compare
  // Other ranks and another memory space: the host exchange between the placements.
  auto moved = plan_boxing({6}, DType::kFloat32, {Placement("cpu", {0, 1}), NdSbp(sbp::split(0))},
                           {Placement("cuda", {2, 3}), NdSbp(sbp::split(0))});
  REQUIRE(moved->steps.size() == 2);
  CHECK(moved->steps[0].kind == StepKind::kExchange);
  CHECK(moved->steps[1].kind == StepKind::kDeviceCopy);
  CHECK(moved->bytes_received(2) == 12);
}
