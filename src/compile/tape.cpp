// The tape of a compiled step (compile/tape.hpp): recording, buffer planning, replay.
#include "spsd/compile/tape.hpp"

#include <algorithm>
#include <map>

#include "spsd/runtime/device.hpp"
#include "spsd/runtime/scheduler.hpp"

namespace spsd::detail {

void Tape::begin_capture() {
  SPSD_CHECK(tls_step_recorder == nullptr, "compile", "a compiled step cannot capture inside another one's capture");
  tls_step_recorder = this;
  capturing_ = true;
}

void Tape::abandon_capture() {
  if (capturing_ && tls_step_recorder == this) tls_step_recorder = nullptr;
  capturing_ = false;
}

void Tape::bind_argument(const std::shared_ptr<Storage>& piece) {
  const int id = static_cast<int>(values_.size());
  values_.push_back({Value::Origin::kArgument, nullptr, nullptr, 0, false});
  arguments_.push_back(id);
  if (piece) value_of_[piece.get()] = {id, piece};
}

int Tape::value_of(const std::shared_ptr<Storage>& piece) {
  if (!piece) return -1;
  if (const auto h = host_made_.find(piece.get()); h != host_made_.end() && h->second.lock() == piece)
    refuse_capture("compile", "the step reads a tensor that a host step (an optimizer's step, clip_grad_norm_) made, "
                   "which a replay would not make again; read it before that step or after the call");
  const auto it = value_of_.find(piece.get());
  if (it != value_of_.end() && it->second.storage.lock() == piece) return it->second.value;
  // A tensor made before the step (a parameter) or outside any recorded step (a constant such
  // as backward's seed): bound now, read as it is at each replay.
  const int id = static_cast<int>(values_.size());
  values_.push_back({Value::Origin::kExternal, piece, nullptr, 0, false});
  value_of_[piece.get()] = {id, piece};
  return id;
}

void Tape::record(std::shared_ptr<const ReplayStep> step, std::span<const std::shared_ptr<Storage>> inputs,
                  const std::shared_ptr<Storage>& output) {
  if (paused) {  // a host step's own work: replayed by the host step
    if (output) host_made_[output.get()] = output;
    return;
  }
  Entry e{.kind = Entry::Kind::kStep, .step = std::move(step)};
  e.inputs.reserve(inputs.size());
  int aliased = -1;
  for (const std::shared_ptr<Storage>& in : inputs) {
    e.inputs.push_back(value_of(in));
    if (in && in == output) aliased = e.inputs.back();
  }
  if (aliased >= 0) {
    e.output = aliased;  // the result is the input's own piece (a boxing that moved nothing here)
  } else if (output) {
    e.output = static_cast<int>(values_.size());
    values_.push_back({Value::Origin::kResult, nullptr, nullptr, 0, false});
    value_of_[output.get()] = {e.output, output};
    host_made_.erase(output.get());
  }
  entries_.push_back(std::move(e));
}

void Tape::record_host(std::string_view name, std::function<void()> replay) {
  entries_.push_back({.kind = Entry::Kind::kHost, .name = std::string(name), .host = std::move(replay)});
}

void Tape::record_gradient(const std::shared_ptr<AutogradMeta>& meta) {
  const GlobalData& g = *meta->grad;
  Entry e{.kind = Entry::Kind::kGradient, .meta = meta, .gradient = GlobalData{g.shape, g.dtype, g.placement, g.nd_sbp, nullptr}};
  if (g.local) {
    e.output = value_of(g.local);
    e.inputs = {e.output};
  }
  gradients_set_.insert(meta.get());
  entries_.push_back(std::move(e));
}

void Tape::check_gradient_fresh(const AutogradMeta& meta) {
  if (gradients_set_.contains(&meta)) return;
  refuse_capture("backward", "it would add to a gradient made before the step, and a replay would add to that same "
                 "old gradient again; call zero_grad() inside the step, or before each call");
}

void Tape::end_capture(const std::vector<GlobalData>& outputs) {
  abandon_capture();
  output_types_.clear();
  for (const GlobalData& o : outputs) {
    const int id = o.local ? value_of(o.local) : -1;
    outputs_.push_back(id);
    output_types_.push_back({o.shape, o.dtype, o.placement, o.nd_sbp, nullptr});
  }
  value_of_.clear();
  gradients_set_.clear();
  host_made_.clear();
  plan_buffers();
}

void Tape::plan_buffers() {
  for (Value& v : values_) v.last_use = 0, v.escapes = false, v.buffer.reset();
  for (size_t k = 0; k < entries_.size(); ++k)
    for (int id : entries_[k].inputs)
      if (id >= 0) values_[id].last_use = k;
  for (int id : outputs_)
    if (id >= 0) values_[id].escapes = true;
  for (const Entry& e : entries_)
    if (e.kind == Entry::Kind::kGradient && e.output >= 0) values_[e.output].escapes = true;
  // First fit in program order: a buffer is free again after the last entry reading its value.
  std::multimap<int64_t, std::shared_ptr<Storage>> free_buffers;  // by bytes
  std::vector<std::vector<int>> ending(entries_.size());
  std::vector<std::shared_ptr<Storage>> pool;
  for (size_t k = 0; k < entries_.size(); ++k) {
    const Entry& e = entries_[k];
    if (e.kind == Entry::Kind::kStep && e.output >= 0) {
      Value& out = values_[e.output];
      const int64_t bytes = e.step->output_bytes();
      if (out.origin == Value::Origin::kResult && !out.escapes && bytes >= 0) {
        // One device per tape: pieces of one rank live where its placements put them (a step
        // over cpu and cuda placements keeps them apart by device).
        const DeviceType device = e.step->output_device();
        auto it = free_buffers.lower_bound(bytes);
        while (it != free_buffers.end() && it->second->device_type() != device) ++it;
        if (it != free_buffers.end()) {
          out.buffer = it->second;
          free_buffers.erase(it);
        } else {
          out.buffer = Storage::allocate_uninitialized(bytes, device);
          pool.push_back(out.buffer);
        }
        ending[std::max(out.last_use, k)].push_back(e.output);
      }
    }
    for (int id : ending[k]) free_buffers.emplace(values_[id].buffer->bytes(), values_[id].buffer);
  }
  pool_ = std::move(pool);
}

int Tape::add_value() {
  values_.push_back({Value::Origin::kResult, nullptr, nullptr, 0, false});
  return static_cast<int>(values_.size() - 1);
}

void Tape::replace_entries(std::vector<Entry> entries, const std::unordered_map<int, int>& renamed) {
  entries_ = std::move(entries);
  for (int& id : outputs_)
    if (const auto it = renamed.find(id); it != renamed.end()) id = it->second;
  plan_buffers();
}

int64_t Tape::pool_bytes() const {
  int64_t bytes = 0;
  for (const auto& b : pool_) bytes += b->bytes();
  return bytes;
}

int64_t Tape::external_count() const {
  return std::count_if(values_.begin(), values_.end(), [](const Value& v) { return v.origin == Value::Origin::kExternal; });
}

void Tape::run_entry(size_t k) {
  Entry& e = entries_[k];
  switch (e.kind) {
    case Entry::Kind::kStep: {
      scratch_.clear();
      for (int id : e.inputs) scratch_.push_back(id >= 0 ? values_[id].storage : nullptr);
      std::shared_ptr<Storage> out = e.step->run(scratch_, e.output >= 0 ? values_[e.output].buffer : nullptr);
      if (e.output >= 0) values_[e.output].storage = std::move(out);
      break;
    }
    case Entry::Kind::kHost:
      e.host();
      break;
    case Entry::Kind::kGradient:
      set_gradient(e);
      break;
  }
}

void Tape::set_gradient(Entry& e) {
  // Set to this replay's value, as backward did at capture; a gradient this replay did not set
  // would be added to by eager, which the tape cannot do.
  AutogradMeta& meta = *e.meta;
  const bool own = std::find(replay_set_.begin(), replay_set_.end(), &meta) != replay_set_.end();
  SPSD_CHECK(!meta.grad || own, "compile", "a parameter's gradient ", describe(*e.gradient),
             " was not cleared before this call, so eager would add to it; a compiled step sets it afresh: "
             "call zero_grad() inside the step, or before each call");
  GlobalData g = *e.gradient;
  if (e.output >= 0) g.local = values_[e.output].storage;
  meta.grad = std::move(g);
  if (!own) replay_set_.push_back(&meta);
}

void Tape::release_inputs(size_t k) {
  // Intermediate results go after their last reader (their pool buffer stays).
  for (int id : entries_[k].inputs)
    if (id >= 0 && values_[id].last_use == k && !values_[id].escapes && values_[id].origin == Value::Origin::kResult)
      values_[id].storage.reset();
}

std::vector<GlobalData> Tape::bound_outputs() const {
  std::vector<GlobalData> outputs = output_types_;
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs_[i] >= 0) outputs[i].local = values_[outputs_[i]].storage;
  return outputs;
}

