// SPSD_TRACE: a small 2-rank program writes one Chrome trace-event file per rank, which a real
// JSON parser reads back: the format, the ops with their layouts and signatures, the
// collectives with their kind, rank set and exact bytes, and lanes whose spans nest. And the
// per-op profile the benchmarks make of a trace (bench/trace_reader.hpp).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <spsd/spsd.hpp>
#include <unistd.h>

#include "error_matchers.hpp"
#include "trace_program.hpp"
#include "trace_reader.hpp"

using namespace spsd;
using namespace spsd::test;
namespace fs = std::filesystem;

namespace {

// SPSD_TRACE set for the scope (read when a Runtime or a simulated rank starts).
struct TraceEnv {
  fs::path dir = fs::temp_directory_path() / ("spsd-trace-test-" + std::to_string(::getpid()));
  explicit TraceEnv(const std::string& value) {
    fs::create_directories(dir);
    ::setenv("SPSD_TRACE", value.empty() ? "" : (dir / value).c_str(), 1);
  }
  ~TraceEnv() {
    ::unsetenv("SPSD_TRACE");
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
};

}  // namespace

TEST_CASE("SPSD_TRACE writes each rank's ops and collectives as trace events", "[trace]") {
  TraceEnv env("trace.json");
  std::vector<std::string> files(2);
  simulate(2, [&] {
    run_traced_program();
    files[rank()] = trace_file();
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(files[r] == (env.dir / ("trace.rank" + std::to_string(r) + ".json")).string());
    check_traced_program(files[r], r);
  }
}

TEST_CASE("An op that boxes its inputs carries the bytes of the collectives inside it", "[trace]") {
  TraceEnv env("boxing");
  simulate(2, [&] {
    Placement p("cpu", {0, 1});
    auto a = ones<float>(Shape{64}, p, NdSbp{sbp::split(0)});
    auto b = ones<float>(Shape{64}, p, NdSbp{sbp::partial_sum});
    (void)add(a, b).to_local().to_vector();  // one input is boxed first (S(0) + P needs it)
    flush_trace();                            // written now, and again at the end
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    const std::vector<json> spans = spans_of(read_json(env.dir / ("boxing.rank" + std::to_string(r) + ".json")), r);
    check_lanes(spans);
    const json* op = nullptr;
    for (const json& e : spans)
      if (e["cat"] == "op" && e["name"] == "add") op = &e;
    REQUIRE(op != nullptr);
    int64_t sent = 0, received = 0;
    for (const json& c : collectives(spans))
      if (inside(c, *op)) sent += c["args"]["bytes_sent"].get<int64_t>(), received += c["args"]["bytes_received"].get<int64_t>();
    CHECK(sent > 0);
    CHECK((*op)["args"]["boxing_bytes_sent"] == sent);
    CHECK((*op)["args"]["boxing_bytes_received"] == received);
  }
}

TEST_CASE("SPSD_TRACE: an empty value or an unwritable place is an error naming the variable", "[trace]") {
  {
    TraceEnv env("");
    CHECK_THAT(test::ERROR_OF(simulate(1, [] {})), test::ContainsAll({"SPSD_TRACE", "got \"\""}));
  }
  {
    TraceEnv env("no-such-dir/trace.json");
    CHECK_THAT(test::ERROR_OF(simulate(1, [] {})), test::ContainsAll({"SPSD_TRACE", "cannot write rank 0's trace file", "no-such-dir/trace.rank0.json",
                                                   "No such file or directory"}));
  }
}

TEST_CASE("Without SPSD_TRACE nothing is traced", "[trace]") {
  simulate(1, [] {
    CHECK(trace_file().empty());
    flush_trace();  // a no-op
  });
}

TEST_CASE("backward and the optimizer step are phase spans around their ops", "[trace]") {
  TraceEnv env("phases");
  simulate(1, [&] {
    Placement p("cpu", {0});
    auto w = ones<float>(Shape{4, 3}, p, NdSbp{sbp::broadcast});
    w.requires_grad_();
    Adam<float> adam({w}, AdamOptions{});
    auto x = ones<float>(Shape{2, 4}, p, NdSbp{sbp::broadcast});
    backward(sum(matmul(x, w)));
    adam.step();
  });
  const std::vector<json> spans = spans_of(read_json(env.dir / "phases.rank0.json"), 0);
  check_lanes(spans);
  const json *backward_span = nullptr, *step_span = nullptr;
  for (const json& e : spans)
    if (e["cat"] == "phase") (e["name"] == "backward" ? backward_span : step_span) = &e;
  REQUIRE(backward_span != nullptr);
  REQUIRE(step_span != nullptr);
  CHECK((*step_span)["name"] == "Adam.step");
  bool matmul_in_backward = false;  // the matmul of dW = x^T g
  for (const json& e : spans)
    if (e["cat"] == "op" && e["name"] == "matmul" && inside(e, *backward_span)) matmul_in_backward = true;
  CHECK(matmul_in_backward);
}

// bench/trace_reader.hpp's per-op profile (bench/gpu_train --profile), on made-up events first:
// grouping by op and phase, an op nested in another counted once, a device span placed in its
// phase by its host start (host_ts), the window, the order of the rows.
TEST_CASE("op_profile groups a lane's ops by name and phase, each op's own time once", "[trace][profile]") {
  using spsd_bench::TraceEvent;
  const std::vector<TraceEvent> events = {
      {"matmul", "op", 0, 0, 10},             // before the window
      {"backward", "phase", 0, 150, 300},     // host thread: the backward phase
      {"Adam.step", "phase", 0, 300, 400},
      {"matmul", "op", 2, 100, 120, 100},     // forward, on the device lane
      {"layer_norm", "op", 2, 120, 150, 110},  // holds a nested op of 10 us: its own time is 20
      {"add", "op", 2, 130, 140, 112},
      {"matmul", "op", 2, 160, 200, 155},     // launched inside backward, ran later
      {"matmul", "op", 2, 200, 230, 156},
      {"add", "op", 2, 310, 312, 305},        // Adam.step
      {"add", "op", 0, 305, 306},             // the host lane's own spans are not the device's
      {"relu", "op", 2, 500, 510, 450},       // launched after the window
  };
  const spsd_bench::OpProfile p = spsd_bench::op_profile(events, 2, 50, 420);
  REQUIRE(p.rows.size() == 5);
  CHECK(p.calls == 6);
  CHECK(p.ops_us == Approx(20 + 20 + 10 + 40 + 30 + 2));
  CHECK(p.first == 100);
  CHECK(p.last == 312);
  CHECK(p.rows[0].op == "matmul");  // largest first: backward's two, 70 us
  CHECK(p.rows[0].phase == "backward");
  CHECK(p.rows[0].calls == 2);
  CHECK(p.rows[0].total_us == Approx(70));
  const auto row = [&](const std::string& op, const std::string& phase) {
    for (const spsd_bench::OpProfileRow& r : p.rows)
      if (r.op == op && r.phase == phase) return r;
    FAIL("no row " << op << " in " << phase);
    return spsd_bench::OpProfileRow{};
  };
  CHECK(row("layer_norm", "forward").total_us == Approx(20));
  CHECK(row("add", "forward").total_us == Approx(10));
  CHECK(row("matmul", "forward").calls == 1);
  CHECK(row("add", "Adam.step").total_us == Approx(2));
  for (size_t i = 1; i < p.rows.size(); ++i) CHECK(p.rows[i - 1].total_us >= p.rows[i].total_us);
  REQUIRE(p.phases.size() == 3);
  CHECK(p.phases[0].first == "forward");
  CHECK(p.phases[0].second == Approx(50));
  CHECK(p.phases[1].first == "backward");
  CHECK(p.phases[1].second == Approx(70));
  // The host lane, same window: its one op in the window.
  const spsd_bench::OpProfile host = spsd_bench::op_profile(events, 0, 50, 420);
  CHECK(host.calls == 1);
  CHECK(host.rows.at(0).phase == "Adam.step");
}

// The same on a real trace: a cpu training step's ops on the host thread (lane 0), read back from
// the file; the step before the window does not count.
TEST_CASE("op_profile of a traced cpu training step", "[trace][profile]") {
  TraceEnv env("profile");
  double from = 0, to = 0;
  std::string file;
  simulate(1, [&] {
    Placement p("cpu", {0});
    auto w1 = randn<float>(Shape{8, 16}, p, NdSbp{sbp::broadcast}, 1);
    auto w2 = randn<float>(Shape{16, 4}, p, NdSbp{sbp::broadcast}, 2);
    w1.requires_grad_();
    w2.requires_grad_();
    SGD<float> sgd({w1, w2}, {.lr = 0.1});
    const auto x = randn<float>(Shape{6, 8}, p, NdSbp{sbp::broadcast}, 3);
    const auto labels = from_host(Tensor<int64_t>::from_vector({6}, {0, 1, 2, 3, 0, 1}), p, NdSbp{sbp::broadcast});
    const auto step = [&] {
      auto loss = cross_entropy(matmul(relu(matmul(x, w1)), w2), labels);
      sgd.zero_grad();
      backward(loss);
      sgd.step();
      return loss.item();
    };
    step();  // before the window
    from = spsd_bench::trace_now_us();
    step();
    to = spsd_bench::trace_now_us();
    flush_trace();
    file = trace_file();
  });
  const std::vector<spsd_bench::TraceEvent> events = spsd_bench::read_trace_events(file);
  const spsd_bench::OpProfile p = spsd_bench::op_profile(events, 0, from, to);
  int64_t in_window = 0;
  for (const spsd_bench::TraceEvent& e : events) in_window += e.lane == 0 && e.cat == "op" && e.begin >= from && e.begin < to;
  CHECK(p.calls == in_window);
  double total = 0;
  bool backward_seen = false, step_seen = false;
  for (const spsd_bench::OpProfileRow& r : p.rows) {
    total += r.total_us;
    backward_seen = backward_seen || r.phase == "backward";
    step_seen = step_seen || r.phase == "SGD.step";
    if (r.op == "matmul" && r.phase == "forward") CHECK(r.calls == 2);
    if (r.op == "relu" && r.phase == "forward") CHECK(r.calls == 1);
    if (r.op == "sgd_step") CHECK((r.phase == "SGD.step" && r.calls == 2));  // the fused update, one per parameter
  }
  CHECK(total == Approx(p.ops_us));
  CHECK(backward_seen);
  CHECK(step_seen);
  CHECK(p.ops_us > 0);
  CHECK(p.ops_us <= to - from);
  for (size_t i = 1; i < p.rows.size(); ++i) CHECK(p.rows[i - 1].total_us >= p.rows[i].total_us);
}
