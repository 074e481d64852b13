// Rank-side checks of boxing reuse (reuse_suite.hpp).
#include "reuse_suite.hpp"

#include <string>
#include <vector>

#include "gpt_suite.hpp"
#include "spsd/boxing/reuse.hpp"
#include "spsd/spsd.hpp"

namespace spsd_test {

using namespace spsd;

namespace {

// Sets the calling rank's reuse setting (and budget) for one scope, then restores them.
struct ReuseScope {
  BoxingReuse previous = boxing_reuse();
  int64_t previous_budget = boxing_reuse_budget();
  explicit ReuseScope(BoxingReuse r, int64_t budget = int64_t{1} << 30) {
    set_boxing_reuse(r);
    set_boxing_reuse_budget(budget);
  }
  ~ReuseScope() {
    set_boxing_reuse(previous);
    set_boxing_reuse_budget(previous_budget);
  }
};

int64_t calls(CollectiveKind k) { return comm_stats().calls_of(k); }

std::string where(const std::string& what) { return what + " on rank " + std::to_string(rank()); }

template <class T>
std::vector<T> values(const GlobalTensor<T>& t) {
  Tensor<T> whole = t.full();
  return whole.defined() ? whole.to_vector() : std::vector<T>{};
}

void expect_equal(Failures& f, const std::string& what, int64_t got, int64_t want) {
  if (got != want) f.add(where(what + ": " + std::to_string(got) + ", expected " + std::to_string(want)));
}

template <class T>
void expect_same(Failures& f, const std::string& what, const std::vector<T>& got, const std::vector<T>& want) {
  if (got != want) f.add(where(what + ": values differ"));
}

Placement world4() { return Placement("cpu", {0, 1, 2, 3}); }

struct NormGrads {
  std::vector<float> dx, dw, db;
  int64_t reduce_scatters = 0, bytes = 0;
};

NormGrads layer_norm_grads(BoxingReuse r) {
  const ReuseScope scope(r);
  const Placement p = world4();
  auto x = randn<float>(Shape{8, 6}, p, sbp::split(0), 1).requires_grad_();
  auto w = randn<float>(Shape{6}, p, sbp::broadcast, 2).requires_grad_();
  auto b = randn<float>(Shape{6}, p, sbp::broadcast, 3).requires_grad_();
  auto y = layer_norm(x, w, b);
  // The gradient as fc1's backward gives it in the GPT: partial sums.
  const auto dy = randn<float>(Shape{8, 6}, p, sbp::broadcast, 4).to_global(sbp::partial_sum);
  reset_comm_stats();
  backward(y, dy, {.reduce_gradients_early = false});
  NormGrads g{.reduce_scatters = calls(CollectiveKind::kReduceScatter), .bytes = comm_stats().bytes_sent};
  g.dx = values(x.grad()), g.dw = values(w.grad()), g.db = values(b.grad());
  return g;
}

}  // namespace

void reuse_layer_norm_backward(Failures& f) {
  const NormGrads off = layer_norm_grads(BoxingReuse::kOff);
  const NormGrads node = layer_norm_grads(BoxingReuse::kNode);
  const NormGrads step = layer_norm_grads(BoxingReuse::kStep);
  expect_equal(f, "layer norm backward, reuse off: reduce-scatters", off.reduce_scatters, 2);
  expect_equal(f, "layer norm backward, node scope: reduce-scatters", node.reduce_scatters, 1);
  expect_equal(f, "layer norm backward, step scope: reduce-scatters", step.reduce_scatters, 1);
  expect_equal(f, "layer norm backward, node scope: bytes sent (half of off's)", 2 * node.bytes, off.bytes);
  for (const NormGrads* g : {&node, &step}) {
    expect_same(f, "dx against reuse off", g->dx, off.dx);
    expect_same(f, "dweight against reuse off", g->dw, off.dw);
    expect_same(f, "dbias against reuse off", g->db, off.db);
  }
}

void reuse_copy_invalidates(Failures& f) {
  const ReuseScope scope(BoxingReuse::kStep);
  const Placement p = world4();
  auto x = randn<float>(Shape{8, 3}, p, sbp::split(0), 5);
  const auto z = randn<float>(Shape{8, 3}, p, sbp::split(0), 6);
  // randn's values do not depend on the layout (full() would box x itself, and leave an entry).
  const std::vector<float> xv = values(randn<float>(Shape{8, 3}, p, sbp::broadcast, 5)),
                           zv = values(randn<float>(Shape{8, 3}, p, sbp::broadcast, 6));
  reset_comm_stats();
  const auto a = x.to_global(sbp::broadcast);
  const auto b = x.to_global(sbp::broadcast);
  expect_equal(f, "x boxed to B twice: all-gathers", calls(CollectiveKind::kAllGather), 1);
  expect_same(f, "x boxed to B again", b.to_local().to_vector(), xv);
  // An op's input boxing uses the same entries: relu of P(sum) reduce-scatters once.
  const auto s = x.to_global(sbp::partial_sum);
  reset_comm_stats();
  const auto r1 = relu(s), r2 = relu(s);
  expect_equal(f, "relu(P(sum)) twice: reduce-scatters", calls(CollectiveKind::kReduceScatter), 1);
  expect_same(f, "relu twice", values(r2), values(r1));

  // copy_ into x between two boxings: the second boxes again, and gives z.
  x.copy_(z);
  reset_comm_stats();
  const auto c = x.to_global(sbp::broadcast);
  expect_equal(f, "x boxed after copy_: all-gathers", calls(CollectiveKind::kAllGather), 1);
  expect_same(f, "x boxed after copy_", c.to_local().to_vector(), zv);

  // copy_ into the to_global result that holds the entry's piece: x's entry is stale, and x
  // boxed again gives x's values, not the result's.
  auto d = x.to_global(sbp::broadcast);  // a hit: d is c (the same piece)
  const auto w = randn<float>(Shape{8, 3}, p, sbp::broadcast, 7);
  d.copy_(w);
  reset_comm_stats();
  const auto e = x.to_global(sbp::broadcast);
  expect_equal(f, "x boxed after copy_ into its boxed copy: all-gathers", calls(CollectiveKind::kAllGather), 1);
  expect_same(f, "x boxed after copy_ into its boxed copy", e.to_local().to_vector(), zv);
}

void reuse_optimizer_invalidates(Failures& f) {
  const ReuseScope scope(BoxingReuse::kStep);
  const Placement p = world4();
  auto w = randn<float>(Shape{8, 3}, p, sbp::split(0), 8).requires_grad_();
  SGD<float> opt({w}, {.lr = 0.25});
  auto loss = sum(w * w);
  backward(loss);
  const auto detached = w.detach();  // the same tensor's values (and entries), outside autograd
  reset_comm_stats();
  const auto before = detached.to_global(sbp::broadcast);
  const auto again = detached.to_global(sbp::broadcast);
  expect_equal(f, "parameter boxed to B twice: all-gathers", calls(CollectiveKind::kAllGather), 1);
  const std::vector<float> old_values = before.to_local().to_vector();
  opt.step();
  reset_comm_stats();
  const auto after = detached.to_global(sbp::broadcast);
  expect_equal(f, "parameter boxed after the optimizer's step: all-gathers", calls(CollectiveKind::kAllGather), 1);
  expect_same(f, "parameter boxed after the step", after.to_local().to_vector(), values(w.detach()));
  if (values(w.detach()) == old_values) f.add(where("the step left the parameter as it was"));
}

void reuse_empty_pieces_and_outside_ranks(Failures& f) {
  const ReuseScope scope(BoxingReuse::kStep);
  const Placement p = world4();
  // (3,) on 4 ranks: rank 3's piece is empty; every rank reuses the gather alike.
  const auto x = randn<float>(Shape{3}, p, sbp::split(0), 9);
  const std::vector<float> xv = values(randn<float>(Shape{3}, p, sbp::broadcast, 9));
  reset_comm_stats();
  const auto a = x.to_global(sbp::broadcast), b = x.to_global(sbp::broadcast);
  expect_equal(f, "(3,) on 4 ranks boxed twice: all-gathers", calls(CollectiveKind::kAllGather), 1);
  expect_same(f, "(3,) on 4 ranks boxed again", b.to_local().to_vector(), xv);
  const auto s = x.to_global(sbp::partial_sum);
  const auto r1 = relu(s), r2 = relu(s);
  expect_same(f, "relu of (3,) P(sum) twice", values(r2), values(r1));

  // On ranks {0, 1} of 4: ranks 2 and 3 take no part in the op's boxing; then to ranks {2, 3},
  // where ranks 2 and 3 hold no piece of the source and all four decide the reuse.
  const Placement left("cpu", {0, 1}), right("cpu", {2, 3});
  const auto y = randn<float>(Shape{5, 2}, left, sbp::split(0), 10);
  const auto ys = y.to_global(sbp::partial_sum);  // local: nothing to reuse
  reset_comm_stats();
  const auto yb1 = y.to_global(sbp::broadcast);
  const auto q1 = relu(ys);
  const auto m1 = y.to_global(right, sbp::split(1));
  if (comm_stats().collectives == 0) f.add(where("the first boxings on ranks {0, 1} and to {2, 3} communicated nothing"));
  reset_comm_stats();
  const auto yb2 = y.to_global(sbp::broadcast);
  const auto q2 = relu(ys);
  const auto m2 = y.to_global(right, sbp::split(1));
  expect_equal(f, "the same boxings again: collectives", comm_stats().collectives, 0);
  reset_comm_stats();
  const auto yb3 = y.to_global(sbp::broadcast);
  const auto q3 = relu(ys);
  const auto m3 = y.to_global(right, sbp::split(1));
  expect_equal(f, "the same boxings a third time: collectives", comm_stats().collectives, 0);
  // randn's values do not depend on the layout: y's, on every rank.
  const std::vector<float> yv = values(randn<float>(Shape{5, 2}, p, sbp::broadcast, 10));
  const std::vector<float> m2v = values(m2), m3v = values(m3);  // collective over ranks {2, 3}
  if (rank() >= 2) {
    expect_same(f, "y moved to ranks {2, 3}, twice", m2v, yv);
    expect_same(f, "y moved to ranks {2, 3}, a third time", m3v, yv);
  } else {
    expect_same(f, "y boxed to B again", yb2.to_local().to_vector(), yv);
    expect_same(f, "y boxed to B a third time", yb3.to_local().to_vector(), yv);
  }
  expect_same(f, "relu of y's partial, again", values(q2), values(q1));
  expect_same(f, "relu of y's partial, a third time", values(q3), values(q1));
}

void reuse_entries_freed(Failures& f) {
  const ReuseScope scope(BoxingReuse::kStep);
  const Placement p = world4();
  const int64_t start = memory_stats(DeviceType::kCPU).current_bytes;
  {
    const auto x = randn<float>(Shape{64, 16}, p, sbp::split(0), 11);
    { const auto b = x.to_global(sbp::broadcast); }  // the result goes, the entry stays with x
    const auto s = x.to_global(sbp::partial_sum);
    { const auto r = relu(s); }
    if (detail::boxing_reuse_held_bytes() == 0) f.add(where("no entry held while x lives"));
    if (memory_stats(DeviceType::kCPU).current_bytes <= start) f.add(where("x's entries hold no memory"));
  }
  synchronize();  // buffers the communication stream used go once it has passed them
  expect_equal(f, "bytes held in budgets after x went", detail::boxing_reuse_held_bytes(), 0);
  expect_equal(f, "host memory after x went", memory_stats(DeviceType::kCPU).current_bytes, start);

  // Node scope, through backward: nothing outlives the node's rule.
  {
    const ReuseScope node(BoxingReuse::kNode);
    auto x = randn<float>(Shape{8, 6}, p, sbp::split(0), 12).requires_grad_();
    const auto w = randn<float>(Shape{6}, p, sbp::broadcast, 13);
    auto y = layer_norm(x, w, w);
    backward(y, randn<float>(Shape{8, 6}, p, sbp::broadcast, 14).to_global(sbp::partial_sum));
    x.zero_grad();
  }
  synchronize();
  expect_equal(f, "host memory after a node-scope backward", memory_stats(DeviceType::kCPU).current_bytes, start);
}

void reuse_eviction(Failures& f) {
  const Placement p = world4();
  // Budget: one gathered (16, 4) float32 tensor (256 B logical).
  const ReuseScope scope(BoxingReuse::kStep, 16 * 4 * 4);
  const auto a = randn<float>(Shape{16, 4}, p, sbp::split(0), 15);
  const auto b = randn<float>(Shape{16, 4}, p, sbp::split(0), 16);
  reset_comm_stats();
  (void)a.to_global(sbp::broadcast);  // a's entry
  (void)a.to_global(sbp::broadcast);  // hit
  expect_equal(f, "a twice: all-gathers", calls(CollectiveKind::kAllGather), 1);
  (void)b.to_global(sbp::broadcast);  // b's entry evicts a's
  (void)b.to_global(sbp::broadcast);  // hit
  expect_equal(f, "then b twice: all-gathers", calls(CollectiveKind::kAllGather), 2);
  const auto a3 = a.to_global(sbp::broadcast);  // evicted: boxed again (and evicts b's)
  expect_equal(f, "a after b: all-gathers", calls(CollectiveKind::kAllGather), 3);
  (void)b.to_global(sbp::broadcast);
  expect_equal(f, "b after a: all-gathers", calls(CollectiveKind::kAllGather), 4);
  expect_equal(f, "bytes held under a budget of 256", detail::boxing_reuse_held_bytes(), 256);
  expect_same(f, "a boxed after its eviction", a3.to_local().to_vector(), values(a));
}

void reuse_gpt_bitwise(Failures& f) {
  for (const std::string mode : {"tensor", "2d"}) {
    auto trace = [&](BoxingReuse r) {
      const ReuseScope scope(r);
      return gpt_trace<float>(mode, {0, 1, 2, 3}, 3, false);
    };
    const TrainTrace off = trace(BoxingReuse::kOff);
    for (BoxingReuse r : {BoxingReuse::kNode, BoxingReuse::kStep}) {
      const TrainTrace with = trace(r);
      const std::string what = "GPT " + mode + ", reuse " + std::string(to_string(r)) + " against off: ";
      if (with.losses != off.losses) f.add(where(what + "losses differ"));
      if (with.first_gradients != off.first_gradients) f.add(where(what + "first gradients differ"));
      if (off.losses.empty()) f.add(where(what + "no losses"));
    }
  }
}

std::string reuse_planted_divergence() {
  const ReuseScope scope(BoxingReuse::kStep);
  const Placement p = world4();
  const auto x = randn<float>(Shape{8, 3}, p, sbp::split(0), 17);
  const auto s = x.to_global(sbp::partial_sum);
  try {
    const auto r1 = relu(s);
    detail::force_boxing_reuse_miss(rank() == 2);
    const auto r2 = relu(s);  // ranks 0, 1, 3 reuse; rank 2 reduce-scatters
    detail::force_boxing_reuse_miss(false);
    (void)r2.to_global(sbp::broadcast).to_local().to_vector();  // communicates: the ranks meet
  } catch (const Error& e) {
    detail::force_boxing_reuse_miss(false);
    return e.what();
  }
  return "";
}

}  // namespace spsd_test
