// SPSD_TRACE: a small 2-rank program writes one Chrome trace-event file per rank, which a real
// JSON parser reads back: the format, the ops with their layouts and signatures, the
// collectives with their kind, rank set and exact bytes, and lanes whose spans nest.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <spsd/spsd.hpp>
#include <unistd.h>

#include "error_matchers.hpp"
#include "trace_program.hpp"

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
