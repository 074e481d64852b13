// The rule validator (op/rule_validator.hpp): an op's kernel on the pieces of a 3-rank 1-d mesh,
// combined per the declared output layout, against the kernel on the whole tensors.
#include "spsd/op/rule_validator.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>

namespace spsd {

namespace {

constexpr int64_t kRanks = 3;
const Shape kMesh{kRanks};
// Trials per signature: lopsided partial pieces first, then identity padding. Odd trials put
// the extremes of each input's domain (of both signs where it has them) in its first two
// elements, so small inputs (a (2, 1) divisor) still meet both signs.
constexpr int kLopsidedTrials = 4;
constexpr int kTrials = 8;

template <class F>
decltype(auto) with_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
    case DType::kInt32: return f(int32_t{});
    case DType::kInt64: return f(int64_t{});
    case DType::kBFloat16: return f(bfloat16{});
    case DType::kFloat16: return f(float16{});
    case DType::kBool: return f(bool{});
  }
  throw std::logic_error("bad dtype");
}

// ---------------------------------------------------------------------------------------------
// Values and pieces.

using Rng = std::mt19937_64;

double uniform(Rng& rng, double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1.0p-53;
}
int64_t uniform_int(Rng& rng, int64_t lo, int64_t hi) {  // [lo, hi]
  return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

template <class T>
T extreme(const ValidationInput& in, bool high) {
  if constexpr (std::is_same_v<T, bool>) return high;
  if (in.domain == InputDomain::kIndex) return static_cast<T>(high ? in.bound - 1 : 0);
  if constexpr (std::is_integral_v<T>) {
    if (in.domain == InputDomain::kPositive) return static_cast<T>(high ? 9 : 1);
    return static_cast<T>(high ? 9 : -9);
  } else {
    if (in.domain == InputDomain::kPositive) return static_cast<T>(high ? 3.0 : 0.5);
    return static_cast<T>(high ? 2.0 : -2.0);
  }
}

template <class T>
T draw(const ValidationInput& in, Rng& rng) {
  if constexpr (std::is_same_v<T, bool>) return (rng() & 1) != 0;
  if (in.domain == InputDomain::kIndex) return static_cast<T>(uniform_int(rng, 0, in.bound - 1));
  if constexpr (std::is_integral_v<T>) {
    switch (in.domain) {
      case InputDomain::kPositive: return static_cast<T>(uniform_int(rng, 1, 9));
      case InputDomain::kNonzero: return static_cast<T>(uniform_int(rng, 1, 9) * (rng() & 1 ? 1 : -1));
      default: return static_cast<T>(uniform_int(rng, -9, 9));
    }
  } else {
    switch (in.domain) {
      case InputDomain::kPositive: return static_cast<T>(uniform(rng, 0.5, 3.0));
      case InputDomain::kNonzero: return static_cast<T>(uniform(rng, 0.5, 2.0) * (rng() & 1 ? 1 : -1));
      default: return static_cast<T>(uniform(rng, -2.0, 2.0));
    }
  }
}

// A typed buffer (at least one byte, so empty pieces still have a valid pointer).
struct Buffer {
  DType dtype = DType::kFloat32;
  Shape shape;
  Box box;
  std::vector<unsigned char> bytes;
  template <class T>
  T* as() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T>
  const T* as() const { return reinterpret_cast<const T*>(bytes.data()); }
  int64_t numel() const { return shape.numel(); }
};

Buffer allocate(DType t, Box box) {
  Buffer b{t, box.shape(), std::move(box), {}};
  b.bytes.assign(std::max<int64_t>(1, b.numel() * size_of(t)), 0);
  return b;
}

// Kernels must write every output element: they get a buffer full of NaN (or a pattern).
void poison(Buffer& b) {
  with_dtype(b.dtype, [&]<class T>(T) {
    T v;
    if constexpr (FloatingElement<T>) v = std::numeric_limits<T>::quiet_NaN();
    else v = static_cast<T>(0x5a5a5a5a5a5a5a5aull);
    std::fill(b.as<T>(), b.as<T>() + b.numel(), v);
  });
}

template <class T>
void copy_box(const Buffer& whole, Buffer& piece) {
  const Shape& shape = whole.shape;
  const int64_t n = piece.numel();
  if (n == 0) return;
  std::vector<int64_t> strides = contiguous_strides(shape), idx(piece.box.begin);
  for (int64_t i = 0; i < n; ++i) {
    int64_t g = 0;
    for (size_t k = 0; k < idx.size(); ++k) g += idx[k] * strides[k];
    piece.as<T>()[i] = whole.as<T>()[g];
    for (int64_t k = static_cast<int64_t>(idx.size()) - 1; k >= 0 && ++idx[k] == piece.box.end[k]; --k)
      idx[k] = piece.box.begin[k];
  }
}

enum class Trial { kLopsided, kIdentity };

Box rank_box(const Shape& shape, const Sbp& s, int64_t r) { return box_at(shape, kMesh, NdSbp(s), {r}); }

// The pieces kRanks ranks hold of `whole` in layout s.
std::vector<Buffer> make_pieces(const Buffer& whole, const Sbp& s, Trial trial, Rng& rng) {
  std::vector<Buffer> pieces;
  for (int64_t r = 0; r < kRanks; ++r) pieces.push_back(allocate(whole.dtype, rank_box(whole.shape, s, r)));
  with_dtype(whole.dtype, [&]<class T>(T) {
    if (!s.is_partial()) {
      for (Buffer& p : pieces) copy_box<T>(whole, p);
      return;
    }
    const ReduceOp op = s.reduce_op();
    for (int64_t g = 0; g < whole.numel(); ++g) {
      const T v = whole.as<T>()[g];
      if (trial == Trial::kIdentity) {
        pieces[0].as<T>()[g] = v;
        for (int64_t r = 1; r < kRanks; ++r) pieces[r].as<T>()[g] = reduce_identity<T>(op);
        continue;
      }
      const int64_t holder = uniform_int(rng, 0, kRanks - 1);
      T rest{0};
      for (int64_t r = 0; r < kRanks; ++r) {
        if (r == holder) continue;
        T x;
        if constexpr (std::is_integral_v<T>) {
          const int64_t k = op == ReduceOp::kSum ? uniform_int(rng, -5, 5) : uniform_int(rng, 1, 5);
          x = op == ReduceOp::kSum ? T(k) : op == ReduceOp::kMax ? T(v - k) : T(v + k);
        } else {
          const double k = op == ReduceOp::kSum ? uniform(rng, -2.0, 2.0) : uniform(rng, 0.25, 3.0);
          x = op == ReduceOp::kSum ? T(k) : op == ReduceOp::kMax ? T(v - k) : T(v + k);
        }
        pieces[r].as<T>()[g] = x;
        rest = wrapping_add(rest, x);
      }
      pieces[holder].as<T>()[g] = op == ReduceOp::kSum ? T(v - rest) : v;
    }
  });
  return pieces;
}

// ---------------------------------------------------------------------------------------------
// One trial of one signature.

enum class Outcome { kPass, kFail, kInapplicable };
struct TrialResult {
  Outcome outcome;
  std::string detail;
};

template <class T>
std::string value_text(T v) {
  std::ostringstream s;
  s.precision(std::is_same_v<T, float> ? 9 : 17);
  s << +v;
  return s.str();
}

// The relative tolerance of a comparison: float32's where any floating tensor of the call is
// float32 or narrower (a float32 -> float64 cast of P(sum) pieces sums what float32 rounded).
double tolerance(const std::vector<TensorMeta>& metas, const TensorMeta& out) {
  const auto coarse = [](DType t) { return t == DType::kFloat32 || is_half(t); };
  return coarse(out.dtype) || std::any_of(metas.begin(), metas.end(), [&](const TensorMeta& m) { return coarse(m.dtype); })
             ? 1e-4
             : 1e-9;
}

template <class T>
bool close(T got, T expected, double tol) {
  if constexpr (std::is_integral_v<T>) {
    return got == expected;
  } else {
    if (std::isnan(expected)) return std::isnan(got);
    if (std::isnan(got)) return false;
    if (std::isinf(expected)) return got == expected;
    return std::abs(static_cast<double>(got) - static_cast<double>(expected)) <=
           tol * (1.0 + std::abs(static_cast<double>(expected)));
  }
}

template <class T>
T reduce2(ReduceOp op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  switch (op) {
    case ReduceOp::kSum: return wrapping_add(a, b);
    case ReduceOp::kMax: return a < b ? b : a;
    case ReduceOp::kMin: return b < a ? b : a;
  }
  return a;
}

// Combines the per-rank outputs per `out` and compares with the reference; "" when they agree.
std::string combine_and_compare(const std::vector<Buffer>& outs, const Sbp& out, const Buffer& ref, double tol) {
  return with_dtype(ref.dtype, [&]<class T>(T) -> std::string {
    const T* expected = ref.as<T>();
    auto mismatch = [&](const std::string& where, int64_t g, T got) {
      return where + ": element " + std::to_string(g) + " of the whole output: got " + value_text(got) +
             ", expected " + value_text(expected[g]);
    };
    if (out.is_broadcast()) {
      for (int64_t r = 0; r < kRanks; ++r)
        for (int64_t g = 0; g < ref.numel(); ++g)
          if (!close(outs[r].as<T>()[g], expected[g], tol)) return mismatch("rank " + std::to_string(r) + "'s B piece", g, outs[r].as<T>()[g]);
      return "";
    }
    if (out.is_partial()) {
      for (int64_t g = 0; g < ref.numel(); ++g) {
        T acc = outs[0].as<T>()[g];
        std::string pieces = value_text(acc);
        for (int64_t r = 1; r < kRanks; ++r) {
          acc = reduce2(out.reduce_op(), acc, outs[r].as<T>()[g]);
          pieces += ", " + value_text(outs[r].as<T>()[g]);
        }
        if (!close(acc, expected[g], tol)) return mismatch("reduced pieces (" + pieces + ")", g, acc);
      }
      return "";
    }
    // S: place every rank's piece at its box.
    std::vector<int64_t> strides = contiguous_strides(ref.shape);
    for (int64_t r = 0; r < kRanks; ++r) {
      const Buffer& p = outs[r];
      if (p.numel() == 0) continue;
      std::vector<int64_t> idx(p.box.begin);
      for (int64_t i = 0; i < p.numel(); ++i) {
        int64_t g = 0;
        for (size_t k = 0; k < idx.size(); ++k) g += idx[k] * strides[k];
        if (!close(p.as<T>()[i], expected[g], tol)) return mismatch("rank " + std::to_string(r) + "'s piece " + p.box.to_string(), g, p.as<T>()[i]);
        for (int64_t k = static_cast<int64_t>(idx.size()) - 1; k >= 0 && ++idx[k] == p.box.end[k]; --k) idx[k] = p.box.begin[k];
      }
    }
    return "";
  });
}

bool fits(const Sbp& s, const Shape& shape) { return !s.is_split() || (s.axis() >= 0 && s.axis() < shape.ndim()); }

NdSignature nd_of(const Signature& sig) {
  NdSignature nd{{}, NdSbp(sig.output)};
  for (const Sbp& s : sig.inputs) nd.inputs.emplace_back(s);
  return nd;
}

// guard: skip (kInapplicable) when shape inference on a rank's pieces fails or disagrees with
// its output box (the search's combinations may cut inputs inconsistently; declared signatures
// run unguarded, since kernels may read their pieces' boxes and global metas).
TrialResult check_trial(const ValidatedOp& op, const ValidationCase& mc, size_t case_index, const Signature& sig, int trial,
                        bool guard) {
  std::vector<TensorMeta> metas;
  for (const ValidationInput& in : mc.inputs) metas.push_back(in.meta);
  const TensorMeta out_meta = op.schema->infer(metas, mc.attrs);
  const Scalar scalar = mc.scalars.empty() ? Scalar{} : mc.scalars[trial % mc.scalars.size()];
  const Trial kind = trial < kLopsidedTrials ? Trial::kLopsided : Trial::kIdentity;
  Rng rng(0x5eed0000ull + 7919ull * case_index + 104729ull * static_cast<uint64_t>(trial) +
          std::hash<std::string>()(op.name));

  std::vector<Buffer> wholes;
  for (const ValidationInput& in : mc.inputs) {
    Buffer w = allocate(in.meta.dtype, full_box(in.meta.shape));
    with_dtype(in.meta.dtype, [&]<class T>(T) {
      for (int64_t g = 0; g < w.numel(); ++g) w.as<T>()[g] = draw<T>(in, rng);
      if (trial % 2 == 1 && w.numel() >= 2) {
        w.as<T>()[0] = extreme<T>(in, true);
        w.as<T>()[1] = extreme<T>(in, false);
      }
    });
    wholes.push_back(std::move(w));
  }

  // The reference: the kernel on the whole tensors.
  Buffer ref = allocate(out_meta.dtype, full_box(out_meta.shape));
  {
    poison(ref);
    std::vector<LocalInput> locals;
    for (size_t i = 0; i < wholes.size(); ++i) locals.push_back({wholes[i].bytes.data(), wholes[i].shape, wholes[i].box, &metas[i]});
    NdSignature all_b = nd_of(uniform_signature(metas.size(), sbp::broadcast));
    KernelArgs args{mc.attrs, scalar, locals, ref.bytes.data(), ref.shape, ref.box, out_meta, all_b, kernel::Target{}};
    op.kernel(out_meta.dtype, args);
  }

  std::vector<std::vector<Buffer>> pieces;  // [input][rank]
  for (size_t i = 0; i < wholes.size(); ++i) pieces.push_back(make_pieces(wholes[i], sig.inputs[i], kind, rng));

  const NdSignature nd = nd_of(sig);
  std::vector<Buffer> outs;
  for (int64_t r = 0; r < kRanks; ++r) {
    Buffer out = allocate(out_meta.dtype, rank_box(out_meta.shape, sig.output, r));
    if (guard) {
      std::vector<TensorMeta> local_metas;
      for (size_t i = 0; i < wholes.size(); ++i) local_metas.push_back({pieces[i][r].shape, metas[i].dtype});
      try {
        if (!(op.schema->infer(local_metas, mc.attrs).shape == out.shape)) return {Outcome::kInapplicable, ""};
      } catch (const spsd::Error&) {
        return {Outcome::kInapplicable, ""};
      }
    }
    poison(out);
    std::vector<LocalInput> locals;
    for (size_t i = 0; i < wholes.size(); ++i)
      locals.push_back({pieces[i][r].bytes.data(), pieces[i][r].shape, pieces[i][r].box, &metas[i]});
    KernelArgs args{mc.attrs, scalar, locals, out.bytes.data(), out.shape, out.box, out_meta, nd, kernel::Target{}};
    try {
      op.kernel(out_meta.dtype, args);
    } catch (const spsd::Error& e) {
      return {Outcome::kFail, "the kernel threw on rank " + std::to_string(r) + ": " + e.what()};
    }
    outs.push_back(std::move(out));
  }
  std::string diff = combine_and_compare(outs, sig.output, ref, tolerance(metas, out_meta));
  if (diff.empty()) return {Outcome::kPass, ""};
  return {Outcome::kFail, std::string(kind == Trial::kIdentity ? "identity-padding" : "lopsided") + " trial " +
                              std::to_string(trial) + (mc.scalars.empty() ? "" : " (scalar " + value_text(scalar.f) + "/" + std::to_string(scalar.i) + ")") +
                              ": " + diff};
}

std::string label(const ValidatedOp& op, const ValidationCase& mc, const Signature& sig) {
  return op.name + " " + sig.to_string() + " for " + mc.text(*op.schema);
}

// Whether sig holds on every trial (and applies at all).
bool holds(const ValidatedOp& op, const ValidationCase& mc, size_t case_index, const Signature& sig) {
  bool applied = false;
  for (int t = 0; t < kTrials; ++t) {
    TrialResult r = check_trial(op, mc, case_index, sig, t, true);
    if (r.outcome == Outcome::kFail) return false;
    if (r.outcome == Outcome::kPass) applied = true;
  }
  return applied;
}

std::vector<Sbp> sbp_options(int64_t ndim) {
  std::vector<Sbp> options;
  for (int64_t i = 0; i < ndim; ++i) options.push_back(sbp::split(i));
  options.insert(options.end(), {sbp::broadcast, sbp::partial_sum, sbp::partial_max, sbp::partial_min});
  return options;
}

// Every (input Sbps, output Sbp) combination for these metas, input 0 most significant.
std::vector<Signature> all_signatures(const std::vector<TensorMeta>& metas, const Shape& out) {
  std::vector<std::vector<Sbp>> options;
  for (const TensorMeta& m : metas) options.push_back(sbp_options(m.shape.ndim()));
  options.push_back(sbp_options(out.ndim()));
  std::vector<Signature> all;
  std::vector<size_t> pick(options.size(), 0);
  for (;;) {
    Signature s;
    for (size_t i = 0; i + 1 < options.size(); ++i) s.inputs.push_back(options[i][pick[i]]);
    s.output = options.back()[pick.back()];
    all.push_back(std::move(s));
    int64_t a = static_cast<int64_t>(options.size()) - 1;
    while (a >= 0 && ++pick[a] == options[a].size()) pick[a--] = 0;
    if (a < 0) return all;
  }
}

std::vector<TensorMeta> metas_of(const ValidationCase& mc) {
  std::vector<TensorMeta> metas;
  for (const ValidationInput& in : mc.inputs) metas.push_back(in.meta);
  return metas;
}

bool declared_usable(const ValidatedOp& op, const ValidationCase& mc, const std::vector<TensorMeta>& metas, const TensorMeta& out,
                     const Signature& sig) {
  for (size_t i = 0; i < metas.size(); ++i)
    if (!fits(sig.inputs[i], metas[i].shape)) return false;
  if (!fits(sig.output, out.shape)) return false;
  return !op.schema->valid || op.schema->valid(metas, mc.attrs, kMesh, nd_of(sig));
}

// One case of op, with the output type and the table the op declares for it.
struct CaseTable {
  size_t c;
  const ValidationCase& mc;
  std::vector<TensorMeta> metas;
  TensorMeta out;
  std::vector<Signature> table;
  CaseTable(const ValidatedOp& op, size_t index)
      : c(index), mc(op.cases[index]), metas(metas_of(mc)), out(op.schema->infer(metas, mc.attrs)),
        table(op.schema->signatures(metas, mc.attrs)) {}
};

// The declared table's problems for one case: a failing signature, a table that does not end
// with the all-B signature, a signature declared twice.
void check_declared(const ValidatedOp& op, const CaseTable& ct, ValidationReport& rep) {
  const auto& [c, mc, metas, out, table] = ct;
  {
    const Signature all_b = uniform_signature(metas.size(), sbp::broadcast);
    if (table.empty() || !(table.back() == all_b))
      rep.failures.push_back(op.name + " for " + mc.text(*op.schema) + ": the table does not end with the all-B signature " +
                             all_b.to_string());
    for (size_t i = 0; i < table.size(); ++i)
      for (size_t j = i + 1; j < table.size(); ++j)
        if (table[i] == table[j])
          rep.failures.push_back(op.name + " for " + mc.text(*op.schema) + ": " + table[i].to_string() + " is declared twice");
    for (const Signature& sig : table) {
      if (!declared_usable(op, mc, metas, out, sig)) continue;
      ++rep.checked;
      for (int t = 0; t < kTrials; ++t) {
        ++rep.trials;
        TrialResult r = check_trial(op, mc, c, sig, t, false);
        if (r.outcome == Outcome::kFail) {
          rep.failures.push_back("declared signature fails: " + label(op, mc, sig) + ": " + r.detail);
          break;
        }
      }
    }
  }
}

// The valid combinations the table lacks for one case: "add (P(max), B) -> P(max)" -> the
// cases it holds for.
void search_missing(const ValidatedOp& op, const CaseTable& ct, ValidationReport& rep) {
  const auto& [c, mc, metas, out, table] = ct;
  {
    for (const Signature& sig : all_signatures(metas, out.shape)) {
      if (std::find(table.begin(), table.end(), sig) != table.end()) continue;
      // bool has no partial layouts: nothing to search there.
      bool bool_partial = !allows_partial(out.dtype) && sig.output.is_partial();
      for (size_t i = 0; i < metas.size(); ++i)
        bool_partial = bool_partial || (!allows_partial(metas[i].dtype) && sig.inputs[i].is_partial());
      if (bool_partial) continue;
      if (op.schema->valid && !op.schema->valid(metas, mc.attrs, kMesh, nd_of(sig))) continue;
      ++rep.searched;
      if (!holds(op, mc, c, sig)) continue;
      if (sig.output == sbp::partial_max || sig.output == sbp::partial_min) {
        Signature as_b = sig;
        as_b.output = sbp::broadcast;
        if (std::find(table.begin(), table.end(), as_b) != table.end() || holds(op, mc, c, as_b)) continue;
      }
      const std::string key = op.name + " " + sig.to_string();
      auto m = std::find_if(rep.missing.begin(), rep.missing.end(),
                            [&](const MissingSignature& x) { return x.signature == key; });
      if (m == rep.missing.end()) m = rep.missing.insert(rep.missing.end(), MissingSignature{key, {}});
      m->cases.push_back(mc.text(*op.schema));
    }
  }
}

}  // namespace

