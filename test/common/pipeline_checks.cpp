// Pipeline parallelism against one process (test/common/pipeline_checks.hpp).
#include "pipeline_checks.hpp"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <spsd/spsd.hpp>

using namespace spsd;

namespace spsd_test {

namespace {

constexpr int64_t kFeatures = 6, kDim = 8, kClasses = 5, kBlocks = 6;

// Eight layers: inp, blocks.0 .. blocks.5, head. tied: the head is inp's weight transposed
// (kFeatures classes), the tied weight of an embedding and its head.
template <class T>
struct Chain : nn::Module<T> {
  nn::Linear<T> inp;
  nn::ModuleList<T, nn::Linear<T>> blocks;
  std::optional<nn::Linear<T>> head;
  bool tied;
  Chain(nn::Init init, bool tie) : inp(init, kFeatures, kDim), tied(tie) {
    for (int64_t k = 0; k < kBlocks; ++k) blocks.emplace_back(init, kDim, kDim);
    if (!tie) head.emplace(init, kDim, kClasses);
    this->register_module("inp", inp);
    this->register_module("blocks", blocks);
    if (head) this->register_module("head", *head);
  }
  int64_t classes() const { return tied ? kFeatures : kClasses; }
  GlobalTensor<T> first(const GlobalTensor<T>& x) const { return tanh(inp(x)); }
  GlobalTensor<T> block(size_t k, const GlobalTensor<T>& x) const { return tanh(blocks[k](x)); }
  GlobalTensor<T> last(const GlobalTensor<T>& x) const {
    return tied ? matmul(x, transpose(inp.weight, 0, 1)) : (*head)(x);
  }
  GlobalTensor<T> forward(const GlobalTensor<T>& x) const {
    GlobalTensor<T> h = first(x);
    for (size_t k = 0; k < blocks.size(); ++k) h = block(k, h);
    return last(h);
  }
};

template <class T>
pipeline::Layers<T, T, int64_t> layers_of(const Chain<T>& model) {
  pipeline::Layers<T, T, int64_t> layers;
  layers.first("inp", [&model](const GlobalTensor<T>& x) { return model.first(x); });
  for (size_t k = 0; k < model.blocks.size(); ++k)
    layers.then("blocks." + std::to_string(k), [&model, k](const GlobalTensor<T>& x) { return model.block(k, x); });
  layers.then("head", [&model](const GlobalTensor<T>& x) { return model.last(x); });
  layers.loss([](const GlobalTensor<T>& logits, const GlobalTensor<int64_t>& y) { return cross_entropy(logits, y); });
  if (model.tied) layers.tie("inp.weight", "head");
  return layers;
}

Placement world_line(const std::string& device = "cpu") {
  std::vector<int64_t> ranks(world_size());
  for (int64_t r = 0; r < world_size(); ++r) ranks[r] = r;
  return Placement(device, ranks);
}

// x's values, on every rank of the world.
template <class T>
std::vector<T> everywhere(const GlobalTensor<T>& x) {
  return x.to_global(world_line(x.placement().device_type() == DeviceType::kCUDA ? "cuda" : "cpu"), NdSbp(std::vector<Sbp>{sbp::broadcast})).to_local().to_vector();
}

template <class T>
void expect_close(Failures& f, const std::string& what, const std::vector<T>& got, const std::vector<T>& want,
                  double tolerance) {
  if (got.size() != want.size()) {
    f.add(what + ": " + std::to_string(got.size()) + " values, expected " + std::to_string(want.size()));
    return;
  }
  double scale = 0;
  for (T w : want) scale = std::max(scale, std::abs(static_cast<double>(w)));
  for (size_t k = 0; k < got.size(); ++k)
    if (!(std::abs(static_cast<double>(got[k]) - static_cast<double>(want[k])) <= tolerance * scale)) {
      f.add(what + ": element " + std::to_string(k) + " is " + show(got[k]) + ", one process gives " + show(want[k]));
      return;
    }
}

struct Case {
  std::string schedule;  // gpipe, 1f1b, interleaved, zb-h1
  int64_t ranks, microbatches, width;
  std::string inside;  // "data" or "tensor" (width 2), "" (width 1)
  bool tied = false;
  std::string device = "cpu";
  std::string name() const {
    return schedule + " p=" + std::to_string(ranks) + " m=" + std::to_string(microbatches) +
           (width > 1 ? " x" + std::to_string(width) + " " + inside : "") + (tied ? " tied" : "") + (device == "cpu" ? "" : " on " + device);
  }
};

pipeline::Schedule schedule_of(const Case& c) {
  if (c.schedule == "gpipe") return pipeline::gpipe(c.ranks, c.microbatches);
  if (c.schedule == "1f1b") return pipeline::one_f_one_b(c.ranks, c.microbatches);
  if (c.schedule == "interleaved") return pipeline::interleaved_one_f_one_b(c.ranks, c.microbatches, 2);
  return pipeline::zero_bubble(c.ranks, c.microbatches);
}

// The stages of case c over the first ranks: stage v on pipeline rank v % p, `width` ranks each,
// the eight layers dealt evenly in order.
std::vector<pipeline::Stage> stages_of(const Case& c, int64_t stages) {
  const std::vector<std::string> names{"inp", "blocks.0", "blocks.1", "blocks.2", "blocks.3", "blocks.4", "blocks.5", "head"};
  std::vector<pipeline::Stage> out;
  for (int64_t v = 0; v < stages; ++v) {
    const int64_t r = v % c.ranks;
    std::vector<int64_t> ranks;
    for (int64_t w = 0; w < c.width; ++w) ranks.push_back(r * c.width + w);
    pipeline::Stage s{{}, c.inside == "2d" ? Placement(c.device, ranks, Shape{2, 2}) : Placement(c.device, ranks)};
    const int64_t per = static_cast<int64_t>(names.size()) / stages;
    for (int64_t k = v * per; k < (v + 1) * per; ++k) s.patterns.push_back(names[k]);
    const nn::AxisPlan tensor =
        nn::AxisPlan{"tensor"}.with_parameter("weight", sbp::split(1)).with_parameter("bias", sbp::split(0));
    if (c.inside == "tensor") s.plan = nn::Plan{tensor};
    if (c.inside == "2d") s.plan = nn::Plan{nn::data_parallel(), tensor};  // 3-D: pipeline x data x tensor
    out.push_back(std::move(s));
  }
  return out;
}

template <class T>
void check_case(Failures& f, const Case& c, double tolerance) {
  const int64_t rows = 16, chunks = c.schedule == "interleaved" ? 2 : 1, stages = c.ranks * chunks;
  const Placement world = world_line(c.device);
  const NdSbp b(std::vector<Sbp>{sbp::broadcast});
  std::vector<int64_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r) labels[r] = (r * 7 + 3) % (c.tied ? kFeatures : kClasses);

