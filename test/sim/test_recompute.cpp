// Activation checkpointing, the memory counters and gradient accumulation under simulated ranks
// on meshes {1}, {2}, {4}, {2, 2}: the shared suite (test/common/recompute_suite.hpp), the
// peak host memory of a checkpointed chain against the plain one, and the errors.
#include <catch2/catch.hpp>

#include "error_matchers.hpp"
#include "recompute_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;
using spsd_test::mesh_placement;
namespace rc = spsd_test::recompute;

namespace {
// suite(placement, failures) on every rank of meshes 1, 2, 4 and 2x2.
void check_on_meshes(void (*suite)(const Placement&, Failures&)) {
  for (const Shape& mesh : {Shape{1}, Shape{2}, Shape{4}, Shape{2, 2}}) {
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()),
                                               [&](Failures& mine) { suite(mesh_placement(mesh), mine); });
    INFO("mesh " << mesh << "\n" << f.report());
    CHECK(f.empty());
  }
}
}  // namespace

TEST_CASE("checkpoint gives the plain chain's loss and gradients, dropout inside", "[recompute]") {
  check_on_meshes(&rc::run_checkpoint_suite);
}

TEST_CASE("checkpointing 8 (256, 256) layers lowers the peak host memory", "[recompute]") {
  // Every rank measures its own counter; the margin (0.9) is far from the ~0.6 expected: plain
  // keeps four (256, 256) activations per layer, checkpointed one per layer plus one layer's four.
  for (const Shape& mesh : {Shape{1}, Shape{2}, Shape{2, 2}}) {
    const int n = static_cast<int>(mesh.numel());
    std::vector<int64_t> plain(n), ckpt(n);
    simulate(n, [&] {
      plain[rank()] = rc::peak_bytes_of(mesh_placement(mesh), rc::Checkpointing::kNone);
      ckpt[rank()] = rc::peak_bytes_of(mesh_placement(mesh), rc::Checkpointing::kEachLayer);
    });
    for (int r = 0; r < n; ++r) {
      INFO("mesh " << mesh << ", rank " << r);
      CHECK(static_cast<double>(ckpt[r]) < 0.9 * static_cast<double>(plain[r]));
    }
  }
}

TEST_CASE("gradient accumulation under NoGradSync reduces once per step", "[recompute]") {
  check_on_meshes(&rc::run_accumulation_suite);
}

TEST_CASE("memory_stats counts host storage per rank", "[recompute]") {
  Failures f = spsd_test::on_simulated_ranks(2, [&](Failures& mine) { rc::run_counter_suite(mine); });
  INFO(f.report());
  CHECK(f.empty());
  // Each simulated rank has its own counter: rank 1's tensor is not on rank 0's.
  std::vector<int64_t> grew(2);
  simulate(2, [&] {
    const int64_t before = memory_stats(DeviceType::kCPU).current_bytes;
    std::optional<Tensor<float>> t;
    if (rank() == 1) t = Tensor<float>::from_vector(Shape{4096}, std::vector<float>(4096));
    world_communicator().barrier();
    grew[rank()] = memory_stats(DeviceType::kCPU).current_bytes - before;
    world_communicator().barrier();
  });
  CHECK(grew[0] == 0);
  CHECK(grew[1] == 4096 * 4);
}

TEST_CASE("checkpoint: what needs grad, grad mode off, and a function that changes", "[recompute]") {
  struct Seen {
    bool no_grad_needed_has_node = true, dw_is_plain = false, grad_mode_off_has_node = true, identity_is_input = false;
    std::string changing_fn_error;
  };
  const auto seen = spsd_test::results_by_rank<Seen>(2, [&] {
    Seen s;
    const Placement p = mesh_placement(Shape{2});
    auto x = from_host(Tensor<float>::from_vector(Shape{4, 3}, rc::values(12, 1, 1.0)), p, sbp::split(0));
    auto w = from_host(Tensor<float>::from_vector(Shape{3, 3}, rc::values(9, 2, 1.0)), p, sbp::broadcast);
    // No input and no parameter requires grad: no node.
    s.no_grad_needed_has_node = checkpoint([&](const rc::GT& a) { return matmul(a, w); }, x).requires_grad();
    // Only a captured parameter requires grad: the output does, and w gets the plain gradient.
    w.requires_grad_();
    backward(sum(checkpoint([&](const rc::GT& a) { return matmul(a, w); }, x)));
    const std::vector<float> dw_ckpt = w.grad().full().to_vector();
    w.zero_grad();
    backward(sum(matmul(x, w)));
    s.dw_is_plain = dw_ckpt == w.grad().full().to_vector();
    // Grad mode off: fn runs, nothing is recorded.
    {
      NoGradGuard no_grad;
      s.grad_mode_off_has_node = checkpoint([&](const rc::GT& a) { return matmul(a, w); }, x).requires_grad();
    }
    // fn returning an input as it is: that tensor, no node.
    x.requires_grad_();
    const rc::GT same = checkpoint([](const rc::GT& a) { return a; }, x);
    s.identity_is_input = same.autograd_meta() == x.autograd_meta();
    // A function whose recomputation differs from its forward: an Error naming checkpoint.
    int calls = 0;
    const rc::GT y = checkpoint([&](const rc::GT& a) { return ++calls == 1 ? a * 2.0f : sum(a, {1}, true); }, x);
    s.changing_fn_error = error_of([&] { backward(sum(y)); });
    return s;
  });
  for (const Seen& s : seen) {
    CHECK_FALSE(s.no_grad_needed_has_node);
    CHECK(s.dw_is_plain);
    CHECK_FALSE(s.grad_mode_off_has_node);
    CHECK(s.identity_is_input);
    CHECK_THAT(s.changing_fn_error, ContainsAll({"checkpoint", "recomputing", "(4, 1)", "(4, 3)", "the same thing"}));
  }
}

TEST_CASE("memory_stats(cuda) without a device is an Error naming it", "[recompute]") {
  simulate(1, [&] {
    if (cuda_available()) return;  // the GPU tests cover the device counter
    CHECK_THAT(error_of([] { memory_stats(DeviceType::kCUDA); }), ContainsAll({"memory_stats"}));
    CHECK_THAT(error_of([] { reset_peak_memory(DeviceType::kCUDA); }), ContainsAll({"reset_peak_memory"}));
  });
}
