// Issue 25's smaller parts under simulated ranks: GlobalTensor::item(), negative split axes,
// distribute (a global tensor from one source rank's host data), and SPSD_LOG's levels.
#include <catch2/catch.hpp>
#include <numeric>

#include "boxing_suite.hpp"
#include "misc_suite.hpp"
#include "sim_helpers.hpp"
#include "spsd/runtime/log.hpp"

using namespace spsd;
using spsd_test::Failures;

namespace {
// A suite of misc_suite.hpp on cpu placements in worlds of 1, 2 and 4 simulated ranks
// (test/mpi/test_misc.cpp runs it under mpirun).
void on_worlds(void (*suite)(Failures&, const std::string&)) {
  for (int n : {1, 2, 4}) {
    Failures f = spsd_test::on_simulated_ranks(n, [&](Failures& mine) { suite(mine, "cpu"); });
    INFO("world " << n << "\n" << f.report());
    CHECK(f.empty());
  }
}
}  // namespace

TEST_CASE("item(): a one-element tensor's value on every rank of the world, every layout", "[global][item]") {
  on_worlds(spsd_test::run_item_suite);
}

TEST_CASE("item(): a loss computed by ops, read on every rank", "[global][item]") {
  Failures f = spsd_test::on_simulated_ranks(4, [](Failures& mine) {
    const Placement grid("cpu", {0, 1, 2, 3}, Shape{2, 2});
    const Tensor<double> whole = spsd_test::reference_tensor<double>(Shape{6, 5});
    double expected = 0;
    for (double v : whole.to_vector()) expected += v;
    // sum of a (S(0), S(1)) tensor: P(sum) on both mesh axes, read without boxing.
    const auto x = from_host(whole, grid, NdSbp{sbp::split(0), sbp::split(1)});
    const double got = sum(x, {0, 1}, false).item();
    if (got != expected) mine.add("sum item on rank " + std::to_string(rank()) + ": got " + std::to_string(got));
    // max over a placement of ranks [2, 3]: ranks 0 and 1 read it too.
    const auto y = from_host(whole, Placement("cpu", {2, 3}), sbp::split(1));
    const double top = *std::max_element(whole.data(), whole.data() + whole.numel());
    if (max(y, {0, 1}, false).item() != top) mine.add("max item on rank " + std::to_string(rank()));
  });
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("item(): more than one element is an error on every rank", "[global][item]") {
  const std::vector<std::string> errors = spsd_test::errors_by_rank(2, [] {
    zeros<float>({2, 3}, Placement("cpu", {1}), sbp::split(0)).item();
  });
  for (const std::string& e : errors) {
    CHECK(e.find("item") != std::string::npos);
    CHECK(e.find("(2, 3)") != std::string::npos);
    CHECK(e.find("6 elements") != std::string::npos);
  }
}

TEST_CASE("negative split axes count from the end wherever a layout meets a shape", "[global][negative-axis]") {
  Failures f = spsd_test::on_simulated_ranks(4, [](Failures& mine) {
    const Placement p("cpu", {0, 1, 2, 3}), grid("cpu", {0, 1, 2, 3}, Shape{2, 2});
    const Shape shape{5, 6};
    const Tensor<float> whole = spsd_test::reference_tensor<float>(shape);
    auto expect_layout = [&](const std::string& what, const NdSbp& got, const NdSbp& want) {
      if (!(got == want)) mine.add(what + ": got " + got.to_string() + ", expected " + want.to_string());
    };
    auto expect_whole = [&](const std::string& what, const GlobalTensor<float>& t) {
      spsd_test::expect_elements(mine, what, t.full().data(), whole.to_vector());
    };
    const NdSbp last = sbp::split(1), first = sbp::split(0);
    const auto a = from_host(whole, p, sbp::split(-1));
    expect_layout("from_host S(-1)", a.nd_sbp(), last);
    expect_whole("from_host S(-1)", a);
    expect_layout("zeros S(-2)", zeros<float>(shape, p, sbp::split(-2)).nd_sbp(), first);
    expect_layout("randn (S(-1), S(-2))", randn<float>(shape, grid, NdSbp{sbp::split(-1), sbp::split(-2)}).nd_sbp(),
                  NdSbp{sbp::split(1), sbp::split(0)});
    const auto b = a.to_global(sbp::split(-2));
    expect_layout("to_global S(-2)", b.nd_sbp(), first);
    expect_whole("to_global S(-2)", b);
    // Two mesh axes splitting the same axis, one written from the end: they nest as S(1), S(1).
    const auto c = from_host(whole, grid, NdSbp{sbp::split(1), sbp::split(-1)});
    expect_layout("from_host (S(1), S(-1))", c.nd_sbp(), NdSbp{sbp::split(1), sbp::split(1)});
    expect_whole("from_host (S(1), S(-1))", c);
    const auto d = to_global(a.to_local(), p, sbp::split(-1));
    expect_layout("to_global(local) S(-1)", d.nd_sbp(), last);
    expect_whole("to_global(local) S(-1)", d);
    const auto e = to_global(a.to_local(), p, sbp::split(-1), shape);
    expect_layout("to_global(local, shape) S(-1)", e.nd_sbp(), last);
    const GlobalTensor<float> raw(shape, p, sbp::split(-1), a.to_local());
    expect_layout("GlobalTensor(...) S(-1)", raw.nd_sbp(), last);
    if (!(box_of(shape, p, sbp::split(-1), rank()) == box_of(shape, p, last, rank())))
      mine.add("box_of S(-1) differs from S(1)");
    if (local_shape(shape, p, sbp::split(-1), rank()) != local_shape(shape, p, last, rank()))
      mine.add("local_shape S(-1) differs from S(1)");
    if (layout_diagram(shape, p, sbp::split(-1)) != layout_diagram(shape, p, last))
      mine.add("layout_diagram S(-1) differs from S(1)");
    // An op on it: the softmax over the (split) last axis equals the single-layout one.
    const std::vector<float> want = softmax(from_host(whole, p, sbp::broadcast), -1).full().to_vector();
    const std::vector<float> got = softmax(a, -1).full().to_vector();
    for (size_t i = 0; i < want.size(); ++i)
      if (std::abs(got[i] - want[i]) > 1e-6f) mine.add("softmax of S(-1) differs at " + std::to_string(i));
    // Out of range from the end: the error names the axis as written.
    spsd_test::expect_error(mine, "zeros S(-3)", [&] { zeros<float>(shape, p, sbp::split(-3)); },
                            {"zeros", "splits axis -3", "(5, 6)", "2 axes"});
    spsd_test::expect_error(mine, "to_global S(-3)", [&] { a.to_global(sbp::split(-3)); },
                            {"to_global", "splits axis -3", "(5, 6)"});
  });
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("distribute: each rank receives its piece of src's tensor, every layout", "[global][distribute]") {
  on_worlds(spsd_test::run_distribute_suite);
}

TEST_CASE("distribute: negative axes, empty tensors, and errors on every rank", "[global][distribute]") {
  Failures f = spsd_test::on_simulated_ranks(3, [](Failures& mine) {
    const Placement p("cpu", {0, 1});
    const Tensor<float> whole = spsd_test::reference_tensor<float>(Shape{4, 6});
    const auto t = distribute(rank() == 2 ? whole : Tensor<float>(), p, sbp::split(-1), 2);
    if (!(t.nd_sbp() == NdSbp(sbp::split(1)))) mine.add("distribute S(-1): " + t.nd_sbp().to_string());
    if (p.contains(rank())) spsd_test::expect_elements(mine, "distribute S(-1)", t.full().data(), whole.to_vector());
    const auto empty = distribute(rank() == 0 ? Tensor<float>(Shape{0, 3}) : Tensor<float>(), p, sbp::split(0), 0);
    if (!(empty.shape() == Shape{0, 3})) mine.add("distribute of (0, 3): " + empty.shape().to_string());
    const std::string R = std::to_string(rank());
    spsd_test::expect_error(mine, "src_rank 3 on rank " + R, [&] { distribute(whole, p, sbp::split(0), 3); },
                            {"distribute", "src_rank 3", "world of 3 ranks"});
    spsd_test::expect_error(mine, "src_rank -1 on rank " + R, [&] { distribute(whole, p, sbp::split(0), -1); },
                            {"distribute", "src_rank -1"});
    spsd_test::expect_error(mine, "split axis 2 on rank " + R,
                            [&] { distribute(rank() == 1 ? whole : Tensor<float>(), p, sbp::split(2), 1); },
                            {"distribute", "splits axis 2", "(4, 6)"});
    spsd_test::expect_error(mine, "undefined at src on rank " + R,
                            [&] { distribute(Tensor<float>(), p, sbp::split(0), 1); },
                            {"distribute", "src_rank 1 passed an undefined tensor"});
    // The world still works after the errors.
    if (zeros<float>({1}, Placement("cpu", {0, 1, 2}), sbp::partial_sum).item() != 0.0f) mine.add("item after errors");
  });
  INFO(f.report());
  CHECK(f.empty());
}

namespace {

// The lines a 2-d matmul program prints under SPSD_LOG=value: the forward of a small MLP layer
// on a 2x2 mesh, run twice (the second time every resolution is cached).
std::vector<std::string> log_of_program(const std::string& value) {
  std::vector<std::string> lines;
  detail::set_log_for_testing(value, [&](const std::string& line) { lines.push_back(line); });
  simulate(4, [&] {
    const Placement grid("cpu", {0, 1, 2, 3}, Shape{2, 2});
    const auto x = randn<float>({8, 12}, grid, NdSbp{sbp::split(0), sbp::broadcast}, 1);
    const auto w = randn<float>({12, 10}, grid, NdSbp{sbp::broadcast, sbp::split(1)}, 2);
    const auto v = randn<float>({10, 6}, grid, NdSbp{sbp::broadcast, sbp::split(0)}, 3);
    for (int step = 0; step < 2; ++step) {
      const auto h = relu(matmul(x, w));  // 2 ops
      const auto y = matmul(h, v);        // (S(0), P(sum)) without boxing
      const auto z = softmax(y, 1);       // boxes its P(sum) input: a second line
      (void)sum(z, {0, 1}, false).item();
    }
  });
  detail::reset_log_for_testing();
  return lines;
}

int64_t count_lines(const std::vector<std::string>& messages) {
  int64_t n = 0;
  for (const std::string& m : messages) n += std::count(m.begin(), m.end(), '\n');
  return n;
}

}  // namespace

TEST_CASE("SPSD_LOG=dispatch prints each resolution once in one or two lines; :candidates adds the candidates",
          "[global][log]") {
  const std::vector<std::string> plain = log_of_program("dispatch");
  INFO("SPSD_LOG=dispatch printed:\n" << [&] {
    std::string s;
    for (const std::string& m : plain) s += m;
    return s;
  }());
  // Five distinct resolutions (matmul, relu, matmul, softmax, sum), printed in the first step
  // only: one line each, and a second for softmax, whose P(sum) input is boxed.
  CHECK(plain.size() == 5);
  int64_t boxed = 0;
  for (const std::string& m : plain) {
    CHECK(m.rfind("[spsd dispatch rank 0] ", 0) == 0);
    CHECK(m.find(": chose ") != std::string::npos);
    CHECK(std::count(m.begin(), m.end(), '\n') <= 2);
    CHECK(m.find("candidates") == std::string::npos);
    boxed += m.find("\n  boxing input 0 (S(0), P(sum)) -> ") != std::string::npos;
  }
  CHECK(boxed == 1);
  CHECK(count_lines(plain) == 6);

  const std::vector<std::string> detailed = log_of_program("dispatch:candidates");
  CHECK(detailed.size() == 5);
  int64_t candidates = 0;
  for (const std::string& m : detailed) {
    CHECK(m.find("candidates:") != std::string::npos);
    for (size_t at = m.find("\n    "); at != std::string::npos; at = m.find("\n    ", at + 1)) ++candidates;
  }
  // A 2-d matmul on a 2x2 mesh prices dozens of candidates; the plain level printed none.
  CHECK(candidates > 20);
  CHECK(count_lines(detailed) > 4 * count_lines(plain));
  INFO("SPSD_LOG=dispatch:candidates printed:\n" << [&] {
    std::string s;
    for (const std::string& m : detailed) s += m;
    return s;
  }());
  CHECK(!detailed.empty());

  CHECK(log_of_program("boxing").empty());  // no to_global in the program
}