  // One process: rank 0 alone.
  const Placement one(c.device, {0});
  Chain<T> reference(nn::Init{one, 11}, c.tied);
  const GlobalTensor<T> x1 = randn<T>({rows, kFeatures}, one, b, 5);
  const GlobalTensor<int64_t> y1 = from_host(Tensor<int64_t>::from_vector({rows}, labels), one, b);
  const GlobalTensor<T> loss1 = cross_entropy(reference.forward(x1), y1);
  backward(loss1);

  Chain<T> model(nn::Init{world, 11}, c.tied);
  pipeline::Pipeline<T, T, T, int64_t> pipe(model, layers_of(model), stages_of(c, stages), chunks);
  const pipeline::Stage& first = pipe.stage(0);
  const pipeline::Stage& last = pipe.stage(stages - 1);
  const NdSbp rows_layout = c.inside == "2d" ? NdSbp(std::vector<Sbp>{sbp::split(0), sbp::broadcast})
                            : NdSbp(std::vector<Sbp>{c.inside == "data" ? sbp::split(0) : sbp::broadcast});
  const GlobalTensor<T> x = randn<T>({rows, kFeatures}, first.placement, rows_layout, 5);
  const GlobalTensor<int64_t> y =
      from_host(Tensor<int64_t>::from_vector({rows}, labels), last.placement, rows_layout);
  const GlobalTensor<T> loss = pipe.step(schedule_of(c), x, y);

  expect_close(f, c.name() + " loss", everywhere(loss), everywhere(loss1), tolerance);
  const auto want = reference.named_parameters();
  const auto got = model.named_parameters();
  if (want.size() != got.size()) f.add(c.name() + ": parameter counts differ");
  for (size_t k = 0; k < want.size() && k < got.size(); ++k) {
    if (!got[k].second.has_grad()) {
      f.add(c.name() + ": " + got[k].first + " has no gradient");
      continue;
    }
    if (got[k].second.grad().nd_sbp() != got[k].second.nd_sbp())
      f.add(c.name() + ": " + got[k].first + "'s gradient is " + got[k].second.grad().describe() +
            ", not in its parameter's layout " + got[k].second.describe());
    expect_close(f, c.name() + " d/d" + got[k].first, everywhere(got[k].second.grad()), everywhere(want[k].second.grad()),
                 tolerance);
  }
}

std::vector<std::string> error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return {e.what()};
  }
  return {};
}

void expect_error(Failures& f, const std::string& what, const std::string& needle, const std::function<void()>& body) {
  const std::vector<std::string> e = error_of(body);
  if (e.empty()) f.add(what + ": no spsd::Error");
  else if (e[0].find(needle) == std::string::npos) f.add(what + ": the Error \"" + e[0] + "\" does not say \"" + needle + "\"");
}