std::string ValidationCase::text() const { return text(OpSchema{}); }

std::string ValidationCase::text(const OpSchema& op) const {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : "") + inputs[i].meta.to_string();
  if (!attrs.empty()) s += "; " + detail::attrs_description(op, attrs);
  return s;
}

std::string ValidationReport::to_string() const {
  std::string s;
  for (const std::string& f : failures) s += f + "\n";
  for (const MissingSignature& m : missing) {
    std::string cases;
    for (size_t i = 0; i < m.cases.size() && i < 3; ++i) cases += (i ? "; " : "") + m.cases[i];
    if (m.cases.size() > 3) cases += "; and " + std::to_string(m.cases.size() - 3) + " more";
    s += "missing valid signature: " + m.signature + "   [for " + cases + "]\n";
  }
  return s + std::to_string(failures.size()) + " failures; " + std::to_string(checked) + " declared signatures checked (" +
         std::to_string(trials) + " trials); " + std::to_string(searched) + " undeclared combinations tried, " +
         std::to_string(missing.size()) + " valid ones missing from the table\n";
}

ValidationReport validate(const ValidatedOp& op, const ValidateOptions& options) {
  ValidationReport report;
  for (size_t c = 0; c < op.cases.size(); ++c) {
    const CaseTable ct(op, c);
    check_declared(op, ct, report);
    if (options.search_missing) search_missing(op, ct, report);
  }
  return report;
}

}  // namespace spsd
