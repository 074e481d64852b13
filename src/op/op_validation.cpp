// Validation on first dispatch (op/op_validation.hpp): the rule validator on a case made from an
// op's first call, its verdict kept per (op, element type) for the process.
#include "spsd/op/op_validation.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "spsd/op/dispatch.hpp"
#include "spsd/op/rule_validator.hpp"

namespace spsd {

namespace {

// -1: not read yet; 0 off; 1 on.
std::atomic<int> validation_mode{-1};

int mode_from_env() {
  const char* v = std::getenv("SPSD_CHECK_OPS");
  if (v == nullptr || std::string_view(v).empty() || std::string_view(v) == "0") return 0;
  if (std::string_view(v) == "1") return 1;
  detail::throw_error("SPSD_CHECK_OPS", "must be \"1\" or \"0\", got \"", v, "\"");
}

// Extents a case keeps as they are; larger ones shrink (below). The validator's cost grows with
// the elements (8 trials of every row, each running the kernel on 4 tensors' worth): a
// (8, 16, 32) add took 0.37 s, its shrunk (5, 7, 8) 0.03 s.
constexpr int64_t kSmallExtent = 4;
constexpr int64_t kMaxElements = 2048;       // per tensor of a shrunk case, inputs and output
constexpr int64_t kMaxUnshrunkElements = 1024;  // the same for a call's own types, where shrinking fails
// Calls an op may make without a case that runs on one process before it is left unvalidated.
constexpr int kMaxAttempts = 16;

bool small_enough(const std::vector<ValidationInput>& inputs, const TensorMeta& out, int64_t limit) {
  return out.shape.numel() <= limit &&
         std::all_of(inputs.begin(), inputs.end(), [&](const ValidationInput& in) { return in.meta.shape.numel() <= limit; });
}

// Each distinct extent above kSmallExtent becomes a small one that 3 does not divide (uneven
// pieces on the validator's 3 ranks), keeping equal extents equal and their order: 5, 7, 8, 10, ...
void shrink(std::vector<ValidationInput>& inputs) {
  std::vector<int64_t> large;
  for (const ValidationInput& in : inputs)
    for (int64_t e : in.meta.shape.dims())
      if (e > kSmallExtent) large.push_back(e);
  std::sort(large.begin(), large.end());
  large.erase(std::unique(large.begin(), large.end()), large.end());
  const auto small = [&](int64_t e) {
    const int64_t k = std::lower_bound(large.begin(), large.end(), e) - large.begin();
    return k == 0 ? 5 : 7 + 3 * ((k - 1) / 2) + (k - 1) % 2;
  };
  for (ValidationInput& in : inputs) {
    std::vector<int64_t> dims = in.meta.shape.dims();
    for (int64_t& e : dims)
      if (e > kSmallExtent) e = small(e);
    in.meta.shape = Shape(std::move(dims));
  }
}

// The case for this call, or none when no case of it runs on one process.
std::optional<ValidationCase> make_case(const detail::DispatchValidation& op, std::span<const TensorMeta> metas,
                                        const OpAttrs& attrs, const Scalar& scalar) {
  ValidationCase c{{}, attrs, {}};
  if (scalar.present) c.scalars.push_back(scalar);
  for (const TensorMeta& m : metas)
    c.inputs.push_back({{m.shape, is_half(m.dtype) ? DType::kFloat32 : m.dtype}, InputDomain::kAny, 0});
  const auto infers = [&]() -> std::optional<TensorMeta> {
    std::vector<TensorMeta> in;
    for (const ValidationInput& v : c.inputs) in.push_back(v.meta);
    try {
      TensorMeta out = op.schema->infer(in, attrs);
      if (out.dtype != op.dtype) return std::nullopt;  // a 16-bit output of mixed inputs (a cast)
      return out;
    } catch (const Error&) {
      return std::nullopt;
    }
  };
  const std::vector<ValidationInput> own = c.inputs;
  shrink(c.inputs);
  std::optional<TensorMeta> out = infers();
  if (!out || !small_enough(c.inputs, *out, kMaxElements)) {
    // Attrs that name extents (reshape's shape, slice's bounds) fit only the call's own types.
    c.inputs = own;
    out = infers();
    if (!out || !small_enough(c.inputs, *out, kMaxUnshrunkElements)) return std::nullopt;
  }
  op.input_domains(c.inputs, attrs);
  return c;
}

// A scalar operand of the call's kind (integral or floating) away from 0, 1 and the infinities.
Scalar ordinary_operand(const Scalar& s) {
  const bool integral = s.bits == static_cast<uint64_t>(s.i) && s.f == static_cast<double>(s.i);
  return integral ? Scalar::of<int64_t>(3) : Scalar::of(1.75);
}

struct Verdict {
  bool decided = false;
  int attempts = 0;
  std::string error;  // empty: passed
};

std::mutex verdicts_mutex;
std::map<std::pair<const OpSchema*, DType>, Verdict>& verdicts() {
  static std::map<std::pair<const OpSchema*, DType>, Verdict> v;
  return v;
}

}  // namespace

bool op_validation() {
  int mode = validation_mode.load(std::memory_order_relaxed);
  if (mode < 0) {
    mode = mode_from_env();
    validation_mode.store(mode, std::memory_order_relaxed);
  }
  return mode == 1;
}

void set_op_validation(bool on) { validation_mode.store(on ? 1 : 0, std::memory_order_relaxed); }

namespace detail {

void validate_on_first_dispatch(const DispatchValidation& op, std::span<const TensorMeta> inputs, const OpAttrs& attrs,
                                const Scalar& scalar) {
  // Under the lock: the simulated ranks of one process wait for one validation, then share it.
  const std::lock_guard lock(verdicts_mutex);
  Verdict& v = verdicts()[{op.schema, op.dtype}];
  if (!v.decided && v.attempts < kMaxAttempts) {
    ++v.attempts;
    if (std::optional<ValidationCase> c = make_case(op, inputs, attrs, scalar)) {
      ValidatedOp validated{std::string(op.schema->name), op.schema, op.kernel, {std::move(*c)}};
      try {
        ValidationReport report = validate(validated, {.search_missing = false});
        // A scalar operand can sit where the op's math degenerates (x / 0: P(sum) pieces give
        // inf - inf): a row is refused only if it fails for an ordinary operand too.
        if (!report.ok() && scalar.present) {
          validated.cases[0].scalars = {ordinary_operand(scalar)};
          if (validate(validated, {.search_missing = false}).ok()) report = ValidationReport{};
        }
        v.decided = true;
        if (!report.ok())
          v.error = concat(op.schema->name, ": its SBP signature table does not hold for its kernel (SPSD_CHECK_OPS=1 ",
                           "validates every op at its first dispatch, docs/custom_ops.md): ", report.failures.front(),
                           report.failures.size() > 1 ? concat(" (and ", report.failures.size() - 1, " more)") : "");
      } catch (const std::exception&) {
        // The kernel refused the validator's values (an op whose domain it does not declare):
        // not a verdict on its table; a later call tries again.
      }
    }
  }
  if (!v.error.empty()) throw Error(v.error);
}

int64_t validated_op_count() {
  const std::lock_guard lock(verdicts_mutex);
  return std::count_if(verdicts().begin(), verdicts().end(), [](const auto& p) { return p.second.decided; });
}

}  // namespace detail

}  // namespace spsd
