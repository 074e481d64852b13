#include "misuse_catalogue.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <thread>

#include "edge_cases.hpp"

namespace spsd_test {

namespace {

struct Case {
  std::string name;
  std::function<void()> call;
  std::vector<std::string> fragments;  // the message must contain each
};

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Runs f on a new thread, where no Runtime is active, and rethrows what it threw.
void on_fresh_thread(const std::function<void()>& f) {
  std::exception_ptr error;
  std::thread([&] {
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
  }).join();
  if (error) std::rethrow_exception(error);
}

// Runs each case: an spsd::Error naming the fragments, and no traffic. Records what it covers.
void run_cases(Failures& failures, std::set<std::string>& covered, const std::vector<Case>& cases) {
  const std::string R = std::to_string(spsd::rank());
  for (const Case& k : cases) {
    const std::string what = "misuse \"" + k.name + "\" on world rank " + R;
    covered.insert(api_of(k.name));
    spsd::reset_comm_stats();
    expect_error(failures, what, k.call, k.fragments);
    expect_stats(failures, what + " (a rejected call moves and counts nothing)", spsd::CommStats{});
  }
}

// Part 1 beyond the communicator: every public function called with arguments it must reject
// before any communication, alike on every rank. Returns the number of cases.
int run_api_cases(Failures& failures, std::set<std::string>& covered, int64_t n, int64_t r) {
  std::vector<Case> cases;
  using namespace spsd;
  using std::to_string;
  using V = std::vector<int64_t>;
  const std::string N = to_string(n), R = to_string(r);
  V all_ranks(n);
  for (int64_t i = 0; i < n; ++i) all_ranks[i] = i;
  const Placement p("cpu", all_ranks);                 // the world, 1-d
  const Placement grid("cpu", V{0}, Shape{1, 1});      // rank 0 on a 1x1 mesh: another placement
  const Placement beyond("cpu", V{0, n});              // names a rank the world lacks
  const std::string P = p.to_string(), G = grid.to_string();
  const NdSbp two_axes{sbp::broadcast, sbp::broadcast};
  const Sbp B = sbp::broadcast, S0 = sbp::split(0), S1 = sbp::split(1);
  // Tensors the op cases use (made here, outside the cases' counters).
  const auto x = zeros<float>({4, 3}, p, S0), y = ones<float>({2, 5}, p, B), v = zeros<float>({3}, p, B);
  const auto xg = zeros<float>({4, 3}, grid, NdSbp{B, B});
  const auto xd = zeros<double>({4, 3}, p, B);
  const auto xi = zeros<int64_t>({4, 3}, p, B), idx = zeros<int64_t>({4}, p, B), idx_g = zeros<int64_t>({4}, grid, NdSbp{B, B});
  const auto x3 = zeros<float>({2, 3, 4}, p, B), scalar = zeros<float>({}, p, B);
  // Raw GlobalTensors that do not fit what they claim: a 1-d mesh with two Sbps, a placement
  // beyond the world, a piece of 2 elements for a B tensor of 8.
  const Tensor<float> two = Tensor<float>::from_vector({2}, {1, 2});
  const GlobalTensor<float> raw_axes(Shape{2}, p, two_axes, two), raw_beyond(Shape{2}, beyond, B, two),
      raw_small(Shape{8}, p, B, two), raw_empty(Shape{2}, p, B, Tensor<float>());
  auto leaf = [&] { return GlobalTensor<float>(ones<float>({2, 2}, p, B)).requires_grad_(); };
  // A graph an earlier backward ran through, and one whose saved tensor was written since (issue 38).
  const auto freed_w = leaf();
  const GlobalTensor<float> freed_loss = sum(freed_w * freed_w);
  backward(freed_loss);
  auto stale_w = leaf();
  const GlobalTensor<float> stale_loss = sum(exp(stale_w));
  stale_w.copy_(zeros<float>({2, 2}, p, B));

  const std::vector<Case> more = {
      // core
      {"Shape: negative dimension", [] { Shape{2, -1}; }, {"Shape", "non-negative", "[2, -1]"}},
      {"Shape: more than 2^63 - 1 elements", [] { Shape{int64_t{1} << 40, int64_t{1} << 40}; },
       {"Shape", "2^63 - 1", "[1099511627776, 1099511627776]"}},
      {"Shape::operator[]: axis 2 of a 2-d shape", [] { (void)Shape{2, 3}[2]; }, {"Shape", "axis 2", "(2, 3)"}},
      {"Shape::operator[]: axis -1", [] { (void)Shape{2, 3}[-1]; }, {"Shape", "axis -1", "(2, 3)"}},
      {"visit_dtype: an invalid DType value", [] { visit_dtype(static_cast<DType>(17), []<class T>() {}); },
       {"visit_dtype", "invalid dtype value 17"}},
      {"set_matmul_precision: an invalid value", [] { set_matmul_precision(static_cast<MatmulPrecision>(5)); },
       {"set_matmul_precision", "the value 5"}},
      // layout
      {"Placement: no ranks", [] { Placement("cpu", V{}); }, {"Placement", "ranks must not be empty"}},
      {"Placement: device type \"tpu\"", [] { Placement("tpu", V{0}); }, {"Placement", "\"cpu\" or \"cuda\"", "\"tpu\""}},
      {"Placement: negative rank", [] { Placement("cpu", V{0, -3}); }, {"Placement", "non-negative", "[0, -3]"}},
      {"Placement: duplicate rank", [] { Placement("cpu", V{1, 0, 1}); },
       {"Placement", "rank 1 appears more than once", "[1, 0, 1]"}},
      {"Placement: ragged 2-d rank array", [] { Placement("cpu", {{0, 1}, {2}}); },
       {"Placement", "same length", "rows of 2 and 1"}},
      {"Placement: mesh (2, 2) for 3 ranks", [] { Placement("cpu", V{0, 1, 2}, Shape{2, 2}); },
       {"Placement", "mesh (2, 2) holds 4 ranks but 3 ranks were given", "[0, 1, 2]"}},
      {"Placement: a 0-d mesh", [] { Placement("cpu", V{0}, Shape{}); }, {"Placement", "at least one axis", "()"}},
      {"parse_device_type: \"gpu\"", [] { parse_device_type("gpu"); }, {"Placement", "\"gpu\""}},
      {"Placement::coords: a rank outside", [&] { p.coords(n + 2); },
       {"Placement::coords", "rank " + to_string(n + 2), "is not in", P}},
      {"Placement::rank_at: coordinates outside the mesh", [&] { p.rank_at({n}); },
       {"Placement::rank_at", "[" + N + "]", "outside mesh (" + N + ",)"}},
      {"Placement::rank_at: wrong number of coordinates", [&] { p.rank_at({0, 0}); },
       {"Placement::rank_at", "[0, 0]", "do not match mesh"}},
      {"mesh_group: mesh axis 1 of a 1-d mesh", [&] { mesh_group(p, r, {1}); },
       {"mesh_group", "mesh axis 1", "(" + N + ",)"}},
      {"mesh_group: a repeated mesh axis", [&] { mesh_group(p, r, {0, 0}); },
       {"mesh_group", "mesh axis 0 is repeated", "[0, 0]"}},
      {"check_placement: a rank beyond the world", [&] { check_placement("my_op", beyond); },
       {"my_op", "names rank " + N, "the world has " + N + " ranks"}},
      {"sbp::partial: an invalid ReduceOp", [] { sbp::partial(static_cast<ReduceOp>(7)); },
       {"sbp::partial", "invalid value 7"}},
      {"Sbp::axis: of B", [] { (void)sbp::broadcast.axis(); }, {"Sbp::axis", "B is not a split"}},
      {"Sbp::reduce_op: of S(0)", [] { (void)sbp::split(0).reduce_op(); }, {"Sbp::reduce_op", "S(0) is not partial"}},
      {"NdSbp: no Sbp", [] { NdSbp(std::vector<Sbp>{}); }, {"NdSbp", "at least one Sbp"}},
      {"NdSbp::operator[]: mesh axis 1 of a 1-d NdSbp", [] { (void)NdSbp(sbp::broadcast)[1]; },
       {"NdSbp", "mesh axis 1", "(B)"}},
      {"balanced_range: part 2 of 2", [] { balanced_range(5, 2, 2); }, {"balanced_range", "part 2 of 5", "2 parts"}},
      {"balanced_range: negative n", [] { balanced_range(-1, 2, 0); }, {"balanced_range", "-1 elements"}},
      {"balanced_split: 0 parts", [] { balanced_split(5, 0); }, {"balanced_split", "5 elements into 0 parts"}},
      {"check_layout: two Sbps on a 1-d mesh", [&] { check_layout("my_op", Shape{4}, p.mesh(), two_axes); },
       {"my_op", "(B, B) has 2 entries", "has 1 axes"}},
      {"box_of: split axis 1 of a 1-d tensor", [&] { box_of(Shape{4}, p, S1, r); },
       {"box_of", "splits axis 1", "(4,)", "1 axes"}},
      {"box_of: a rank outside the placement", [&] { box_of(Shape{4}, p, S0, n); },
       {"box_of", "rank " + N, "is not in", P}},
      {"boxes_of: two Sbps on a 1-d mesh", [&] { boxes_of(Shape{4}, p, two_axes); },
       {"boxes_of", "(B, B) has 2 entries", "(" + N + ",) has 1 axes"}},
      {"local_shape: split axis 2 of a 2-d tensor", [&] { local_shape(Shape{4, 3}, p, sbp::split(2), r); },
       {"local_shape", "splits axis 2", "(4, 3)"}},
      {"local_shape: a rank outside the placement", [&] { local_shape(Shape{4}, p, S0, n); },
       {"local_shape", "rank " + N, "is not in", P}},
      {"box_at: coords of the wrong length", [&] { box_at(Shape{4}, p.mesh(), S0, {}); },
       {"box_at", "coords []", "one entry per axis of mesh (" + N + ",)"}},
      {"box_at: split axis 1 of a 1-d shape", [&] { box_at(Shape{4}, p.mesh(), S1, {0}); },
       {"box_at", "splits axis 1", "(4,)"}},
      {"box_at: coordinate n of an n-rank axis", [&] { box_at(Shape{4}, p.mesh(), S0, {n}); },
       {"balanced_range", "part " + N + " of 4", N + " parts"}},
      {"intersect: boxes of 1 and 2 axes", [] { intersect(full_box(Shape{2}), full_box(Shape{2, 2})); },
       {"intersect", "[0:2]", "[0:2, 0:2]", "different numbers of axes"}},
      {"overlap: boxes of 2 and 1 axes", [] { overlap(full_box(Shape{2, 2}), full_box(Shape{2})); },
       {"overlap", "different numbers of axes"}},
      {"holds_partial_value: a rank outside the placement", [&] { holds_partial_value(p, sbp::partial_sum, n); },
       {"holds_partial_value", "rank " + N, "is not in", P}},
      {"holds_partial_value: two Sbps on a 1-d mesh", [&] { holds_partial_value(p, two_axes, r); },
       {"holds_partial_value", "(B, B) has 2 entries", "has 1 axes"}},
      {"filler_op: a rank outside the placement", [&] { filler_op(p, sbp::partial_max, n + 1); },
       {"filler_op", "rank " + to_string(n + 1), "is not in", P}},
      {"filler_op: two Sbps on a 1-d mesh", [&] { filler_op(p, two_axes, r); }, {"filler_op", "(B, B) has 2 entries"}},
      {"layout_diagram: split axis 3 of a 2-d tensor", [&] { layout_diagram(Shape{4, 3}, p, sbp::split(3)); },
       {"layout_diagram", "splits axis 3", "(4, 3)"}},
      // byte accounting and signatures
      {"traffic::broadcast: 0 members", [] { traffic::broadcast(4, 0, 0, 0); },
       {"traffic::broadcast", "rank 0 is not one of the 0 members"}},
      {"traffic::broadcast: root 5 of 2", [] { traffic::broadcast(4, 2, 0, 5); }, {"traffic::broadcast", "root 5"}},
      {"traffic::reduce_scatter: rank 2 of 2 counts", [] { traffic::reduce_scatter(V{1, 2}, 2); },
       {"traffic::reduce_scatter", "rank 2 is not one of the 2 members"}},
      {"traffic::all_reduce: rank -1", [] { traffic::all_reduce(8, 2, -1); }, {"traffic::all_reduce", "rank -1"}},
      {"CommStats::calls_of: an invalid kind", [] { (void)CommStats{}.calls_of(static_cast<CollectiveKind>(9)); },
       {"CommStats::calls_of", "invalid collective kind value 9"}},
      {"nd_signature: an empty choice",
       [] { nd_signature(std::vector<Signature>{uniform_signature(1, sbp::broadcast)}, std::vector<size_t>{}); },
       {"nd_signature", "got none"}},
      {"nd_signature: a choice beyond the table",
       [] { nd_signature(std::vector<Signature>{uniform_signature(1, sbp::broadcast)}, std::vector<size_t>{0, 3}); },
       {"nd_signature", "choice 3", "table of 1 signatures"}},
      // runtime without a Runtime, and bad values
      {"local_rank: without a Runtime", [] { on_fresh_thread([] { local_rank(); }); }, {"local_rank", "no spsd::Runtime"}},
      {"synchronize: without a Runtime", [] { on_fresh_thread([] { synchronize(); }); },
       {"synchronize", "no spsd::Runtime"}},
      {"timeout: without a Runtime", [] { on_fresh_thread([] { (void)timeout(); }); }, {"timeout", "no spsd::Runtime"}},
      {"runtime_info: without a Runtime", [] { on_fresh_thread([] { runtime_info(); }); },
       {"runtime_info", "no spsd::Runtime"}},
      {"reset_comm_stats: without a Runtime", [] { on_fresh_thread([] { reset_comm_stats(); }); },
       {"reset_comm_stats", "no spsd::Runtime"}},
      {"set_synchronous: without a Runtime", [] { on_fresh_thread([] { set_synchronous(true); }); },
       {"set_synchronous", "no spsd::Runtime"}},
      {"synchronous: without a Runtime", [] { on_fresh_thread([] { (void)synchronous(); }); },
       {"synchronous", "no spsd::Runtime"}},
      {"inline_bytes: without a Runtime", [] { on_fresh_thread([] { (void)inline_bytes(); }); },
       {"inline_bytes", "no spsd::Runtime"}},
      {"comm_stream_stats: without a Runtime", [] { on_fresh_thread([] { comm_stream_stats(); }); },
       {"comm_stream_stats", "no spsd::Runtime"}},
      {"reset_comm_stream_stats: without a Runtime", [] { on_fresh_thread([] { reset_comm_stream_stats(); }); },
       {"reset_comm_stream_stats", "no spsd::Runtime"}},
      {"set_inline_bytes: -1", [] { set_inline_bytes(-1); }, {"set_inline_bytes", ">= 0", "-1"}},
      {"communicator: placement beyond the world", [&] { communicator(beyond); }, {"communicator", "rank " + N}},
      // tensors
      {"Storage::adopt: a result smaller than the pending storage",
       [] { Storage::allocate_pending(16, DeviceType::kCPU)->adopt(Storage::allocate(8, DeviceType::kCPU)); },
       {"Storage::adopt", "16 bytes cannot take 8 bytes"}},
      {"Storage::allocate: -8 bytes", [] { Storage::allocate(-8, DeviceType::kCPU); },
       {"Storage::allocate", "non-negative", "-8"}},
      {"Tensor: storage too small for the shape", [] { Tensor<float>(Shape{4}, Storage::allocate(8, DeviceType::kCPU)); },
       {"Tensor", "8 bytes", "(4,)"}},
      {"Tensor::from_vector: 3 values for (2, 2)", [] { Tensor<float>::from_vector({2, 2}, {1, 2, 3}); },
       {"Tensor::from_vector", "(2, 2)", "needs 4 values, got 3"}},
      {"Tensor::from_vector: no value for a 0-d shape", [] { Tensor<int64_t>::from_vector(Shape{}, {}); },
       {"Tensor::from_vector", "()", "needs 1 values, got 0"}},
      {"GlobalTensor::to_global: two Sbps on a 1-d mesh", [&] { x.to_global(p, two_axes); },
       {"to_global", "(B, B) has 2 entries", "(" + N + ",) has 1 axes"}},
      {"GlobalTensor::to_global: split axis 2 of a 2-d tensor", [&] { x.to_global(sbp::split(2)); },
       {"to_global", "splits axis 2", "(4, 3)"}},
      {"GlobalTensor::to_global: a placement beyond the world", [&] { x.to_global(beyond, B); },
       {"to_global", "names rank " + N, "world has " + N + " ranks"}},
      {"GlobalTensor::to_global: a raw piece too small", [&] { raw_small.to_global(S0); },
       {"to_global", "the tensor holds 8 bytes on rank " + R, "(8,) (B)", "needs 32 bytes"}},
      {"GlobalTensor::to_global: a raw tensor with two Sbps", [&] { raw_axes.to_global(B); },
       {"to_global", "(B, B) has 2 entries", "1 axes"}},
      {"GlobalTensor::to_global: a raw tensor without local data", [&] { raw_empty.to_global(S0); },
       {"to_global", "the tensor holds no data on rank " + R}},
      {"GlobalTensor::copy_: into a raw piece too small", [&] { GlobalTensor<float>(raw_small).copy_(ones<float>({8}, p, B)); },
       {"copy_", "this tensor holds 8 bytes on rank " + R, "needs 32 bytes"}},
      {"GlobalTensor::copy_: from a raw piece too small", [&] { zeros<float>({8}, p, B).copy_(raw_small); },
       {"copy_", "src holds 8 bytes on rank " + R, "needs 32 bytes"}},
      {"GlobalTensor::full: a raw piece too small", [&] { raw_small.full(); }, {"to_global", "holds 8 bytes"}},
      {"GlobalTensor::from_data: int64 data as float", [&] { GlobalTensor<float>::from_data(xi.data()); },
       {"GlobalTensor", "dtype int64 wrapped as float32"}},
      {"GlobalTensor::requires_grad_: an integer tensor", [&] { GlobalTensor<int64_t>(xi).requires_grad_(); },
       {"requires_grad_", "only floating tensors", "(4, 3) int64"}},
      {"GlobalTensor::requires_grad_: the output of an op", [&] { relu(leaf()).requires_grad_(false); },
       {"requires_grad_", "only leaves", "detach()"}},
      {"GlobalTensor::grad: without requires_grad", [&] { x.grad(); }, {"grad", "does not require grad", "(4, 3) float32"}},
      {"GlobalTensor::grad: before backward", [&] { leaf().grad(); }, {"grad", "has no gradient yet"}},
      {"GlobalTensor::grad: of a non-leaf", [&] { relu(leaf()).grad(); }, {"grad", "is not a leaf"}},
      {"GlobalTensor::copy_: another shape", [&] { GlobalTensor<float>(x).copy_(y); },
       {"copy_", "shapes differ", "(4, 3) float32", "(2, 5) float32"}},
      // factories and local -> global
      {"zeros: two Sbps on a 1-d mesh", [&] { zeros<float>({4}, p, two_axes); }, {"zeros", "2 entries", "1 axes"}},
      {"ones: split axis 1 of a 1-d tensor", [&] { ones<double>({4}, p, S1); }, {"ones", "splits axis 1", "(4,)"}},
      {"full: a placement beyond the world", [&] { full<int32_t>({4}, 7, beyond, B); },
       {"full", "names rank " + N, "world has " + N + " ranks"}},
      {"arange: n = -2", [&] { arange<int64_t>(-2, p, S0); }, {"arange", "non-negative", "-2"}},
      {"rand: split axis 2 of a 2-d tensor", [&] { rand<float>({2, 2}, p, sbp::split(2)); },
       {"rand", "splits axis 2", "(2, 2)", "2 axes"}},
      {"randn: a placement beyond the world", [&] { randn<double>({3}, beyond, S0, 5); }, {"randn", "names rank " + N}},
      {"from_host: split axis 1 of a 1-d tensor", [&] { from_host(two, p, S1); }, {"from_host", "splits axis 1", "(2,)"}},
      {"from_host: an undefined Tensor", [&] { from_host(Tensor<float>(), p, B); },
       {"from_host", "undefined", "()"}},
      {"to_global: a placement beyond the world", [&] { to_global(two, beyond, S0); },
       {"to_global", "names rank " + N}},
      {"to_global: global shape of 1 axis split on axis 1", [&] { to_global(two, p, S1, Shape{2}); },
       {"to_global", "splits axis 1", "(2,)"}},
      // boxing
      {"explain_boxing: split axis 1 of a 1-d tensor", [&] { explain_boxing(Shape{4}, DType::kFloat32, p, S1, p, B); },
       {"explain_boxing", "splits axis 1", "(4,)"}},
      {"plan_boxing: an invalid DType", [&] { plan_boxing(Shape{4}, static_cast<DType>(9), Layout{p, B}, Layout{p, S0}); },
       {"plan_boxing", "dtype has the invalid value 9"}},
      {"plan_boxing: two Sbps on a 1-d mesh",
       [&] { plan_boxing(Shape{4}, DType::kFloat32, Layout{p, B}, Layout{p, two_axes}); },
       {"plan_boxing", "(B, B) has 2 entries"}},
      {"resolve: two input metas, one layout",
       [&] {
         const TensorMeta metas[] = {{Shape{4}, DType::kFloat32}, {Shape{4}, DType::kFloat32}};
         const NdSbp layouts[] = {NdSbp(B)};
         resolve(op_schema<detail::BinaryDef<kernel::cpu::BinaryOp::kAdd>>(), {}, p, metas, layouts);
       },
       {"add", "got 2 input metas but 1 layouts"}},
      // element-wise ops
      {"add: shapes (4, 3) and (2, 5) do not broadcast", [&] { add(x, y); },
       {"add", "(4, 3)", "(2, 5)", "do not broadcast", "4 vs 2"}},
      {"sub: inputs on different placements", [&] { sub(x, xg); },
       {"sub", "share one placement", "input 0 is on " + P, "input 1 is on " + G}},
      {"mul: (4, 3) by (2, 3, 4)", [&] { mul(x, x3); }, {"mul", "(4, 3)", "(2, 3, 4)", "do not broadcast"}},
      {"div: inputs on different placements", [&] { div(xg, x); }, {"div", "share one placement", G, P}},
      {"operator+: shapes (3,) and (2, 5)", [&] { v + y; }, {"add", "(3,)", "(2, 5)", "do not broadcast"}},
      {"operator-: inputs on different placements", [&] { x - xg; }, {"sub", "share one placement"}},
      {"operator*: shapes (2, 5) and (4, 3)", [&] { y * x; }, {"mul", "(2, 5)", "(4, 3)"}},
      {"operator/: integer division by the scalar 0", [&] { xi / int64_t{0}; }, {"div", "integer division by zero", "int64"}},
      {"div_scalar: int64 x / 0", [&] { div(xi, int64_t{0}); }, {"div", "integer division by zero"}},
      {"add_scalar: a raw tensor with two Sbps on a 1-d mesh", [&] { add(raw_axes, 1.0f); },
       {"add_scalar", "(B, B) has 2 entries", "1 axes"}},
      {"sub_scalar: a raw tensor beyond the world", [&] { sub(raw_beyond, 1.0f); }, {"sub_scalar", "names rank " + N}},
      {"rsub_scalar: a raw tensor with two Sbps", [&] { sub(1.0f, raw_axes); }, {"rsub_scalar", "2 entries"}},
      {"mul_scalar: a raw piece too small", [&] { mul(raw_small, 2.0f); },
       {"mul_scalar", "input 0", "8 bytes", "32 bytes", "rank " + R}},
      {"rdiv_scalar: a raw tensor beyond the world", [&] { div(1.0f, raw_beyond); }, {"rdiv_scalar", "names rank " + N}},
      {"dispatch: an input without local data", [&] { relu(raw_empty); },
       {"relu", "input 0 holds no data on rank " + R, "which is in " + P}},
      {"dispatch: a raw piece too small for a binary op", [&] { add(raw_small, raw_small); },
       {"add", "input 0", "holds 8 bytes", "(8,)", "needs 32 bytes"}},
      {"neg: a raw tensor with two Sbps", [&] { neg(raw_axes); }, {"neg", "(B, B) has 2 entries"}},
      {"relu: a raw piece too small", [&] { relu(raw_small); }, {"relu", "8 bytes", "32 bytes"}},
      {"gelu: an int64 tensor", [&] { gelu(xi); }, {"gelu", "not defined for int64"}},
      {"exp: an int64 tensor", [&] { spsd::exp(xi); }, {"exp", "not defined for int64"}},
      {"log: an int64 tensor", [&] { spsd::log(xi); }, {"log", "not defined for int64"}},
      {"tanh: an int64 tensor", [&] { spsd::tanh(xi); }, {"tanh", "not defined for int64"}},
      {"sigmoid: an int64 tensor", [&] { sigmoid(xi); }, {"sigmoid", "not defined for int64"}},
      {"sqrt: an int64 tensor", [&] { spsd::sqrt(xi); }, {"sqrt", "not defined for int64"}},
      {"abs: a raw tensor beyond the world", [&] { spsd::abs(raw_beyond); }, {"abs", "names rank " + N}},
      // issue 25: new functions, pow, var, comparisons, masks, argmax, bool layouts
      {"rsqrt: an int64 tensor", [&] { spsd::rsqrt(xi); }, {"rsqrt", "not defined for int64"}},
      {"erf: an int64 tensor", [&] { spsd::erf(xi); }, {"erf", "not defined for int64"}},
      {"silu: an int64 tensor", [&] { silu(xi); }, {"silu", "not defined for int64"}},
      {"gelu: an invalid approximation", [&] { gelu(x, static_cast<GeluApproximation>(7)); },
       {"gelu", "invalid approximation value 7"}},
      {"pow: an int64 tensor", [&] { spsd::pow(xi, xi); }, {"pow", "not defined for int64"}},
      {"pow: shapes (4, 3) and (2, 5)", [&] { spsd::pow(x, y); }, {"pow", "(4, 3)", "(2, 5)", "do not broadcast"}},
      {"pow: an int64 tensor and a scalar exponent", [&] { spsd::pow(xi, int64_t{2}); },
       {"pow_scalar", "not defined for int64"}},
      {"var: a negative correction", [&] { var(x, {0}, false, -1); }, {"var", "correction must be >= 0", "-1"}},
      {"var: axis 2 of a 2-d tensor", [&] { var(x, {2}); }, {"var", "axis 2", "out of range", "(4, 3)"}},
      {"lt: shapes (4, 3) and (2, 5)", [&] { lt(x, y); }, {"lt", "(4, 3)", "(2, 5)", "do not broadcast"}},
      {"le: inputs on different placements", [&] { le(x, xg); }, {"le", "share one placement"}},
      {"gt: a raw tensor beyond the world", [&] { gt(raw_beyond, 0.0f); }, {"gt_scalar", "names rank " + N}},
      {"ge: shapes (2, 5) and (4, 3)", [&] { ge(y, x); }, {"ge", "(2, 5)", "(4, 3)"}},
      {"eq: inputs on different placements", [&] { eq(xg, x); }, {"eq", "share one placement"}},
      {"ne: shapes (3,) and (2, 5)", [&] { ne(v, y); }, {"ne", "(3,)", "(2, 5)"}},
      {"operator<: bool tensors", [&] { (x > 0.0f) < (x > 1.0f); }, {"lt", "bool", "eq and ne only"}},
      {"operator<=: bool and a scalar", [&] { (x > 0.0f) <= true; }, {"le_scalar", "bool", "eq and ne only"}},
      {"operator>: shapes (4, 3) and (2, 5)", [&] { x > y; }, {"gt", "do not broadcast"}},
      {"operator>=: a raw piece too small", [&] { raw_small >= 1.0f; }, {"ge_scalar", "8 bytes", "32 bytes"}},
      {"operator==: shapes (3,) and (2, 5)", [&] { v == y; }, {"eq", "(3,)", "(2, 5)"}},
      {"operator!=: inputs on different placements", [&] { x != xg; }, {"ne", "share one placement"}},
      {"logical_and: shapes (4, 3) and (2, 5)", [&] { logical_and(x > 0.0f, y > 0.0f); },
       {"logical_and", "do not broadcast"}},
      {"logical_or: inputs on different placements", [&] { logical_or(x > 0.0f, xg > 0.0f); },
       {"logical_or", "share one placement"}},
      {"logical_not: a raw tensor beyond the world", [&] { logical_not(raw_beyond > 0.0f); }, {"names rank " + N}},
      {"where: a and b of shapes (4, 3) and (2, 5)", [&] { where(x > 0.0f, x, y); }, {"where", "do not broadcast"}},
      {"where: cond of another shape", [&] { where(y > 0.0f, x, x); }, {"where", "(2, 5)", "(4, 3)"}},
      {"masked_fill: a mask of another shape", [&] { masked_fill(x, y > 0.0f, 0.0f); },
       {"masked_fill", "mask of shape (2, 5)", "does not broadcast to x's shape (4, 3)"}},
      {"masked_fill: a mask larger than x", [&] { masked_fill(v, x > 0.0f, 1.0f); },
       {"masked_fill", "mask of shape (4, 3)", "x's shape (3,)"}},
      {"argmax: axis 2 of a 2-d tensor", [&] { argmax(x, 2); }, {"argmax", "axis 2", "out of range", "(4, 3)"}},
      {"argmin: axis -3 of a 2-d tensor", [&] { argmin(xi, -3); }, {"argmin", "axis -3", "out of range"}},
      {"from_host: a bool tensor in P(max)", [&] { from_host(Tensor<bool>::from_vector(Shape{2}, {true, false}), p, NdSbp(sbp::partial_max)); },
       {"from_host", "bool", "partial layout"}},
      {"to_global: a bool tensor to P(sum)", [&] { (x > 0.0f).to_global(NdSbp(sbp::partial_sum)); },
       {"to_global", "bool", "partial layout"}},
      // matmul
      {"matmul: a 1-d operand", [&] { matmul(v, x); }, {"matmul", "2 or more axes", "a is (3,)", "b is (4, 3)"}},
      {"matmul: inner dimensions 3 and 2", [&] { matmul(x, y); }, {"matmul", "inner dimensions differ", "(4, 3)", "(2, 5)"}},
      {"matmul: batch dimensions 2 and 3",
       [&] { matmul(x3, zeros<float>({3, 4, 1}, p, B)); },
       {"matmul", "batch dimensions do not broadcast", "(2, 3, 4)", "(3, 4, 1)", "2 vs 3"}},
      {"matmul: inputs on different placements", [&] { matmul(x, xg); }, {"matmul", "share one placement"}},
      // reductions
      {"sum: axis 2 of a 2-d tensor", [&] { sum(x, {2}); }, {"sum", "axis 2", "out of range", "(4, 3)"}},
      {"sum: axis -3 of a 2-d tensor", [&] { sum(x, {-3}); }, {"sum", "axis -3", "(4, 3)"}},
      {"sum: axis 0 of a 0-d tensor", [&] { sum(scalar, {0}); }, {"sum", "axis 0", "()"}},
      {"mean: axis repeated as 1 and -1", [&] { mean(x, {1, -1}); }, {"mean", "axis -1 is repeated", "[1, -1]", "(4, 3)"}},
      {"mean: an int64 tensor", [&] { mean(xi); }, {"mean", "floating tensors only", "int64", "(4, 3)"}},
      {"max: axis 5", [&] { spsd::max(x, {5}, true); }, {"max", "axis 5", "(4, 3)"}},
      {"min: axis INT64_MIN", [&] { spsd::min(xi, {std::numeric_limits<int64_t>::min()}); },
       {"min", "axis -9223372036854775808", "out of range"}},
      // softmax
      {"softmax: axis 2 of a 2-d tensor", [&] { softmax(x, 2); }, {"softmax", "axis 2", "(4, 3)"}},
      {"softmax: axis 0 of a 0-d tensor", [&] { softmax(scalar, 0); }, {"softmax", "axis 0", "()"}},
      {"log_softmax: axis -3", [&] { log_softmax(x, -3); }, {"log_softmax", "axis -3", "(4, 3)"}},
      {"log_softmax: an int64 tensor", [&] { log_softmax(xi, 0); }, {"log_softmax", "floating tensors only", "int64"}},
      // normalization and dropout
      {"layer_norm: weight (4,) for 3 columns",
       [&] { layer_norm(x, zeros<float>({4}, p, B), zeros<float>({3}, p, B)); },
       {"layer_norm", "weight must be (3) float32", "(4, 3)", "got (4,) float32"}},
      {"layer_norm: bias (2,) for 3 columns", [&] { layer_norm(x, zeros<float>({3}, p, B), zeros<float>({2}, p, B)); },
       {"layer_norm", "bias must be (3) float32", "got (2,) float32"}},
      {"layer_norm: an int64 tensor",
       [&] { layer_norm(xi, zeros<int64_t>({3}, p, B), zeros<int64_t>({3}, p, B)); },
       {"layer_norm", "floating tensors only", "int64", "(4, 3)"}},
      {"layer_norm: a 0-d tensor", [&] { layer_norm(scalar, zeros<float>({1}, p, B), zeros<float>({1}, p, B)); },
       {"layer_norm", "last axis", "()"}},
      {"rms_norm: eps = -1", [&] { rms_norm(x, zeros<float>({3}, p, B), -1.0); }, {"rms_norm", "eps", "-1"}},
      {"rms_norm: weight of a 3-d shape", [&] { rms_norm(x3, zeros<float>({2, 4}, p, B)); },
       {"rms_norm", "weight must be (4)", "(2, 3, 4)", "got (2, 4) float32"}},
      {"rms_norm: weight on another placement", [&] { rms_norm(x, zeros<float>({3}, grid, NdSbp{B, B})); },
       {"rms_norm", "share one placement"}},
      {"layer_norm: bias on another placement, the last axis split",
       [&] { layer_norm(zeros<float>({4, 3}, p, S1), zeros<float>({3}, p, B), zeros<float>({3}, grid, NdSbp{B, B})); },
       {"layer_norm", "share one placement"}},
      {"dropout: p = 1", [&] { dropout(x, 1.0, 0); }, {"dropout", "[0, 1)", "p = 1"}},
      {"dropout: p = -0.25", [&] { dropout(x, -0.25, 0); }, {"dropout", "p = -0.25"}},
      {"dropout: p = NaN", [&] { dropout(x, std::nan(""), 0); }, {"dropout", "p = nan"}},
      {"dropout: an int64 tensor", [&] { dropout(xi, 0.5, 0); }, {"dropout", "floating tensors only", "int64"}},
      // shape ops
      {"transpose: d1 = 2 of a 2-d tensor", [&] { transpose(x, 0, 2); }, {"transpose", "d1 2", "(4, 3)"}},
      {"transpose: d0 = -3", [&] { transpose(x, -3, 0); }, {"transpose", "d0 -3", "(4, 3)"}},
      {"permute: 3 entries for 2 axes", [&] { permute(x, {0, 1, 2}); },
       {"permute", "perm [0, 1, 2] has 3 entries", "(4, 3)", "2 axes"}},
      {"permute: a repeated axis", [&] { permute(x3, {0, 2, -1}); },
       {"permute", "[0, 2, -1]", "not a permutation", "(2, 3, 4)"}},
      {"permute: axis INT64_MIN", [&] { permute(x, {std::numeric_limits<int64_t>::min(), 0}); },
       {"permute", "not a permutation"}},
      {"reshape: 12 elements to (5, 2)", [&] { reshape(x, Shape{5, 2}); },
       {"reshape", "(4, 3)", "12 elements", "[5, 2]", "10 elements"}},
      {"reshape: two -1", [&] { reshape(x, {-1, -1}); }, {"reshape", "[-1, -1]", "more than one -1"}},
      {"reshape: a size of -2", [&] { reshape(x, std::vector<int64_t>{-2, -6}); },
       {"reshape", "[-2, -6]", "negative size -2"}},
      {"reshape: -1 that fits no size", [&] { reshape(x, {-1, 5}); }, {"reshape", "no size for -1", "12 elements"}},
      {"reshape: sizes overflowing int64",
       [&] { reshape(x, {int64_t{1} << 40, int64_t{1} << 40, -1}); }, {"reshape", "2^63 - 1"}},
      {"slice: end 5 beyond size 4", [&] { slice(x, 0, 1, 5); },
       {"slice", "[1, 5)", "axis 0", "(4, 3)", "end <= 4"}},
      {"slice: begin > end", [&] { slice(x, 1, 2, 1); }, {"slice", "[2, 1)", "axis 1"}},
      {"slice: negative begin", [&] { slice(x, -1, -1, 2); }, {"slice", "[-1, 2)", "axis -1"}},
      {"slice: axis 2 of a 2-d tensor", [&] { slice(x, 2, 0, 1); }, {"slice", "axis 2", "(4, 3)"}},
      {"concat: no inputs", [] { concat(std::vector<GlobalTensor<float>>{}, 0); }, {"concat", "at least one input"}},
      {"concat: axis 1 differs", [&] { concat({x, y}, 0); },
       {"concat", "input 1 has shape (2, 5)", "input 0 has shape (4, 3)", "axis 1 differs"}},
      {"concat: 2-d with 3-d", [&] { concat(std::vector<GlobalTensor<float>>{x, x3}, 1); },
       {"concat", "numbers of axes differ"}},
      {"concat: 0-d tensors", [&] { concat({scalar, scalar}, 0); }, {"concat", "0-d", "()"}},
      {"concat: axis 2 of 2-d tensors", [&] { concat({x, x}, 2); }, {"concat", "axis 2", "(4, 3)"}},
      {"concat: inputs on different placements", [&] { concat({x, xg}, 0); }, {"concat", "share one placement"}},
      // index ops and the loss
      {"embedding: a 3-d weight", [&] { embedding(x3, idx); }, {"embedding", "(V, E)", "(2, 3, 4)", "(4,)"}},
      {"embedding: an int64 weight", [&] { embedding(xi, idx); }, {"embedding", "floating", "int64"}},
      {"embedding: inputs on different placements", [&] { embedding(x, idx_g); }, {"embedding", "share one placement"}},
      {"pick: labels of another length", [&] { pick(x, zeros<int64_t>({3}, p, B)); },
       {"pick", "(..., C)", "(4, 3)", "(3,)"}},
      {"pick: an int64 x", [&] { pick(xi, idx); }, {"pick", "x must be floating", "int64"}},
      {"cross_entropy: int64 logits", [&] { cross_entropy(xi, idx); }, {"cross_entropy", "logits must be floating", "int64"}},
      {"pick: 1-d x", [&] { pick(v, zeros<int64_t>({3}, p, B)); }, {"pick", "x is (3,)"}},
      {"cross_entropy: 1-d logits", [&] { cross_entropy(v, idx); }, {"cross_entropy", "labels must be (...)", "(3,)"}},
      {"cross_entropy: 2-d labels", [&] { cross_entropy(x, xi); }, {"cross_entropy", "labels must be (...)", "(4, 3)"}},
      {"cross_entropy: N of 4 and 3", [&] { cross_entropy(x, zeros<int64_t>({3}, p, B)); },
       {"cross_entropy", "different leading axes", "(4, 3)", "(3,)"}},
      {"cross_entropy: inputs on different placements", [&] { cross_entropy(x, idx_g); },
       {"cross_entropy", "share one placement", "logits are on " + P, "labels on " + G}},
      // attention
      {"scaled_dot_product_attention: 3-d q", [&] { scaled_dot_product_attention(x3, x3, x3); },
       {"scaled_dot_product_attention", "4-d (batch, heads, seq, head_dim)", "q is (2, 3, 4)"}},
      {"scaled_dot_product_attention: head_dim 4 and 5",
       [&] { scaled_dot_product_attention(zeros<float>({1, 2, 3, 4}, p, B), zeros<float>({1, 2, 3, 5}, p, B),
                                          zeros<float>({1, 2, 3, 5}, p, B)); },
       {"scaled_dot_product_attention", "same head_dim", "(1, 2, 3, 4)", "(1, 2, 3, 5)"}},
      {"scaled_dot_product_attention: heads 2 and 3",
       [&] { scaled_dot_product_attention(zeros<float>({1, 2, 3, 4}, p, B), zeros<float>({1, 3, 3, 4}, p, B),
                                          zeros<float>({1, 3, 3, 4}, p, B)); },
       {"scaled_dot_product_attention", "same batch and heads", "(1, 2, 3, 4)", "(1, 3, 3, 4)"}},
      {"scaled_dot_product_attention: batch 1 and 2",
       [&] { scaled_dot_product_attention(zeros<float>({1, 2, 3, 4}, p, B), zeros<float>({2, 2, 3, 4}, p, B),
                                          zeros<float>({2, 2, 3, 4}, p, B), true); },
       {"scaled_dot_product_attention", "same batch and heads", "(1, 2, 3, 4)", "(2, 2, 3, 4)"}},
      {"scaled_dot_product_attention: k of 3 keys, v of 5",
       [&] { scaled_dot_product_attention(zeros<float>({1, 2, 3, 4}, p, B), zeros<float>({1, 2, 3, 4}, p, B),
                                          zeros<float>({1, 2, 5, 4}, p, B)); },
       {"scaled_dot_product_attention", "k and v of the same shape", "k is (1, 2, 3, 4)", "v is (1, 2, 5, 4)"}},
      {"scaled_dot_product_attention: int64 tensors",
       [&] { auto t = zeros<int64_t>({1, 2, 3, 4}, p, B); scaled_dot_product_attention(t, t, t); },
       {"scaled_dot_product_attention", "floating tensors only", "int64"}},
      // autograd
      {"backward: a loss of 4 elements", [&] { backward(sum(leaf(), {1})); },
       {"backward", "must be a scalar", "(2,) float32"}},
      {"backward: a loss that does not require grad", [&] { backward(sum(x)); }, {"backward", "does not require grad"}},
      {"backward: a gradient of another shape", [&] { backward(relu(leaf()), ones<float>({2}, p, B)); },
       {"backward", "output gradient", "(2, 2) float32", "(2,) float32"}},
      {"NoGradGuard: a loss computed under it", [&] {
         auto w = leaf();
         NoGradGuard guard;
         backward(sum(w * w));
       }, {"backward", "does not require grad", "NoGradGuard"}},
      {"SGD: no parameters", [] { SGD<float>(std::vector<GlobalTensor<float>>{}, {}); }, {"SGD", "at least one parameter"}},
      {"GradScaler: init_scale 0", [] { GradScaler({.init_scale = 0}); }, {"GradScaler", "init_scale", "got 0"}},
      {"GradScaler: backoff_factor 1.5", [] { GradScaler({.backoff_factor = 1.5}); },
       {"GradScaler", "backoff_factor", "1.5"}},
      {"SGD: a parameter without requires_grad", [&] { SGD<float>({x}, {}); },
       {"SGD", "parameter 0", "(4, 3) float32", "requires_grad_()"}},
      {"SGD: lr -1", [&] { SGD<float>({leaf()}, {.lr = -1}); }, {"SGD", "lr must be finite and >= 0", "got -1"}},
      {"SGD: momentum 2", [&] { SGD<float>({leaf()}, {.momentum = 2}); }, {"SGD", "momentum must be in [0, 1]", "got 2"}},
      {"SGD: nesterov without momentum", [&] { SGD<float>({leaf()}, {.nesterov = true}); },
       {"SGD", "nesterov needs momentum > 0"}},
      {"SGD: a parameter listed twice", [&] { auto w = leaf(); SGD<float>({w, w}, {}); },
       {"SGD", "parameter 1", "listed twice"}},
      {"SGD: a partial parameter",
       [&] { SGD<float>({GlobalTensor<float>(zeros<float>({2}, p, sbp::partial_sum)).requires_grad_()}, {}); },
       {"SGD", "parameter 0", "is partial"}},
      {"Adam: beta1 = 1", [&] { Adam<float>({leaf()}, {.beta1 = 1}); }, {"Adam", "beta1 must be in", "got 1"}},
      {"Adam: eps = 0", [&] { Adam<double>({GlobalTensor<double>(xd).requires_grad_()}, {.eps = 0}); },
       {"Adam", "eps must be in", "got 0"}},
      {"AdamW: weight_decay -0.5", [&] { AdamW<float>({leaf()}, {.weight_decay = -0.5}); },
       {"AdamW", "weight_decay must be in", "got -0.5"}},
      {"SGD: load_state with 2 momenta for 1 parameter",
       [&] { SGD<float>({leaf()}, {.momentum = 0.9}).load_state({std::vector<std::optional<GlobalTensor<float>>>(2)}); },
       {"SGD", "load_state: momentum has 2 entries for 1 parameters"}},
      {"Adam: load_state with steps -1", [&] { Adam<float>({leaf()}, {}).load_state({.steps = -1}); },
       {"Adam", "load_state: steps must be non-negative, got -1"}},
      {"Adam: load_state with an exp_avg_sq of another shape, leaving the state as it was",
       [&] {
         Adam<float> adam({leaf()}, {});
         try {
           adam.load_state({.steps = 2, .exp_avg = {zeros<float>({2, 2}, p, B)}, .exp_avg_sq = {zeros<float>({3}, p, B)}});
         } catch (const Error&) {
           if (adam.state().steps != 0 || adam.state().exp_avg[0]) throw Error("Adam: a rejected load_state was half taken");
           throw;
         }
       },
       {"Adam", "load_state: exp_avg_sq 0 is (3,) float32", "its parameter is (2, 2) float32"}},
      {"AdamW: beta2 NaN", [&] { AdamW<float>({leaf()}, {.beta2 = std::nan("")}); }, {"AdamW", "beta2", "got nan"}},
      // issue 38: misuse that gave silent wrong results, and the training utilities' arguments
      {"backward: through a graph an earlier backward ran through", [&] { backward(freed_loss); },
       {"backward", "freed by an earlier backward", "retain_graph = true"}},
      {"backward: a saved tensor written by copy_ since the forward pass", [&] { backward(stale_loss); },
       {"backward", "input 0 of exp", "modified in place", "is at version 1, it was saved at version 0"}},
      {"GlobalTensor::GlobalTensor: an undefined tensor given to an op", [&] { relu(GlobalTensor<float>()); },
       {"relu", "input 0 is undefined", "GlobalTensor<float32>"}},
      {"GlobalTensor::defined: false, and the shape of such a tensor",
       [&] { GlobalTensor<float> u; if (!u.defined()) (void)u.shape(); }, {"GlobalTensor::shape", "undefined"}},
      {"SGD: a parameter name with a space", [&] { SGD<float>({{"a b", leaf()}}, {}); },
       {"SGD", "parameter 0 is named \"a b\"", "without spaces"}},
      {"SGD: two parameters of one name", [&] { SGD<float>({{"w", leaf()}, {"w", leaf()}}, {}); },
       {"SGD", "parameter 1 is named \"w\" like an earlier one"}},
      {"Optimizer::set_lr: -1", [&] { SGD<float>({leaf()}, {}).set_lr(-1); }, {"SGD.set_lr", "finite and >= 0", "-1"}},
      {"Optimizer::load_state_dict: an empty state dict", [&] { Adam<float>({leaf()}, {}).load_state_dict(StateDict{}); },
       {"Adam.load_state_dict", "the state dict has no \"state.0.exp_avg\""}},
      {"StateDict::merge: a name both hold",
       [&] { StateDict a, b; a.insert("w", x); b.insert("w", x); a.merge(b); }, {"StateDict::merge", "\"w\""}},
      {"LinearWarmup: warmup_steps 0", [&] { Adam<float> a({leaf()}, {}); LinearWarmup s(a, {}); },
       {"LinearWarmup", "warmup_steps must be >= 1, got 0"}},
      {"CosineWithWarmup: total_steps 3 with warmup_steps 5",
       [&] { Adam<float> a({leaf()}, {}); CosineWithWarmup s(a, {.warmup_steps = 5, .total_steps = 3}); },
       {"CosineWithWarmup", "total_steps (3) must be greater than warmup_steps (5)"}},
      {"StepDecay: gamma 2", [&] { Adam<float> a({leaf()}, {}); StepDecay s(a, {.step_size = 2, .gamma = 2}); },
       {"StepDecay", "gamma must be in [0, 1], got 2"}},
      {"LambdaLR: a function giving NaN",
       [&] { Adam<float> a({leaf()}, {}); LambdaLR s(a, [](int64_t) { return std::nan(""); }); },
       {"LambdaLR", "the factor at step 0 is nan"}},
      {"LRScheduler::load_state_dict: no last_step",
       [&] { Adam<float> a({leaf()}, {}); StepDecay s(a, {.step_size = 2}); s.load_state_dict(StateDict{}, "x."); },
       {"StepDecay.load_state_dict", "no \"x.last_step\""}},
      {"clip_grad_norm_: max_norm -1", [&] { clip_grad_norm_<float>({leaf()}, -1); },
       {"clip_grad_norm_", "max_norm must be >= 0, got -1"}},
      {"clip_grad_norm_: norm_type 0", [&] { clip_grad_norm_<float>({leaf()}, 1, 0); },
       {"clip_grad_norm_", "norm_type must be > 0", "got 0"}},
      {"clip_grad_norm_: a parameter that does not require grad", [&] { clip_grad_norm_<float>({x}, 1); },
       {"clip_grad_norm_", "parameter 0", "must be a leaf that requires grad"}},
      {"clip_grad_value_: clip_value -0.5", [&] { clip_grad_value_<float>({leaf()}, -0.5); },
       {"clip_grad_value_", "clip_value must be >= 0, got -0.5"}},
  };
  cases.insert(cases.end(), more.begin(), more.end());

  // Issue 25 (misc): negative split axes beyond the tensor's axes, item() of more than one
  // element, distribute's source rank outside the world (all before any communication).
  const std::vector<Case> issue25_misc = {
      {"sbp::split: axis -3 of a 2-d tensor", [&] { zeros<float>({4, 3}, p, sbp::split(-3)); },
       {"zeros", "splits axis -3", "(4, 3)", "2 axes"}},
      {"box_of: split axis -2 of a 1-d tensor", [&] { box_of(Shape{4}, p, sbp::split(-2), r); },
       {"box_of", "splits axis -2", "(4,)"}},
      {"GlobalTensor::item: 12 elements", [&] { x.item(); }, {"item", "one element", "(4, 3)", "12 elements"}},
      {"GlobalTensor::item: a raw piece too small", [&] { GlobalTensor<float>(Shape{1}, p, B, Tensor<float>()).item(); },
       {"item", "holds no data on rank " + R}},
      {"distribute: src_rank n", [&] { distribute(two, p, S0, n); },
       {"distribute", "src_rank " + N, "world of " + N + " ranks"}},
      {"distribute: src_rank -1", [&] { distribute(two, p, S0, -1); }, {"distribute", "src_rank -1"}},
      {"distribute: a placement beyond the world", [&] { distribute(two, beyond, S0, 0); },
       {"distribute", "names rank " + N}},
  };
  cases.insert(cases.end(), issue25_misc.begin(), issue25_misc.end());

  // Without a usable CUDA device (every CPU-only build), cuda entry points name why.
  if (!cuda_available()) {
    const std::vector<Case> no_device = {
        {"device: without a usable device", [] { device(); }, {"device", "cuda tensors need"}},
        {"device_allocator_stats: without a usable device", [] { device_allocator_stats(); },
         {"device_allocator_stats", "cuda tensors need"}},
        {"empty_device_cache: without a usable device", [] { empty_device_cache(); },
         {"empty_device_cache", "cuda tensors need"}},
        {"cuda_available: a cuda placement then fails", [&] { zeros<float>({2}, Placement("cuda", all_ranks), B); },
         {"zeros", "cuda tensors need"}},
        {"Tensor::to: cuda without a usable device", [&] { two.to(DeviceType::kCUDA); },
         {"Storage::allocate", "cuda tensors need"}},
        {"Tensor: a cuda tensor without a usable device", [] { Tensor<float>(Shape{2}, DeviceType::kCUDA); },
         {"Storage::allocate", "cuda tensors need"}},
        {"Tensor::from_vector: onto cuda without a usable device",
         [] { Tensor<float>::from_vector({2}, {1, 2}, DeviceType::kCUDA); }, {"Storage::allocate", "cuda tensors need"}},
        // Refused before any rank gathers or moves anything (run_cases checks no traffic).
        {"GlobalTensor::to_global: to a cuda placement without a usable device",
         [&] { x.to_global(Placement("cuda", all_ranks), S0); }, {"to_global", "cuda tensors need"}},
        {"to_global: a cuda placement without a usable device", [&] { to_global(two, Placement("cuda", all_ranks), B); },
         {"to_global", "cuda tensors need"}},
        {"from_host: a cuda placement without a usable device", [&] { from_host(two, Placement("cuda", all_ranks), B); },
         {"from_host", "cuda tensors need"}},
    };
    cases.insert(cases.end(), no_device.begin(), no_device.end());
  }
  run_cases(failures, covered, cases);
  return static_cast<int>(cases.size());
}

}  // namespace

// ---- Coverage: the public API and the cases that reach it ----
//
// Every public function of spsd: API.md and the public headers under include/spsd/ (namespace
// spsd and its public sub-namespaces; spsd::detail excluded). A case named "NAME: what" covers
// NAME; run_misuse_catalogue fails if an entry has no case. "(e)" marks entries covered by an
// edge case (edge_cases.cpp: a documented result at the edge, or an error found after
// communicating) rather than an argument rejected up front.
//
//   header                  functions (cases)
//   core/error.hpp          Error (every case: the type thrown)
//   core/shape.hpp          Shape (negative dim, overflow), Shape::operator[] (axis out of range),
//                           Shape::numel (e: 0 for a zero dim), contiguous_strides (e)
//   core/dtype.hpp          to_string(DType) (e), size_of (e), is_floating (e), visit_dtype (bad value)
//   core/reduce_op.hpp      reduce_identity (e), wrapping_add (e: wraps), combine_into (e: NaN)
//   layout/placement.hpp    Placement (empty, "tpu", negative, duplicate, ragged rows, mesh/count
//                           mismatch), parse_device_type, Placement::coords, Placement::rank_at,
//                           Placement::contains (e), mesh_group (axis out of range, repeated),
//                           check_placement (beyond the world)
//   layout/sbp.hpp          sbp::split (negative axis beyond ndim), Sbp::axis, Sbp::reduce_op, sbp::partial
//                           (invalid op; e)
//   layout/nd_sbp.hpp       NdSbp (empty), NdSbp::operator[]
//   layout/split.hpp        balanced_range, balanced_split, check_layout, box_of, boxes_of,
//                           local_shape, intersect and overlap (axes differ; e), full_box (e),
//                           box_at (coords, split axis; e)
//   layout/partial.hpp      holds_partial_value, filler_op (rank outside the placement, nd_sbp
//                           length)
//   layout/diagram.hpp      layout_diagram (bad layout; e: empty pieces)
//   comm/communicator.hpp   Communicator::all_reduce .. ::send_recv (counts, roots, peers, null
//                           buffers, invalid DType/ReduceOp), displacements (e)
//   comm/half_reduction.hpp set_half_reduction (invalid mode; the settings: collective suite)
//   comm/stats.hpp          comm_stats, reset_comm_stats (without a Runtime), CommStats::calls_of
//                           (invalid kind), to_string(CollectiveKind) (e: an invalid value named)
//   comm/traffic.hpp        traffic::all_reduce (rank outside; e: nothing for count 0 or one
//                           rank), traffic::reduce_scatter, traffic::broadcast (member outside)
//   op/signature.hpp        nd_signature (empty choice, a choice beyond the table)
//   runtime/runtime.hpp     Runtime, rank, world_size, local_rank, synchronize, simulate,
//                           communicator, world_communicator, set_timeout, timeout, runtime_info
//                           (without a Runtime / bad values; simulate: empty body), check_placement
//   runtime/scheduler.hpp   set_inline_bytes (negative), set_synchronous, synchronous,
//                           inline_bytes, comm_stream_stats, reset_comm_stream_stats (no Runtime)
//   runtime/device.hpp      device, device_allocator_stats, empty_device_cache, cuda_available
//                           (without a usable device: an Error naming why, and cuda placements,
//                           tensors and factories refused before any communication)
//   tensor/storage.hpp      Storage::allocate (negative bytes), Storage::adopt (result too small)
//   tensor/tensor.hpp       Tensor (storage too small), Tensor::from_vector (count), Tensor::to
//                           (cuda without a device), Tensor::to_vector (e: undefined tensor)
//   tensor/global_tensor.hpp GlobalTensor::to_global (both forms: bad nd_sbp, beyond the world;
//                           raw tensors: bad nd_sbp, no piece, piece too small), GlobalTensor::full
//                           (raw piece too small; e), GlobalTensor::to_local (e: outside the
//                           placement), GlobalTensor::from_data (dtype), requires_grad_ (integer,
//                           non-leaf), grad (three ways), copy_ (shape, raw pieces too small on
//                           either side), detach (e), zero_grad (e),
//                           GlobalTensor::item (not one element, no piece)
//   tensor/factory.hpp      zeros, ones, full, arange, rand, randn, from_host (bad layouts, beyond
//                           the world, negative n, undefined tensor; e: empty shapes, data
//                           differing across ranks), to_global(local, ...) (both forms; e: local
//                           shapes that fit no layout, an undefined local Tensor on any rank),
//                           distribute (src_rank outside the world, placement beyond it)
//   tensor/random.hpp       philox::uniform, philox::normal (e: range at extreme indices)
//   boxing/planner.hpp      explain_boxing, plan_boxing (bad layouts, invalid DType)
//   boxing/cost.hpp         cost_model, latency_rounds, step_cost_us (e: one rank costs no rounds)
//   op/resolve.hpp          resolve (input count mismatch), op_schema (through resolve)
//   op/elementwise.hpp      add, sub, mul, div (shapes, dtypes, placements, integer / 0),
//                           operator+ - * / (e and misuse), add/sub/mul/div scalar forms, neg, relu,
//                           gelu, exp, log, tanh, sigmoid, sqrt, abs, rsqrt, erf, silu (dtype,
//                           gelu's approximation; e: NaN, empty), pow (dtype, shapes)
//   op/reduce.hpp (var)     var (correction, axes)
//   op/compare.hpp          lt le gt ge eq ne and their operators (shapes, placements, bool
//                           orderings), logical_and/or/not (shapes, placements)
//   op/where.hpp            where (shapes), masked_fill (mask shape)
//   op/arg_reduce.hpp       argmax, argmin (axis)
//   op/matmul.hpp           matmul (1-d, inner dims, batch dims, placements; e: k = 0, m = 0)
//   op/reduce.hpp           sum, mean, max, min (axes out of range, repeated, mean of ints; e:
//                           empty axes, NaN)
//   op/softmax.hpp          softmax, log_softmax (axis, integer; e: empty axis, NaN rows)
//   op/normalization.hpp    layer_norm, rms_norm (weight / bias shapes, integer, 0-d, eps)
//   op/dropout.hpp          dropout (p outside [0, 1), NaN, integer)
//   op/shape_ops.hpp        transpose, permute, reshape (three forms), slice, concat (two forms)
//   op/index.hpp            embedding, pick (shapes, dtypes; e: no indices, out of range)
//   op/attention.hpp        scaled_dot_product_attention (rank, batch / heads / head_dim / seq_k
//                           mismatches, integer dtype)
//   op/loss.hpp             cross_entropy (shapes, dtype, placements; e: N = 0, C = 0, NaN logits)
//   op/dispatch.hpp         every op: raw GlobalTensors whose nd_sbp, placement or piece
//                           (missing, too small) does not fit (the dispatch path's own checks)
//   autograd/backward.hpp   backward (not a scalar, no grad, gradient shape)
//   autograd/node.hpp       NoGradGuard, is_grad_enabled (e: nothing recorded under it)
//   autograd/grad_scaler.hpp GradScaler (options out of range; its step/skip logic: grad_scaler_suite)
//   runtime/matmul_precision.hpp set_matmul_precision (invalid value)
//   autograd/optim.hpp      SGD, Adam, AdamW (no parameters, not requiring grad, listed twice,
//                           partial, options out of range, names with spaces or repeated,
//                           load_state: entry count, shape, steps, nothing taken when rejected),
//                           Optimizer::step (e: no gradient), Optimizer::zero_grad (e),
//                           Optimizer::set_lr (negative), Optimizer::load_state_dict (missing
//                           entry); state_dict, lr and an optimizer made before nn::parallelize:
//                           test/common/training_checks.cpp
//   autograd/lr_scheduler.hpp LinearWarmup, CosineWithWarmup, StepDecay, LambdaLR (options, a
//                           factor that is not finite), LRScheduler::load_state_dict (missing entry)
//   autograd/clip_grad.hpp  clip_grad_norm_ (max_norm, norm_type, a parameter without grad),
//                           clip_grad_value_ (clip_value)
//   autograd/saved_tensors.hpp (through backward: a freed graph, a saved tensor written since)
//   tensor/state_dict.hpp   StateDict::merge (a name both hold)
//   tensor/global_tensor.hpp GlobalTensor::GlobalTensor (an undefined tensor given to an op),
//                           GlobalTensor::defined
// Not listed: spsd::kernel (internal: called by the ops only, after their checks), spsd::detail,
// and io/checkpoint.hpp (its own suite).
const std::vector<std::string>& public_api() {
  static const std::vector<std::string> api = {
      "Shape", "Shape::operator[]", "Shape::numel", "contiguous_strides", "to_string(DType)", "size_of", "is_floating",
      "visit_dtype", "reduce_identity", "wrapping_add", "combine_into",
      "Placement", "parse_device_type", "Placement::coords", "Placement::rank_at", "Placement::contains", "mesh_group",
      "check_placement", "sbp::split", "Sbp::axis", "Sbp::reduce_op", "sbp::partial", "NdSbp", "NdSbp::operator[]",
      "balanced_range", "balanced_split", "check_layout", "box_of", "boxes_of", "local_shape", "intersect", "overlap",
      "full_box", "box_at", "holds_partial_value", "filler_op", "layout_diagram",
      "Communicator::all_reduce", "Communicator::reduce_scatter", "Communicator::reduce_scatter_v",
      "Communicator::all_gather", "Communicator::all_gather_v", "Communicator::all_to_all",
      "Communicator::all_to_all_v", "Communicator::broadcast", "Communicator::send_recv", "displacements",
      "set_half_reduction",
      "comm_stats", "reset_comm_stats", "CommStats::calls_of", "to_string(CollectiveKind)", "traffic::all_reduce",
      "traffic::reduce_scatter", "traffic::broadcast", "nd_signature",
      "Runtime", "rank", "world_size", "local_rank", "synchronize", "simulate", "communicator", "world_communicator",
      "set_timeout", "timeout", "runtime_info", "set_inline_bytes", "set_synchronous", "synchronous", "inline_bytes",
      "comm_stream_stats", "reset_comm_stream_stats", "device", "device_allocator_stats", "empty_device_cache",
      "cuda_available",
      "Storage::allocate", "Storage::adopt", "Tensor", "Tensor::from_vector", "Tensor::to", "Tensor::to_vector",
      "GlobalTensor::to_global", "GlobalTensor::full", "GlobalTensor::to_local", "GlobalTensor::from_data",
      "GlobalTensor::requires_grad_", "GlobalTensor::grad", "GlobalTensor::copy_", "GlobalTensor::detach",
      "GlobalTensor::zero_grad",
      "GlobalTensor::item", "distribute",  // issue 25 (misc)
      "zeros", "ones", "full", "arange", "rand", "randn", "from_host", "to_global", "philox::uniform", "philox::normal",
      "explain_boxing", "plan_boxing", "cost_model", "latency_rounds", "step_cost_us", "resolve",
      "add", "sub", "mul", "div", "operator+", "operator-", "operator*", "operator/", "add_scalar", "sub_scalar",
      "rsub_scalar", "mul_scalar", "div_scalar", "rdiv_scalar", "neg", "relu", "gelu", "exp", "log", "tanh", "sigmoid",
      "sqrt", "abs", "matmul", "sum", "mean", "max", "min", "softmax", "log_softmax", "transpose", "permute",
      "reshape", "slice", "concat", "embedding", "pick", "cross_entropy", "dispatch",
      "scaled_dot_product_attention",
      "backward", "NoGradGuard", "is_grad_enabled", "SGD", "Adam", "AdamW", "Optimizer::step", "Optimizer::zero_grad",
      "GradScaler", "set_matmul_precision",
      "layer_norm", "rms_norm", "dropout",
      "rsqrt", "erf", "silu", "pow", "var", "lt", "le", "gt", "ge", "eq", "ne", "operator<", "operator<=", "operator>",
      "operator>=", "operator==", "operator!=", "logical_and", "logical_or", "logical_not", "where", "masked_fill",
      "argmax", "argmin",
      // issue 38
      "GlobalTensor::GlobalTensor", "GlobalTensor::defined", "Optimizer::set_lr", "Optimizer::load_state_dict",
      "StateDict::merge", "LinearWarmup", "CosineWithWarmup", "StepDecay", "LambdaLR", "LRScheduler::load_state_dict",
      "clip_grad_norm_", "clip_grad_value_",
  };
  return api;
}

int run_misuse_catalogue(Failures& failures) {
  using spsd::DType;
  using spsd::ReduceOp;
  using std::to_string;
  const int64_t n = spsd::world_size(), r = spsd::rank();
  spsd::Communicator& c = spsd::world_communicator();
  const std::string N = to_string(n), R = to_string(r);
  const DType f32 = DType::kFloat32;
  const ReduceOp sum = ReduceOp::kSum;
  std::vector<float> in(64, 1.0f), out(64, 0.0f);
  const float* x = in.data();
  float* y = out.data();
  std::vector<int64_t> ones(n, 1), too_many(n + 1, 1), too_few(n - 1, 1), negative(n, 1);
  negative.back() = -2;
  const std::string per_member = "one entry per member (" + N + ")";
  const std::vector<int64_t> outside = {0, n}, duplicate = {r, r};

  std::vector<Case> cases = {
      // Negative counts.
      {"Communicator::all_reduce: count -1", [&] { c.all_reduce(x, y, -1, f32, sum); }, {"all_reduce", "count", "-1"}},
      {"Communicator::reduce_scatter: recv_count -2", [&] { c.reduce_scatter(x, y, -2, f32, sum); },
       {"reduce_scatter", "recv_count", "-2"}},
      {"Communicator::all_gather: send_count -3", [&] { c.all_gather(x, y, -3, f32); }, {"all_gather", "send_count", "-3"}},
      {"Communicator::all_to_all: count_per_peer -1", [&] { c.all_to_all(x, y, -1, f32); }, {"all_to_all", "count_per_peer", "-1"}},
      {"Communicator::broadcast: count -4", [&] { c.broadcast(y, -4, f32, 0); }, {"broadcast", "count", "-4"}},
      {"Communicator::send_recv: send count -1", [&] { c.send_recv(std::vector<spsd::SendSpec>{{r, x, -1}}, {}, f32); },
       {"send_recv", "send count", "-1"}},
      {"Communicator::send_recv: recv count -5", [&] { c.send_recv({}, std::vector<spsd::RecvSpec>{{r, y, -5}}, f32); },
       {"send_recv", "recv count", "-5"}},
      // Count vectors of the wrong length.
      {"Communicator::reduce_scatter_v: with n + 1 counts", [&] { c.reduce_scatter_v(x, y, too_many, f32, sum); },
       {"reduce_scatter", "recv_counts", per_member, "got " + to_string(n + 1) + " entries"}},
      {"Communicator::all_gather_v: with n - 1 counts", [&] { c.all_gather_v(x, y, too_few, f32); },
       {"all_gather", "recv_counts", per_member, "got " + to_string(n - 1) + " entries"}},
      {"Communicator::all_to_all_v: with n + 1 send counts", [&] { c.all_to_all_v(x, too_many, y, ones, f32); },
       {"all_to_all", "send_counts", per_member, "got " + to_string(n + 1) + " entries"}},
      {"Communicator::all_to_all_v: with n - 1 recv counts", [&] { c.all_to_all_v(x, ones, y, too_few, f32); },
       {"all_to_all", "recv_counts", per_member, "got " + to_string(n - 1) + " entries"}},
      // A negative entry in a counts vector.
      {"Communicator::reduce_scatter_v: negative entry", [&] { c.reduce_scatter_v(x, y, negative, f32, sum); },
       {"reduce_scatter", "recv_counts", "non-negative", list(negative)}},
      {"Communicator::all_gather_v: negative entry", [&] { c.all_gather_v(x, y, negative, f32); },
       {"all_gather", "recv_counts", "non-negative", list(negative)}},
      {"Communicator::all_to_all_v: negative send entry", [&] { c.all_to_all_v(x, negative, y, ones, f32); },
       {"all_to_all", "send_counts", "non-negative", list(negative)}},
      {"Communicator::all_to_all_v: negative recv entry", [&] { c.all_to_all_v(x, ones, y, negative, f32); },
       {"all_to_all", "recv_counts", "non-negative", list(negative)}},
      // Roots and peers outside the communicator.
      {"Communicator::broadcast: root n", [&] { c.broadcast(y, 1, f32, n); }, {"broadcast", "root " + N, "not a member"}},
      {"Communicator::broadcast: root -1", [&] { c.broadcast(y, 1, f32, -1); }, {"broadcast", "root -1", "not a member"}},
      {"Communicator::send_recv: send peer n", [&] { c.send_recv(std::vector<spsd::SendSpec>{{n, x, 1}}, {}, f32); },
       {"send_recv", "send peer " + N, "not a member"}},
      {"Communicator::send_recv: recv peer -1", [&] { c.send_recv({}, std::vector<spsd::RecvSpec>{{-1, y, 1}}, f32); },
       {"send_recv", "recv peer -1", "not a member"}},
      // Null buffers with elements to move.
      {"Communicator::all_reduce: null send", [&] { c.all_reduce(nullptr, y, 3, f32, sum); },
       {"all_reduce", "send is null", "3 elements"}},
      {"Communicator::all_reduce: null recv", [&] { c.all_reduce(x, nullptr, 3, f32, sum); },
       {"all_reduce", "recv is null", "3 elements"}},
      {"Communicator::reduce_scatter: null send", [&] { c.reduce_scatter(nullptr, y, 1, f32, sum); },
       {"reduce_scatter", "send is null", N + " elements"}},
      {"Communicator::reduce_scatter: null recv", [&] { c.reduce_scatter(x, nullptr, 1, f32, sum); },
       {"reduce_scatter", "recv is null", "1 elements"}},
      {"Communicator::all_gather: null send", [&] { c.all_gather(nullptr, y, 2, f32); }, {"all_gather", "send is null", "2 elements"}},
      {"Communicator::all_gather: null recv", [&] { c.all_gather(x, nullptr, 2, f32); },
       {"all_gather", "recv is null", to_string(2 * n) + " elements"}},
      {"Communicator::all_to_all: null send", [&] { c.all_to_all(nullptr, y, 1, f32); },
       {"all_to_all", "send is null", N + " elements"}},
      {"Communicator::all_to_all: null recv", [&] { c.all_to_all(x, nullptr, 1, f32); },
       {"all_to_all", "recv is null", N + " elements"}},
      {"Communicator::broadcast: null buffer", [&] { c.broadcast(nullptr, 2, f32, 0); }, {"broadcast", "buffer is null", "2 elements"}},
      {"Communicator::send_recv: null send data", [&] { c.send_recv(std::vector<spsd::SendSpec>{{r, nullptr, 2}}, {}, f32); },
       {"send_recv", "send data is null", "2 elements"}},
      {"Communicator::send_recv: null recv data", [&] { c.send_recv({}, std::vector<spsd::RecvSpec>{{r, nullptr, 2}}, f32); },
       {"send_recv", "recv data is null", "2 elements"}},
      // Enum values cast from integers that name nothing.
      {"Communicator::all_reduce: an invalid ReduceOp", [&] { c.all_reduce(x, y, 1, f32, static_cast<ReduceOp>(7)); },
       {"all_reduce", "reduce op has the invalid value 7"}},
      {"Communicator::all_reduce: an invalid DType", [&] { c.all_reduce(x, y, 1, static_cast<DType>(9), sum); },
       {"all_reduce", "dtype has the invalid value 9"}},
      {"Communicator::reduce_scatter: an invalid ReduceOp", [&] { c.reduce_scatter(x, y, 1, f32, static_cast<ReduceOp>(-1)); },
       {"reduce_scatter", "reduce op has the invalid value -1"}},
      {"Communicator::all_gather: an invalid DType", [&] { c.all_gather(x, y, 1, static_cast<DType>(9)); },
       {"all_gather", "dtype has the invalid value 9"}},
      {"Communicator::all_to_all: an invalid DType", [&] { c.all_to_all(x, y, 1, static_cast<DType>(9)); },
       {"all_to_all", "dtype has the invalid value 9"}},
      {"Communicator::broadcast: an invalid DType", [&] { c.broadcast(y, 1, static_cast<DType>(9), 0); },
       {"broadcast", "dtype has the invalid value 9"}},
      {"Communicator::send_recv: an invalid DType", [&] { c.send_recv({}, {}, static_cast<DType>(9)); },
       {"send_recv", "dtype has the invalid value 9"}},
      {"set_half_reduction: an invalid mode", [] { spsd::set_half_reduction(static_cast<spsd::HalfReduction>(5)); },
       {"set_half_reduction", "kNative or kFloat32Wire", "got the value 5"}},
      // communicator() over bad rank lists.
      {"communicator: with a rank outside the world", [&] { spsd::communicator(outside); },
       {"communicator", list(outside), "rank " + N, "world has " + N + " ranks"}},
      {"communicator: with a negative rank", [&] { spsd::communicator(std::vector<int64_t>{-1, r}); },
       {"communicator", list({-1, r}), "name rank -1", "world has " + N + " ranks"}},
      {"communicator: with duplicate ranks", [&] { spsd::communicator(duplicate); },
       {"communicator", list(duplicate), "rank " + R + " more than once"}},
      {"communicator: with no ranks", [&] { spsd::communicator(std::vector<int64_t>{}); },
       {"communicator", "world ranks must not be empty"}},
      // Runtime misuse.
      {"set_timeout: 0", [&] { spsd::set_timeout(std::chrono::milliseconds(0)); }, {"set_timeout", "positive", "0 ms"}},
      {"set_timeout: -5 ms", [&] { spsd::set_timeout(std::chrono::milliseconds(-5)); },
       {"set_timeout", "positive", "-5 ms"}},
      {"Runtime: a second Runtime on this thread", [] { spsd::Runtime second; }, {"Runtime", "already active"}},
      {"simulate: simulate(0)", [] { spsd::simulate(0, [] {}); }, {"simulate", "world_size", "got 0"}},
      {"simulate: simulate(-3)", [] { spsd::simulate(-3, [] {}); }, {"simulate", "world_size", "got -3"}},
      {"simulate: an empty body", [] { spsd::simulate(2, std::function<void()>{}); }, {"simulate", "body is empty"}},
      {"rank: without a Runtime", [] { on_fresh_thread([] { spsd::rank(); }); }, {"rank", "no spsd::Runtime"}},
      {"world_size: without a Runtime", [] { on_fresh_thread([] { spsd::world_size(); }); },
       {"world_size", "no spsd::Runtime"}},
      {"comm_stats: without a Runtime", [] { on_fresh_thread([] { spsd::comm_stats(); }); },
       {"comm_stats", "no spsd::Runtime"}},
      {"world_communicator: without a Runtime", [] { on_fresh_thread([] { spsd::world_communicator(); }); },
       {"world_communicator", "no spsd::Runtime"}},
      {"communicator: without a Runtime",
       [] { on_fresh_thread([] { spsd::communicator(std::vector<int64_t>{0}); }); },
       {"communicator", "no spsd::Runtime"}},
  };
  if (n >= 2) {
    const std::vector<int64_t> others = {(r + 1) % n};
    cases.push_back({"communicator: without the caller", [&, others] { spsd::communicator(others); },
                     {"communicator", "rank " + R, "not among", list(others)}});
  }

  std::set<std::string> covered;
  run_cases(failures, covered, cases);
  int count = static_cast<int>(cases.size()) + run_api_cases(failures, covered, n, r);

  // Nothing above may have broken the runtime or the world communicator.
  if (spsd::rank() != r) failures.add("after the misuse catalogue: rank() is " + to_string(spsd::rank()) + ", not " + R);
  int64_t mine = r + 1, total = 0;
  c.all_reduce(&mine, &total, 1, DType::kInt64, sum);
  if (total != n * (n + 1) / 2)
    failures.add("after the misuse catalogue, world rank " + R + ": all_reduce gave " + to_string(total) +
                 ", expected " + to_string(n * (n + 1) / 2));

  // Part 2, then coverage: every public function has a case.
  count += run_edge_cases(failures, covered);
  for (const std::string& api : public_api())
    if (!covered.count(api)) failures.add("coverage: no catalogue case reaches the public function " + api);
  for (const std::string& api : covered)
    if (std::find(public_api().begin(), public_api().end(), api) == public_api().end())
      failures.add("coverage: case prefix \"" + api + "\" is not a name of public_api()");
  return count;
}

}  // namespace spsd_test
