// Training parity under simulated ranks: 20 steps of the MLP on 4 ranks, data-, tensor- and
// 2-d-parallel, against one rank (test/common/train_suite.hpp has the model, data and tolerances).
#include <catch2/catch.hpp>

#include "sim_helpers.hpp"
#include "train_suite.hpp"

using namespace spsd;
using spsd_test::Failures;

namespace {

template <class T>
void check_parity(int steps) {
  spsd_test::TrainTrace single;
  spsd::simulate(1, [&] { single = spsd_test::train_trace<T>("data", {0}, steps); });
  for (const std::string mode : {"data", "tensor", "2d"}) {
    Failures failures = spsd_test::on_simulated_ranks(4, [&](Failures& f) {
      const spsd_test::TrainTrace t = spsd_test::train_trace<T>(mode, {0, 1, 2, 3}, steps);
      spsd_test::expect_same_training<T>(f, mode + " on 4 ranks, " + std::string(to_string(dtype_of<T>)), t, single);
    });
    INFO(failures.report());
    CHECK(failures.empty());
  }
}

}  // namespace

TEST_CASE("training: data-, tensor- and 2d-parallel give the single-process losses and gradients", "[train]") {
  WARN("training slice: " << spsd_test::train_data_source());
  check_parity<float>(20);
  check_parity<double>(20);
}

TEST_CASE("training in bfloat16 on float32 masters: every parallel mode gives the single-process curve", "[train][half]") {
  check_parity<spsd::bfloat16>(8);
}

TEST_CASE("training parity: empty traces, or traces of other lengths, do not compare equal", "[train]") {
  const spsd_test::TrainTrace empty, run{{2.3, 2.1}, {{0.5, -0.25}, {1.0}}};
  spsd_test::TrainTrace shorter_gradient = run;
  shorter_gradient.first_gradients[1].clear();
  const std::vector<std::pair<std::string, std::pair<spsd_test::TrainTrace, spsd_test::TrainTrace>>> cases = {
      {"two empty traces", {empty, empty}},
      {"an empty trace against a run", {empty, run}},
      {"a gradient of another length", {shorter_gradient, run}},
  };
  for (const auto& [what, traces] : cases) {
    Failures f;
    spsd_test::expect_same_training<float>(f, what, traces.first, traces.second);
    INFO(what);
    CHECK(f.size() == 1);
  }
  Failures same;
  spsd_test::expect_same_training<float>(same, "a run against itself", run, run);
  INFO(same.report());
  CHECK(same.empty());
}

// The device-traffic counter's bookkeeping (the GPU suite gpu-ops checks the counts of a real
// training step): copies and waits count toward the op in progress, host-only copies never.
TEST_CASE("device traffic: counted by op, cpu placements count nothing", "[train][device-traffic]") {
  // What each rank's counters read after a cpu training step, after the notes below, and after a reset.
  struct Seen {
    bool trained = false;
    DeviceTraffic after_training, after_notes, after_reset;
  };
  const std::vector<Seen> seen = spsd_test::results_by_rank<Seen>(2, [] {
    Seen s;
    reset_device_traffic();
    s.trained = !spsd_test::train_trace<float>("data", {0, 1}, 2).losses.empty();
    s.after_training = device_traffic();

    detail::note_device_copy(DeviceType::kCUDA, DeviceType::kCPU, 100);
    {
      const detail::DeviceTrafficScope outer("matmul");
      detail::note_device_copy(DeviceType::kCPU, DeviceType::kCUDA, 8);
      {
        const detail::DeviceTrafficScope inner("div");
        detail::note_device_synchronization();
      }
      detail::note_device_copy(DeviceType::kCPU, DeviceType::kCPU, 64);  // host memory only
    }
    s.after_notes = device_traffic();
    reset_device_traffic();
    s.after_reset = device_traffic();
    return s;
  });
  for (size_t r = 0; r < seen.size(); ++r) {
    INFO("rank " << r);
    // A cpu training step moves nothing between host and device.
    CHECK(seen[r].trained);
    CHECK(seen[r].after_training.total.empty());
    CHECK(seen[r].after_training.by_op.empty());
    const DeviceTraffic& d = seen[r].after_notes;
    CHECK(d.total.host_to_device_bytes == 100);
    CHECK(d.total.host_to_device_copies == 1);
    CHECK(d.total.device_to_host_bytes == 8);
    CHECK(d.total.synchronizations == 2);  // the device -> host copy waited, and the explicit one
    REQUIRE(d.by_op.size() == 3);
    CHECK(d.by_op.at(std::string(DeviceTraffic::kNoOp)).host_to_device_bytes == 100);
    CHECK(d.by_op.at("matmul") == DeviceTrafficCounts{0, 0, 8, 1, 1});
    CHECK(d.by_op.at("div") == DeviceTrafficCounts{0, 0, 0, 0, 1});
    CHECK(seen[r].after_reset.total.empty());
  }
}