namespace {
// Results and arguments go when a replay ends, also when it throws (the graphs keep their own).
struct ReleaseBound {
  std::vector<Tape::Value>& values;
  ~ReleaseBound() {
    for (Tape::Value& v : values)
      if (v.origin != Tape::Value::Origin::kExternal) v.storage.reset();
  }
};
}  // namespace

std::vector<GlobalData> Tape::replay(std::span<const std::shared_ptr<Storage>> arguments) {
  ++replays_;
  for (size_t i = 0; i < arguments_.size(); ++i) values_[arguments_[i]].storage = arguments[i];
  replay_set_.clear();
  const ReleaseBound release{values_};
  for (size_t k = 0; k < entries_.size(); ++k) {
    run_entry(k);
    release_inputs(k);
  }
  return bound_outputs();
}

// ---- replay as CUDA graphs ----

struct Tape::Graphs {
  struct Segment {
    size_t begin, end;  // entries [begin, end): no host step among them
    std::unique_ptr<DeviceGraph> graph;
  };
  std::vector<Segment> segments;
  std::vector<std::shared_ptr<Storage>> inputs;  // per argument: the buffer the graphs read it from
  // Per value: the storage its result had at the capture, where it outlived its segment (the
  // graphs write it again; results freed inside a capture the allocator keeps for the graph).
  std::vector<std::shared_ptr<Storage>> kept;
};