int check_errors(Failures& f) {
  if (world_size() < 2) return 0;
  const Placement world = world_line();
  auto make = [&](std::vector<pipeline::Stage> stages, int64_t chunks = 1) {
    Chain<double> model(nn::Init{world, 1}, false);
    pipeline::Pipeline<double, double, double, int64_t> pipe(model, layers_of(model), std::move(stages), chunks);
  };
  const Placement r0("cpu", {0}), r1("cpu", {1}), r01("cpu", {0, 1});
  const std::vector<std::string> front{"inp", "blocks.0", "blocks.1", "blocks.2"},
      back{"blocks.3", "blocks.4", "blocks.5", "head"};
  int n = 0;
  expect_error(f, "a pattern matching nothing", "\"blocks.9\" matches no layer", [&] {
    std::vector<std::string> more = back;
    more.push_back("blocks.9");
    make({{front, r0}, {more, r1}});
  });
  ++n;
  expect_error(f, "overlapping placements", "overlaps stage 0", [&] { make({{front, r01}, {back, r1}}); });
  ++n;
  expect_error(f, "a layer in no stage", "the layer head matches no stage", [&] {
    make({{front, r0}, {{"blocks.3", "blocks.4", "blocks.5"}, r1}});
  });
  ++n;
  expect_error(f, "a schedule for another stage count", "the schedule is for 4 stages", [&] {
    Chain<double> model(nn::Init{world, 1}, false);
    pipeline::Pipeline<double, double, double, int64_t> pipe(model, layers_of(model), {{front, r0}, {back, r1}});
    const NdSbp b(std::vector<Sbp>{sbp::broadcast});
    pipe.step(pipeline::one_f_one_b(4, 2), randn<double>({4, kFeatures}, r0, b, 1), zeros<int64_t>({4}, r1, b));
  });
  ++n;
  expect_error(f, "m < 1", "microbatches", [&] { pipeline::one_f_one_b(2, 0); });
  ++n;
  expect_error(f, "more micro-batches than rows", "only 4 rows", [&] {
    Chain<double> model(nn::Init{world, 1}, false);
    pipeline::Pipeline<double, double, double, int64_t> pipe(model, layers_of(model), {{front, r0}, {back, r1}});
    const NdSbp b(std::vector<Sbp>{sbp::broadcast});
    pipe.step(pipeline::gpipe(2, 8), randn<double>({4, kFeatures}, r0, b, 1), zeros<int64_t>({4}, r1, b));
  });
  ++n;
  return n;
}

// backward_input then WeightGradients::run add exactly what one backward adds (bitwise), and
// the input's gradient is there before run().
int check_split_backward(Failures& f, const std::string& device) {
  const Placement world = world_line(device);
  const NdSbp b(std::vector<Sbp>{sbp::broadcast});
  Chain<double> whole(nn::Init{world, 3}, false), split(nn::Init{world, 3}, false);
  GlobalTensor<double> x1 = randn<double>({8, kFeatures}, world, b, 4).requires_grad_();
  GlobalTensor<double> x2 = randn<double>({8, kFeatures}, world, b, 4).requires_grad_();
  const GlobalTensor<double> y1 = whole.forward(x1), y2 = split.forward(x2);
  const GlobalTensor<double> dy = randn<double>(y1.shape(), world, b, 6);
  backward(y1, dy);
  const std::vector<GlobalTensor<double>> inputs{x2};
  WeightGradients later = backward_input(y2, dy, std::span<const GlobalTensor<double>>(inputs));
  if (!later.pending()) f.add("backward_input deferred nothing");
  for (const auto& [name, p] : split.named_parameters())
    if (p.has_grad()) f.add("backward_input computed " + name + "'s gradient before run()");
  if (!x2.has_grad() || everywhere(x2.grad()) != everywhere(x1.grad()))
    f.add("backward_input: the input's gradient differs from backward's");
  later.run();
  const auto want = whole.named_parameters(), got = split.named_parameters();
  for (size_t k = 0; k < want.size(); ++k)
    if (!got[k].second.has_grad() || everywhere(got[k].second.grad()) != everywhere(want[k].second.grad()))
      f.add("backward_input + run: " + got[k].first + "'s gradient is not bitwise backward's");
  return 1;
}

