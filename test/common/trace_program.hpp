#pragma once
// The traced program of the trace tests (unit: simulated ranks; mpi: processes) and the checks
// of one rank's trace file (SPSD_TRACE, docs/trace.md), read with nlohmann::json.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spsd/spsd.hpp>

namespace spsd::test {

using json = nlohmann::json;


constexpr int kHost = 0, kCommStream = 1;

inline json read_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  REQUIRE(in.good());
  return json::parse(in);  // throws (and fails the test) on anything that is not JSON
}

// Complete events ("X") only, checked for the fields the format requires.
inline std::vector<json> spans_of(const json& trace, int rank) {
  REQUIRE(trace.contains("traceEvents"));
  REQUIRE(trace["traceEvents"].is_array());
  std::vector<json> spans;
  for (const json& e : trace["traceEvents"]) {
    REQUIRE(e["ph"].is_string());
    REQUIRE(e["name"].is_string());
    CHECK(e["pid"] == rank);
    REQUIRE(e["tid"].is_number_integer());
    if (e["ph"] == "M") continue;
    REQUIRE(e["ph"] == "X");
    REQUIRE(e["ts"].is_number());
    REQUIRE(e["dur"].is_number());
    CHECK(e["dur"].get<double>() >= 0);
    REQUIRE(e["args"].is_object());
    spans.push_back(e);
  }
  return spans;
}

// On each lane the events are in time order and either nest or follow one another: a span
// that starts inside another ends inside it (one thread cannot run two things at once).
inline void check_lanes(const std::vector<json>& spans) {
  std::map<int, std::vector<double>> open_ends;  // per lane, the ends of the enclosing spans
  std::map<int, double> last_start;
  for (const json& e : spans) {
    const int lane = e["tid"];
    const double ts = e["ts"], end = ts + e["dur"].get<double>();
    if (last_start.count(lane)) CHECK(ts >= last_start[lane]);
    last_start[lane] = ts;
    std::vector<double>& stack = open_ends[lane];
    while (!stack.empty() && ts >= stack.back()) stack.pop_back();
    if (!stack.empty()) CHECK(end <= stack.back());
    stack.push_back(end);
  }
}

inline bool inside(const json& inner, const json& outer) {
  const double ts = inner["ts"], outer_ts = outer["ts"];
  return inner["tid"] == outer["tid"] && ts >= outer_ts &&
         ts + inner["dur"].get<double>() <= outer_ts + outer["dur"].get<double>();
}

// The program's collectives (the cross-rank check's are marked and left out).
inline std::vector<json> collectives(const std::vector<json>& spans) {
  std::vector<json> out;
  for (const json& e : spans)
    if (e["cat"] == "collective" && !e["args"].contains("purpose")) out.push_back(e);
  return out;
}


// Sizes the checks compute the bytes from.
constexpr int64_t kTracePartial = 300, kTraceGathered = 512;

// On the world's first two ranks: a matmul S(0) x B (no boxing), a to_global that all-reduces a
// P(sum) tensor (queued: inline bytes 0), a to_global S(0) -> B (an all-gather) and an add.
inline void run_traced_program() {
  set_inline_bytes(0);  // to_global's all-reduce goes to the communication stream
  Placement p("cpu", {0, 1});
  auto x = ones<float>(Shape{8, 6}, p, NdSbp{sbp::split(0)});
  auto w = ones<float>(Shape{6, 4}, p, NdSbp{sbp::broadcast});
  auto y = matmul(x, w);  // S(0) x B -> S(0): no boxing
  auto partial = ones<float>(Shape{kTracePartial}, p, NdSbp{sbp::partial_sum});
  auto reduced = partial.to_global(p, NdSbp{sbp::broadcast});  // all-reduce, queued
  auto split = arange<float>(kTraceGathered, p, NdSbp{sbp::split(0)});
  auto gathered = split.to_global(p, NdSbp{sbp::broadcast});  // all-gather
  auto sum = add(y, y);
  (void)reduced.to_local().to_vector();
  (void)gathered.to_local().to_vector();
}

// Checks rank r's trace of run_traced_program.
inline void check_traced_program(const std::filesystem::path& file, int r) {
  INFO("rank " << r << ", " << file);
  const json trace = read_json(file);
  const std::vector<json> spans = spans_of(trace, r);
  check_lanes(spans);

  // Lanes are named for the viewer.
  std::map<int, std::string> lane_names;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") lane_names[e["tid"]] = e["args"]["name"];
  CHECK(lane_names[kHost] == "host thread");
  CHECK(lane_names[kCommStream] == "communication stream");

  // The ops, on the host thread, with their layouts and the chosen signature.
  const json* mm = nullptr;
  for (const json& e : spans)
    if (e["cat"] == "op" && e["name"] == "matmul") mm = &e;
  REQUIRE(mm != nullptr);
  CHECK((*mm)["tid"] == kHost);
  CHECK((*mm)["args"]["inputs"] == json::array({"(8, 6) float32 (S(0))", "(6, 4) float32 (B)"}));
  CHECK((*mm)["args"]["output"] == "(8, 4) float32 (S(0))");
  CHECK((*mm)["args"]["signature"] == "((S(0)), (B)) -> (S(0))");
  CHECK((*mm)["args"]["ranks"] == json::array({0, 1}));
  CHECK((*mm)["args"]["boxing_bytes_sent"] == 0);
  int adds = 0;
  for (const json& e : spans) adds += e["cat"] == "op" && e["name"] == "add";
  CHECK(adds == 1);

  // The collectives, with exact bytes: a ring all-reduce of n elements on 2 ranks sends and
  // receives n; an all-gather sends this rank's half and receives the other's.
  const std::vector<json> comm = collectives(spans);
  REQUIRE(comm.size() == 2);
  const json& all_reduce = comm[0];
  CHECK(all_reduce["name"] == "all_reduce");
  CHECK(all_reduce["args"]["ranks"] == json::array({0, 1}));
  CHECK(all_reduce["args"]["dtype"] == "float32");
  CHECK(all_reduce["args"]["bytes_sent"] == kTracePartial * 4);
  CHECK(all_reduce["args"]["bytes_received"] == kTracePartial * 4);
  CHECK(all_reduce["tid"] == kCommStream);  // queued (inline_bytes 0): ran on the worker
  const json& all_gather = comm[1];
  CHECK(all_gather["name"] == "all_gather");
  CHECK(all_gather["args"]["ranks"] == json::array({0, 1}));
  CHECK(all_gather["args"]["bytes_sent"] == kTraceGathered / 2 * 4);
  CHECK(all_gather["args"]["bytes_received"] == kTraceGathered / 2 * 4);

  // Each collective sits inside the instruction that ran it, on the same lane; a queued one
  // says how long it waited for the worker.
  for (const json& c : comm) {
    const json* instruction = nullptr;
    for (const json& e : spans)
      if (e["cat"] == "instruction" && e["name"] == "boxing" && inside(c, e)) instruction = &e;
    REQUIRE(instruction != nullptr);
    CHECK((*instruction)["args"]["bytes"] == std::max(c["args"]["bytes_sent"], c["args"]["bytes_received"]));
    if (c["tid"] == kCommStream) CHECK((*instruction)["args"]["queued_us"].get<double>() >= 0);
    else CHECK_FALSE((*instruction)["args"].contains("queued_us"));
  }
  // The cross-rank check (SPSD_CHECK=on by default) is traced too, and told apart.
  int checks = 0;
  for (const json& e : spans) checks += e["cat"] == "collective" && e["args"].contains("purpose");
  CHECK(checks > 0);
}

}  // namespace spsd::test