Tape::Tape() = default;
Tape::~Tape() = default;

bool Tape::device_only() const {
  bool any = false;
  for (const Entry& e : entries_)
    if (e.kind == Entry::Kind::kStep) {
      if (e.step->output_device() != DeviceType::kCUDA) return false;
      any = true;
    }
  return any;
}

size_t Tape::graph_count() const { return graphs_ ? graphs_->segments.size() : 0; }

std::vector<GlobalData> Tape::replay_as_graphs(std::span<const std::shared_ptr<Storage>> arguments) {
  ++replays_;
  replay_set_.clear();
  const ReleaseBound release{values_};
  // The arguments go into the graphs' input buffers (their addresses are in the graphs).
  const bool capture = graphs_ == nullptr;
  auto graphs = capture ? std::make_unique<Graphs>() : nullptr;
  Graphs& g = capture ? *graphs : *graphs_;
  for (size_t i = 0; i < arguments_.size(); ++i) {
    const std::shared_ptr<Storage>& piece = arguments[i];
    if (capture) g.inputs.push_back(piece ? Storage::allocate_uninitialized(piece->bytes(), piece->device_type()) : nullptr);
    const std::shared_ptr<Storage>& input = g.inputs[i];
    SPSD_CHECK((piece == nullptr) == (input == nullptr) && (!piece || piece->bytes() == input->bytes()), "compile",
               "argument ", i, " has a piece of ", piece ? piece->bytes() : 0, " bytes, the graphs' buffer ",
               input ? input->bytes() : 0);
    if (piece) copy_bytes(input->data(), input->device_type(), piece->data(), piece->device_type(), piece->bytes());
    values_[arguments_[i]].storage = input;
  }
  if (capture) {
    g.kept.resize(values_.size());
    for (size_t k = 0; k < entries_.size();) {
      if (entries_[k].kind == Entry::Kind::kHost) {
        run_entry(k);
        ++k;
        continue;
      }
      size_t end = k;
      while (end < entries_.size() && entries_[end].kind != Entry::Kind::kHost) ++end;
      std::unique_ptr<DeviceGraph> graph = device_runtime("compile").capture_graph("compile", [&] {
        for (size_t j = k; j < end; ++j) {
          run_entry(j);
          release_inputs(j);
        }
      });
      graph->launch();  // a capture records the work without running it: this call's is run now
      g.segments.push_back({k, end, std::move(graph)});
      for (size_t v = 0; v < values_.size(); ++v)  // results alive after it: their buffers are the graph's
        if (values_[v].origin == Value::Origin::kResult && values_[v].storage) g.kept[v] = values_[v].storage;
      k = end;
    }
    graphs_ = std::move(graphs);
  } else {
    for (size_t v = 0; v < values_.size(); ++v)
      if (g.kept[v]) values_[v].storage = g.kept[v];
    size_t k = 0;
    for (const Graphs::Segment& segment : g.segments) {
      for (; k < segment.begin; ++k) run_entry(k);  // host steps
      // What the host steps queued (clip_grad_norm_'s all-reduce) is issued first, on every rank:
      // NCCL needs each communicator's collectives in the same order everywhere.
      before_host_communication();
      segment.graph->launch();
      for (k = segment.begin; k < segment.end; ++k)
        if (entries_[k].kind == Entry::Kind::kGradient) set_gradient(entries_[k]);
    }
    for (; k < entries_.size(); ++k) run_entry(k);
  }
  // The outputs leave in storage of their own: the next call's graphs overwrite theirs.
  std::vector<GlobalData> outputs = bound_outputs();
  for (GlobalData& o : outputs)
    if (o.local) {
      auto copy = Storage::allocate_uninitialized(o.local->bytes(), o.local->device_type());
      copy_bytes(copy->data(), copy->device_type(), o.local->data(), o.local->device_type(), o.local->bytes());
      o.local = std::move(copy);
    }
  return outputs;
}

}  // namespace spsd::detail