// Pipeline x data: gradients accumulate over the micro-batches unreduced, then one all-reduce
// per parameter per step (not per micro-batch): stage 0's 8 parameters take 8 all-reduces.
int check_one_reduction_per_parameter(Failures& f) {
  if (world_size() < 4) return 0;
  const Placement world = world_line(), first("cpu", {0, 1}), second("cpu", {2, 3});
  const NdSbp rows(std::vector<Sbp>{sbp::split(0)});
  Chain<double> model(nn::Init{world, 1}, false);
  pipeline::Pipeline<double, double, double, int64_t> pipe(
      model, layers_of(model),
      {{{"inp", "blocks.0", "blocks.1", "blocks.2"}, first}, {{"blocks.3", "blocks.4", "blocks.5", "head"}, second}});
  const GlobalTensor<double> x = randn<double>({16, kFeatures}, first, rows, 1);
  const GlobalTensor<int64_t> y = zeros<int64_t>({16}, second, rows);
  reset_comm_stats();
  pipe.step(pipeline::one_f_one_b(2, 4), x, y);
  const int64_t reductions = comm_stats().calls_of(CollectiveKind::kAllReduce);
  if (rank() <= 1 && reductions != 8)
    f.add("pipeline x data: rank " + std::to_string(rank()) + " made " + std::to_string(reductions) +
          " all-reduces in a step of 4 micro-batches, expected one per parameter of its stage (8): " +
          comm_stats().to_string());
  return 1;
}

// Activations and gradients move on the communication stream even when small (a sender never
// waits for its receiver on its own thread), and a rank outside every stage takes no part.
int check_overlap(Failures& f) {
  if (world_size() < 3 || synchronous()) return 0;
  const Placement world = world_line(), r0("cpu", {0}), r1("cpu", {1});
  const NdSbp b(std::vector<Sbp>{sbp::broadcast});
  Chain<double> model(nn::Init{world, 1}, false);
  pipeline::Pipeline<double, double, double, int64_t> pipe(
      model, layers_of(model),
      {{{"inp", "blocks.0", "blocks.1", "blocks.2"}, r0}, {{"blocks.3", "blocks.4", "blocks.5", "head"}, r1}});
  const GlobalTensor<double> x = randn<double>({8, kFeatures}, r0, b, 1);
  const GlobalTensor<int64_t> y = zeros<int64_t>({8}, r1, b);
  pipe.step(pipeline::one_f_one_b(2, 4), x, y);  // the first step creates the communicators
  reset_comm_stream_stats();
  reset_comm_stats();
  pipe.step(pipeline::one_f_one_b(2, 4), x, y);
  const CommStreamStats stream = comm_stream_stats();
  const CommStats bytes = comm_stats();
  // Rank 0 sends 4 activations of 2 x 8 doubles (far under the inline threshold), rank 1 their
  // 4 gradients: each at least 4 instructions on its stream.
  if (rank() <= 1 && stream.queued < 4)
    f.add("pipeline transfers: rank " + std::to_string(rank()) + " queued " + std::to_string(stream.queued) +
          " instructions on its communication stream (ran " + std::to_string(stream.inline_run) +
          " inline), expected the 4 transfers it sends queued");
  if (rank() >= 2 && (bytes.bytes_sent != 0 || bytes.bytes_received != 0 || stream.queued + stream.inline_run != 0))
    f.add("pipeline: rank " + std::to_string(rank()) + ", in no stage, communicated: " +
          std::to_string(bytes.bytes_sent) + " bytes sent, " + std::to_string(bytes.bytes_received) + " received");
  return 1 + check_one_reduction_per_parameter(f);
}

}  // namespace

int run_pipeline_checks(Failures& f, bool quick, const std::string& device) {
  int cases = 0;
  for (const char* schedule : {"gpipe", "1f1b", "interleaved", "zb-h1"})
    for (int64_t p : {2, 4})
      for (int64_t m : {1, 2, 3, 4, 8}) {
        if (quick && m != (p == 2 ? 3 : 8)) continue;
        for (const char* inside : {"", "data", "tensor", "2d"}) {
          const int64_t width = std::string(inside) == "2d" ? 4 : *inside ? 2 : 1;
          if (std::string(inside) == "2d" && (p != 2 || (m != 3 && m != 8))) continue;  // a sample
          if (p * width > world_size()) continue;
          const Case c{schedule, p, m, width, inside, false, device};
          try {
            check_case<double>(f, c, 1e-12);
            ++cases;
            if (m == 3 || m == 8) {  // float32 on a sample
              check_case<float>(f, c, 1e-6);
              ++cases;
            }
          } catch (const std::exception& e) {
            f.add(c.name() + ": " + e.what());
          }
        }
      }
  for (const char* schedule : {"1f1b", "zb-h1"}) {  // tied weights across the first and last stage
    if (world_size() < 2) break;
    const Case c{schedule, 2, 4, 1, "", true, device};
    try {
      check_case<double>(f, c, 1e-12);
      ++cases;
    } catch (const std::exception& e) {
      f.add(c.name() + ": " + e.what());
    }
  }
  cases += check_split_backward(f, device);
  if (device != "cpu") return cases;  // the rest is host logic
  return cases + check_overlap(f) + check_errors(f);
}

}  // namespace spsd_test
