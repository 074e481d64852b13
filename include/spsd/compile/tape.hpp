#pragma once
// The tape of a compiled step on this rank (compile/compile.hpp): what capturing the step
// recorded (tensor/capture.hpp), with every buffer decided, and its replay.
//
// Values are this rank's pieces: the step's arguments (bound on each call), tensors made
// before the step that it reads (parameters, constants: bound at capture and read as they are
// then, so in-place updates such as an optimizer's are seen), and the results of recorded
// steps. A kernel's result that does not leave the step is written into a buffer of the
// tape's pool, shared with other results whose lifetimes do not overlap (first fit, in
// program order), so a replay allocates nothing for them; results that leave the step (its
// outputs, gradients) get fresh storage on each replay, as eager gives them. Boxing results
// come from the communication, as in eager.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "spsd/tensor/capture.hpp"
#include "spsd/tensor/global_tensor.hpp"

namespace spsd::detail {

class Tape final : public StepRecorder {
 public:
  struct Value {
    enum class Origin { kArgument, kExternal, kResult } origin;
    std::shared_ptr<Storage> storage;  // bound now (argument: per call; external: for good)
    std::shared_ptr<Storage> buffer;   // a pool buffer the result is written into, or null
    size_t last_use = 0;               // the last entry that reads it
    bool escapes = false;              // an output or a gradient: fresh storage per replay
  };
  struct Entry {
    enum class Kind { kStep, kHost, kGradient } kind;
    std::shared_ptr<const ReplayStep> step;  // kStep
    std::vector<int> inputs;                 // value ids; -1: none on this rank
    int output = -1;                         // kStep: the result; kGradient: the gradient's value
    std::string name;                        // kHost
    std::function<void()> host;              // kHost
    std::shared_ptr<AutogradMeta> meta;      // kGradient: whose grad() is set
    std::optional<GlobalData> gradient;      // kGradient: its type and layout (local unset)
  };

  // ---- capture ----
  // Starts recording on this thread (an Error while another capture records).
  void begin_capture();
  // Binds argument i's piece (may be null) as the step's input i, before the step runs.
  void bind_argument(const std::shared_ptr<Storage>& piece);
  // Stops recording; outputs: the step's results (their pieces here). Decides the buffers.
  void end_capture(const std::vector<GlobalData>& outputs);
  // Stops recording after the step threw.
  void abandon_capture();

  void record(std::shared_ptr<const ReplayStep> step, std::span<const std::shared_ptr<Storage>> inputs,
              const std::shared_ptr<Storage>& output) override;
  void record_host(std::string_view name, std::function<void()> replay) override;
  void record_gradient(const std::shared_ptr<AutogradMeta>& meta) override;
  void check_gradient_fresh(const AutogradMeta& meta) override;

  Tape();
  ~Tape() override;

  // ---- replay ----
  // Runs the tape on these argument pieces; returns the outputs (as given to end_capture, with
  // this replay's pieces).
  std::vector<GlobalData> replay(std::span<const std::shared_ptr<Storage>> arguments);
  // How many times the tape was replayed (either way).
  int64_t replays() const { return replays_; }

  // ---- replay as CUDA graphs (docs/compile.md, "CUDA graphs") ----
  // Whether every step of the tape runs on a cuda placement (and there is one): then it can
  // replay as CUDA graphs.
  bool device_only() const;
  // replay, as CUDA graphs: the first call captures each run of entries between host steps into
  // a graph (DeviceRuntime::capture_graph) while it replays; later calls copy the arguments into
  // the graphs' input buffers and launch the graphs, running the host steps between them.
  // Every result keeps the buffer it had at the capture; the outputs are copied out of theirs
  // (fresh storage per call, as replay gives), the gradients stay in theirs (each call overwrites
  // the last one's). Errors as capture_graph's (host-staged communication cannot be captured),
  // after which the next call captures again. Only where device_only().
  std::vector<GlobalData> replay_as_graphs(std::span<const std::shared_ptr<Storage>> arguments);
  // How many graphs a replay launches (0 before their capture).
  size_t graph_count() const;

  // The entries, for the layout search and explain() (compile/layout_search.hpp).
  std::vector<Entry>& entries() { return entries_; }
  const std::vector<Entry>& entries() const { return entries_; }
  const std::vector<Value>& values() const { return values_; }
  // The value id of each output (-1: none on this rank).
  const std::vector<int>& output_values() const { return outputs_; }
  // A new result value (for a step the layout search adds).
  int add_value();
  // The entries the layout search rewrote; renamed: values that are now others (outputs follow).
  // Decides the buffers again.
  void replace_entries(std::vector<Entry> entries, const std::unordered_map<int, int>& renamed);
  // Re-decides the buffers after entries changed (the search replaces steps).
  void plan_buffers();
  // Bytes of the pool (kept between replays) and of externals bound at capture.
  int64_t pool_bytes() const;
  int64_t external_count() const;

 private:
  int value_of(const std::shared_ptr<Storage>& piece);
  void run_entry(size_t k);      // a replay's work for entry k, on the values bound now
  void release_inputs(size_t k);  // the results entry k read last
  void set_gradient(Entry& e);
  std::vector<GlobalData> bound_outputs() const;
  struct Graphs;  // replay_as_graphs's state (tape.cpp)
  std::unique_ptr<Graphs> graphs_;
  int64_t replays_ = 0;
  std::vector<Value> values_;
  std::vector<Entry> entries_;
  std::vector<int> arguments_;        // value id per argument
  std::vector<int> outputs_;          // value id per output (-1: none here)
  std::vector<GlobalData> output_types_;
  // Capture only. A storage's latest value, by address; the weak reference tells a storage freed
  // during the capture from a new one at the same address.
  struct Seen {
    int value;
    std::weak_ptr<Storage> storage;
  };
  std::unordered_map<const Storage*, Seen> value_of_;
  std::unordered_set<const AutogradMeta*> gradients_set_;
  std::unordered_map<const Storage*, std::weak_ptr<Storage>> host_made_;  // results of host steps' work
  std::vector<std::shared_ptr<Storage>> pool_;
  std::vector<std::shared_ptr<Storage>> scratch_;  // replay: one entry's input pieces
  std::vector<const AutogradMeta*> replay_set_;    // replay: gradients set so far
  bool capturing_ = false;
};

}  // namespace spsd::detail
