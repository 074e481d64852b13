// gpu-trace: SPSD_TRACE on a cuda placement puts each op's device work on the "cuda compute
// stream" lane (tid 2), timed with CUDA events and mapped onto the host clock: a matmul's
// device span must exist, last longer than nothing, fall inside the host's view of the run, and
// name its host span's start (args.host_ts, which bench/gpu_train --profile places in phases by);
// an Adam step's fused update (no dispatched op) has its own span there too (adam_step).
// And a queued device boxing (to_global of a 1 MiB P(sum) tensor to B on 2 simulated ranks,
// host-staged) appears on the "cuda communication stream" lane (tid 3) with its bytes.
// Exits 77 (meson: SKIP) only where the machine has no CUDA device. Written without a GPU at hand
// (docs/trace.md says what ran where).
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>
#include <spsd/spsd.hpp>

#include "../common/cuda_devices.hpp"

int main(int argc, char** argv) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "spsd-gpu-trace";
  std::filesystem::create_directories(dir);
  ::setenv("SPSD_TRACE", (dir / "gpu.json").c_str(), 1);  // read when the Runtime starts
  spsd::Runtime runtime(argc, argv);
  if (const auto devices = spsd_test::find_cuda_devices("gpu-trace"); devices.count == 0) return devices.exit_code;
  using namespace spsd;
  Placement p("cuda", {0});
  auto a = ones<float>(Shape{512, 512}, p, NdSbp{sbp::broadcast});
  auto c = matmul(a, a);
  (void)c.to_local().to_vector();  // waits for the device
  flush_trace();

  std::ifstream in(trace_file());
  const nlohmann::json trace = nlohmann::json::parse(in);
  const nlohmann::json *host = nullptr, *device = nullptr;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["name"] == "matmul") (e["tid"] == 0 ? host : device) = &e;
  if (!host || !device || (*device)["tid"] != 2) {
    std::puts("FAIL: no matmul span on the host thread and on the cuda compute stream lane");
    return 1;
  }
  const double host_ts = (*host)["ts"], device_ts = (*device)["ts"], device_dur = (*device)["dur"];
  // The device span starts once the host began the op (give the clock mapping 1 ms) and the
  // kernel of a 512^3 matmul takes some time.
  if (device_ts + 1000 < host_ts || device_dur <= 0) {
    std::printf("FAIL: matmul on the device at %.3f us for %.3f us, on the host from %.3f us\n", device_ts, device_dur,
                host_ts);
    return 1;
  }
  if (!(*device)["args"].contains("host_ts") || std::abs(static_cast<double>((*device)["args"]["host_ts"]) - host_ts) > 0.01) {
    std::printf("FAIL: the device span's host_ts is %s, the host span starts at %.3f us\n",
                (*device)["args"].value("host_ts", nlohmann::json()).dump().c_str(), host_ts);
    return 1;
  }
  std::printf("OK: matmul host %.3f us, device %.3f us (starting %.3f us after the host's)\n",
              static_cast<double>((*host)["dur"]), device_dur, device_ts - host_ts);

  auto w = ones<float>(Shape{256, 256}, p, NdSbp{sbp::broadcast});
  w.requires_grad_();
  Adam<float> adam({w}, AdamOptions{});
  backward(sum(matmul(ones<float>(Shape{8, 256}, p, NdSbp{sbp::broadcast}), w)));
  adam.step();
  (void)w.to_local().to_vector();
  flush_trace();
  std::ifstream again(trace_file());
  int updates = 0;
  for (const auto& e : nlohmann::json::parse(again)["traceEvents"])
    updates += e["ph"] == "X" && e["name"] == "adam_step" && e["tid"] == 2 && e["dur"] >= 0;
  if (updates != 1) {
    std::printf("FAIL: %d adam_step spans on the cuda compute stream lane, expected 1\n", updates);
    return 1;
  }
  std::puts("OK: the Adam update is on the cuda compute stream lane");

  std::atomic<int> failures{0};
  simulate(2, [&] {
    const Placement two("cuda", {0, 1});
    auto partial = ones<float>(Shape{1 << 18}, two, NdSbp{sbp::partial_sum});
    auto whole = partial.to_global(two, NdSbp{sbp::broadcast});  // 1 MiB: queued, not inline
    (void)whole.to_local().to_vector();
    flush_trace();
    std::ifstream rank_in(trace_file());
    const nlohmann::json t = nlohmann::json::parse(rank_in);
    bool found = false;
    for (const auto& e : t["traceEvents"])
      if (e["ph"] == "X" && e["tid"] == 3 && e["args"].contains("bytes") && e["args"]["bytes"] > 0)
        found = found || e["dur"] >= 0;
    if (!found) {
      std::printf("FAIL: rank %d: no instruction with bytes on the cuda communication stream lane\n", rank());
      ++failures;
    }
  });
  if (failures) return 1;
  std::puts("OK: the queued device boxing is on the cuda communication stream lane");
  return 0;
}
