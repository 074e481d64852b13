#pragma once
// Shape ops: pure data movement, so every partial layout carries through unchanged (each rank
// moves its own piece; the identity padding of the ranks that do not hold the value moves with
// it, and reducing moved pieces equals moving the reduced tensor). 1-d tables:
//
//   permute(x, perm), transpose(x, d0, d1)   (out axis i is x axis perm[i])
//       S(perm[i]) -> S(i) for each output axis i;  P(sum|max|min) -> same;  B -> B
//       local kernel: kernel::cpu::permute of the piece.
//   reshape(x, shape)                        (one -1 allowed)
//       S(i) -> S(j) for each input axis i and output axis j of one "reshape group" (a run of
//       input axes and a run of output axes with the same element count, see below), sizes > 1;
//       P(sum|max|min) -> same;  B -> B
//       Whether S(i) -> S(j) is exact depends on the sizes and the mesh ((6, 4) -> (24,) with
//       S(0) -> S(0) is on 2 or 3 ranks, not on 4: balanced splits of 6 rows and of 24
//       elements differ), so ReshapeDef::valid checks every N-d candidate on the real shapes:
//       on every mesh position, the input piece read row-major must be exactly the output piece
//       read row-major. The resolver boxes the input into a valid one otherwise (B at worst).
//       local kernel: a plain copy of the piece (the dispatcher always allocates the output, so
//       the storage is not aliased).
//   slice(x, axis, begin, end)               (0 <= begin <= end <= size, else Error)
//       S(d) -> S(d) for d != axis;  P(sum|max|min) -> same;  B -> B
//       local kernel: kernel::cpu::copy_region (the piece holds the whole axis).
//   concat(xs, axis)
//       S(d) on every input -> S(d) for d != axis;  P(op) on every input -> P(op);  B -> B
//       local kernel: kernel::cpu::copy_region of each piece at its offset along the axis.
#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/layout/split.hpp"
#include "spsd/op/dispatch.hpp"

namespace spsd {

namespace detail::shape_ops {

inline const Sbp* const kPartials[] = {&sbp::partial_sum, &sbp::partial_max, &sbp::partial_min};

// P(sum), P(max), P(min) with every input and the output alike, then the all-B signature.
inline void add_partials_and_broadcast(std::vector<Signature>& t, size_t n_inputs) {
  for (const Sbp* p : kPartials) t.push_back(uniform_signature(n_inputs, *p));
  t.push_back(uniform_signature(n_inputs, sbp::broadcast));
}

// axis in [-ndim, ndim) -> [0, ndim); Error naming the op otherwise.
inline int64_t normalize_axis(std::string_view op, std::string_view what, int64_t axis, const Shape& shape) {
  const int64_t r = shape.ndim();
  SPSD_CHECK(axis >= -r && axis < r, op, what, " ", axis, " is out of range for a tensor of shape ", shape,
             " (", r, " axes)");
  return axis < 0 ? axis + r : axis;
}

// The permutation permute(x, perm) takes, normalized; Error naming the op unless perm is one.
inline std::vector<int64_t> checked_perm(std::string_view op, const Shape& shape, const std::vector<int64_t>& perm) {
  const int64_t r = shape.ndim();
  SPSD_CHECK(static_cast<int64_t>(perm.size()) == r, op, "perm ", join(perm), " has ", perm.size(),
             " entries but the tensor of shape ", shape, " has ", r, " axes");
  std::vector<int64_t> out(perm.size());
  std::vector<bool> seen(r, false);
  for (int64_t i = 0; i < r; ++i) {
    const int64_t p = perm[i];
    SPSD_CHECK(p >= -r && p < r && !seen[p < 0 ? p + r : p], op, "perm ", join(perm),
               " is not a permutation of the axes of a tensor of shape ", shape);
    out[i] = p < 0 ? p + r : p;
    seen[out[i]] = true;
  }
  return out;
}

inline Shape permuted(const Shape& s, const std::vector<int64_t>& perm) {
  std::vector<int64_t> dims(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) dims[i] = s[perm[i]];
  return Shape(std::move(dims));
}

// Shared by permute (attrs = perm) and transpose (attrs = [d0, d1]).
template <bool Transpose>
struct PermuteLike {
  static constexpr std::string_view name = Transpose ? "transpose" : "permute";

  static std::vector<int64_t> perm_of(const Shape& shape, const OpAttrs& attrs) {
    if constexpr (Transpose) {
      SPSD_CHECK(attrs.size() == 2, name, "takes two axes, got ", join(attrs));
      const int64_t d0 = normalize_axis(name, "d0", attrs[0], shape), d1 = normalize_axis(name, "d1", attrs[1], shape);
      std::vector<int64_t> perm(shape.ndim());
      for (int64_t i = 0; i < shape.ndim(); ++i) perm[i] = i;
      std::swap(perm[d0], perm[d1]);
      return perm;
    } else {
      return checked_perm(name, shape, attrs);
    }
  }

  static std::string attrs_text(const OpAttrs& attrs) {
    if constexpr (Transpose) return attrs.size() == 2 ? concat("d0=", attrs[0], ", d1=", attrs[1]) : join(attrs);
    else return "perm=" + join(attrs);
  }

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    return {permuted(in[0].shape, perm_of(in[0].shape, attrs)), in[0].dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    const std::vector<int64_t> perm = perm_of(in[0].shape, attrs);
    std::vector<Signature> t;
    for (size_t i = 0; i < perm.size(); ++i)
      t.push_back({{sbp::split(perm[i])}, sbp::split(static_cast<int64_t>(i))});
    add_partials_and_broadcast(t, 1);
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    const std::vector<int64_t> perm = perm_of(k.inputs[0].global->shape, k.attrs);
    SPSD_CHECK(permuted(k.inputs[0].shape, perm) == k.out_shape, name, "piece of ", k.inputs[0].shape,
               " does not permute to the output piece ", k.out_shape, " (signature ", k.signature, ")");
    kernel::permute<T>(k.target, k.in<T>(0), k.inputs[0].shape, perm, k.out_as<T>());
  }
};

// ---- reshape ----

// reshape's target with the -1 resolved; Error naming the op, the shapes and the counts.
inline Shape reshape_target(const Shape& from, const std::vector<int64_t>& to) {
  int64_t known = 1, wild = -1;
  for (size_t i = 0; i < to.size(); ++i) {
    SPSD_CHECK(to[i] >= -1, "reshape", "shape ", join(to), " has a negative size ", to[i], " (only -1 is allowed)");
    if (to[i] == -1) {
      SPSD_CHECK(wild < 0, "reshape", "shape ", join(to), " has more than one -1");
      wild = static_cast<int64_t>(i);
    } else {
      SPSD_CHECK(!__builtin_mul_overflow(known, to[i], &known), "reshape", "shape ", join(to),
                 " has more than 2^63 - 1 elements");
    }
  }
  const int64_t n = from.numel();
  std::vector<int64_t> dims = to;
  if (wild >= 0) {
    SPSD_CHECK(known > 0 && n % known == 0, "reshape", "cannot reshape a tensor of shape ", from, " (", n,
               " elements) to ", join(to), ": no size for -1 gives ", n, " elements");
    dims[wild] = n / known;
  } else {
    SPSD_CHECK(known == n, "reshape", "cannot reshape a tensor of shape ", from, " (", n, " elements) to ", join(to),
               " (", known, " elements)");
  }
  return Shape(std::move(dims));
}

// Reshape groups: runs [in_begin, in_end) of input axes and [out_begin, out_end) of output axes
// with equal element counts, in order, covering both shapes (numel > 0). Row-major order of the
// whole tensor is the row-major order of the groups' own linear indices, so a piece is the same
// elements in the same order on both sides iff in every group it is one contiguous run of that
// group's linear index, and the same run.
struct Group {
  int64_t in_begin, in_end, out_begin, out_end;
};
inline std::vector<Group> reshape_groups(const Shape& in, const Shape& out) {
  std::vector<Group> groups;
  int64_t i = 0, j = 0;
  const int64_t ri = in.ndim(), ro = out.ndim();
  while (i < ri || j < ro) {
    Group g{i, i, j, j};
    int64_t a = 1, b = 1;
    do {
      if (j >= ro || (i < ri && a <= b)) a *= in[i++];
      else b *= out[j++];
    } while (a != b && (i < ri || j < ro));
    g.in_end = i;
    g.out_end = j;
    groups.push_back(g);
  }
  return groups;
}

// The run of the group's linear index [first, first + count) that box covers on axes [lo, hi)
// of shape, or first = -1 when it is not one contiguous run. Requires a non-empty box.
struct Run {
  int64_t first, count;
  friend bool operator==(const Run&, const Run&) = default;
};
inline Run run_of(const Shape& shape, const Box& box, int64_t lo, int64_t hi) {
  int64_t k = hi - 1;
  while (k >= lo && box.begin[k] == 0 && box.end[k] == shape[k]) --k;  // full trailing axes
  for (int64_t d = lo; d < k; ++d)
    if (box.end[d] - box.begin[d] != 1) return {-1, 0};  // before the partial axis: one index each
  int64_t first = 0, count = 1;
  for (int64_t d = lo; d < hi; ++d) {
    first = first * shape[d] + box.begin[d];
    count *= box.end[d] - box.begin[d];
  }
  return {first, count};
}

struct ReshapeDef {
  static constexpr std::string_view name = "reshape";

  static std::string attrs_text(const OpAttrs& attrs) { return "shape=" + join(attrs); }

  // attrs = the target sizes as given (one may be -1).
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    return {reshape_target(in[0].shape, attrs), in[0].dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    const Shape &from = in[0].shape, to = infer(in, attrs).shape;
    std::vector<Signature> t;
    if (from.numel() > 0) {
      for (const Group& g : reshape_groups(from, to))
        for (int64_t i = g.in_begin; i < g.in_end; ++i)
          for (int64_t j = g.out_begin; j < g.out_end; ++j)
            if (from[i] > 1 && to[j] > 1) t.push_back({{sbp::split(i)}, sbp::split(j)});
    } else if (to.ndim() > 0) {
      // Nothing to move: any split of the input may give any layout of the output.
      for (int64_t i = 0; i < from.ndim(); ++i) t.push_back({{sbp::split(i)}, sbp::split(0)});
    }
    add_partials_and_broadcast(t, 1);
    return t;
  }

  // Exact iff on every mesh position the input piece, read row-major, is the output piece read
  // row-major (both empty counts as exact).
  static bool valid(std::span<const TensorMeta> in, const OpAttrs& attrs, const Shape& mesh,
                    const NdSignature& candidate) {
    const Shape &from = in[0].shape, to = infer(in, attrs).shape;
    if (from.numel() == 0) return true;
    const std::vector<Group> groups = reshape_groups(from, to);
    std::vector<int64_t> coords(mesh.ndim(), 0);
    for (int64_t pos = 0; pos < mesh.numel(); ++pos) {
      const Box bi = box_at(from, mesh, candidate.inputs[0], coords), bo = box_at(to, mesh, candidate.output, coords);
      const bool ei = bi.empty(), eo = bo.empty();
      if (ei != eo) return false;
      if (!ei) {
        for (const Group& g : groups) {
          const Run ri = run_of(from, bi, g.in_begin, g.in_end), ro = run_of(to, bo, g.out_begin, g.out_end);
          if (ri.first < 0 || !(ri == ro)) return false;
        }
      }
      for (int64_t a = mesh.ndim() - 1; a >= 0 && ++coords[a] == mesh[a]; --a) coords[a] = 0;
    }
    return true;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    const int64_t n = k.out_shape.numel();
    SPSD_CHECK(k.inputs[0].shape.numel() == n, name, "piece of ", k.inputs[0].shape, " cannot fill a piece of ",
               k.out_shape, " (signature ", k.signature, ")");
    if (n > 0) detail::copy_bytes(k.out, k.target.device, k.inputs[0].data, k.target.device, n * static_cast<int64_t>(sizeof(T)));
  }
};

// ---- slice ----

struct SliceDef {
  static constexpr std::string_view name = "slice";

  static std::string attrs_text(const OpAttrs& attrs) {
    return attrs.size() == 3 ? concat("axis=", attrs[0], ", begin=", attrs[1], ", end=", attrs[2]) : join(attrs);
  }

  // attrs = [axis (as given), begin, end].
  static int64_t axis_of(const Shape& shape, const OpAttrs& attrs) {
    SPSD_CHECK(attrs.size() == 3, name, "takes axis, begin, end, got ", join(attrs));
    return normalize_axis(name, "axis", attrs[0], shape);
  }

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    const Shape& s = in[0].shape;
    const int64_t axis = axis_of(s, attrs), begin = attrs[1], end = attrs[2];
    SPSD_CHECK(0 <= begin && begin <= end && end <= s[axis], name, "range [", begin, ", ", end, ") of axis ", attrs[0],
               " is out of bounds for a tensor of shape ", s, " (needs 0 <= begin <= end <= ", s[axis], ")");
    std::vector<int64_t> dims = s.dims();
    dims[axis] = end - begin;
    return {Shape(std::move(dims)), in[0].dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    const int64_t axis = axis_of(in[0].shape, attrs);
    std::vector<Signature> t;
    for (int64_t d = 0; d < in[0].shape.ndim(); ++d)
      if (d != axis) t.push_back(uniform_signature(1, sbp::split(d)));
    add_partials_and_broadcast(t, 1);
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    const Shape& xs = k.inputs[0].shape;
    const int64_t axis = axis_of(k.inputs[0].global->shape, k.attrs);
    std::vector<int64_t> src_begin(xs.ndim(), 0), dst_begin(xs.ndim(), 0);
    src_begin[axis] = k.attrs[1];
    kernel::copy_region<T>(k.target, k.in<T>(0), xs, src_begin, k.out_as<T>(), k.out_shape, dst_begin, k.out_shape);
  }
};

// ---- concat ----

struct ConcatDef {
  static constexpr std::string_view name = "concat";

  static std::string attrs_text(const OpAttrs& attrs) { return attrs.size() == 1 ? concat("axis=", attrs[0]) : join(attrs); }

  // attrs = [axis (as given)].
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    SPSD_CHECK(!in.empty(), name, "needs at least one input");
    SPSD_CHECK(attrs.size() == 1, name, "takes one axis, got ", join(attrs));
    const Shape& s0 = in[0].shape;
    SPSD_CHECK(s0.ndim() > 0, name, "cannot concatenate 0-d tensors (input 0 has shape ", s0, ")");
    const int64_t axis = normalize_axis(name, "axis", attrs[0], s0);
    std::vector<int64_t> dims = s0.dims();
    for (size_t i = 1; i < in.size(); ++i) {
      const Shape& s = in[i].shape;
      SPSD_CHECK(in[i].dtype == in[0].dtype, name, "input ", i, " is ", in[i].dtype, " but input 0 is ", in[0].dtype);
      SPSD_CHECK(s.ndim() == s0.ndim(), name, "input ", i, " has shape ", s, " but input 0 has shape ", s0,
                 ": the numbers of axes differ");
      for (int64_t d = 0; d < s.ndim(); ++d)
        SPSD_CHECK(d == axis || s[d] == s0[d], name, "input ", i, " has shape ", s, " but input 0 has shape ", s0,
                   ": axis ", d, " differs (only axis ", axis, " may)");
      dims[axis] += s[axis];
    }
    return {Shape(std::move(dims)), in[0].dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    const int64_t axis = normalize_axis(name, "axis", attrs[0], in[0].shape);
    std::vector<Signature> t;
    for (int64_t d = 0; d < in[0].shape.ndim(); ++d)
      if (d != axis) t.push_back(uniform_signature(in.size(), sbp::split(d)));
    add_partials_and_broadcast(t, in.size());
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    const int64_t axis = normalize_axis(name, "axis", k.attrs[0], k.out_global.shape);
    std::vector<int64_t> src_begin(k.out_shape.ndim(), 0), dst_begin(k.out_shape.ndim(), 0);
    for (const LocalInput& x : k.inputs) {
      kernel::copy_region<T>(k.target, x.as<T>(), x.shape, src_begin, k.out_as<T>(), k.out_shape, dst_begin, x.shape);
      dst_begin[axis] += x.shape[axis];
    }
  }
};

}  // namespace detail::shape_ops

// Reorders the axes: the output's axis i is x's axis perm[i] (negative entries count from the end).
template <Element T>
GlobalTensor<T> permute(const GlobalTensor<T>& x, std::vector<int64_t> perm) {
  return call_op<detail::shape_ops::PermuteLike<false>>(perm, {}, x);
}

// Swaps axes d0 and d1 (negative counts from the end).
template <Element T>
GlobalTensor<T> transpose(const GlobalTensor<T>& x, int64_t d0, int64_t d1) {
  return call_op<detail::shape_ops::PermuteLike<true>>({d0, d1}, {}, x);
}

// Same elements in row-major order, another shape. The vector and braced forms accept one -1
// (the size that makes the element counts equal): reshape(x, {-1, 4}).
template <Element T>
GlobalTensor<T> reshape(const GlobalTensor<T>& x, const Shape& shape) {
  return call_op<detail::shape_ops::ReshapeDef>(shape.dims(), {}, x);
}
template <Element T>
GlobalTensor<T> reshape(const GlobalTensor<T>& x, std::vector<int64_t> shape) {
  return call_op<detail::shape_ops::ReshapeDef>(shape, {}, x);
}
template <Element T>
GlobalTensor<T> reshape(const GlobalTensor<T>& x, std::initializer_list<int64_t> shape) {
  return call_op<detail::shape_ops::ReshapeDef>(OpAttrs(shape), {}, x);
}

// x[..., begin:end, ...] along axis (negative counts from the end); 0 <= begin <= end <= size.
template <Element T>
GlobalTensor<T> slice(const GlobalTensor<T>& x, int64_t axis, int64_t begin, int64_t end) {
  return call_op<detail::shape_ops::SliceDef>({axis, begin, end}, {}, x);
}

// The inputs joined along axis (negative counts from the end); every other axis must agree.
template <Element T>
GlobalTensor<T> concat(const std::vector<GlobalTensor<T>>& xs, int64_t axis) {
  SPSD_CHECK(!xs.empty(), "concat", "needs at least one input");
  std::vector<detail::InputRef> refs;
  refs.reserve(xs.size());
  for (const GlobalTensor<T>& x : xs) refs.push_back(detail::input_ref(x));
  return detail::run_op<detail::shape_ops::ConcatDef, T>(refs, OpAttrs{axis});
}
template <Element T>
GlobalTensor<T> concat(std::initializer_list<GlobalTensor<T>> xs, int64_t axis) {
  return concat(std::vector<GlobalTensor<T>>(xs), axis);
}

// Compiled into the library (core/instances.hpp).
#define SPSD_SHAPE_OPS_INSTANCES(prefix, T)                                                          \
  prefix template GlobalTensor<T> permute<T>(const GlobalTensor<T>&, std::vector<int64_t>);          \
  prefix template GlobalTensor<T> transpose<T>(const GlobalTensor<T>&, int64_t, int64_t);            \
  prefix template GlobalTensor<T> reshape<T>(const GlobalTensor<T>&, const Shape&);                  \
  prefix template GlobalTensor<T> reshape<T>(const GlobalTensor<T>&, std::vector<int64_t>);          \
  prefix template GlobalTensor<T> reshape<T>(const GlobalTensor<T>&, std::initializer_list<int64_t>); \
  prefix template GlobalTensor<T> slice<T>(const GlobalTensor<T>&, int64_t, int64_t, int64_t);       \
  prefix template GlobalTensor<T> concat<T>(const std::vector<GlobalTensor<T>>&, int64_t);           \
  prefix template GlobalTensor<T> concat<T>(std::initializer_list<GlobalTensor<T>>, int64_t);
SPSD_FOR_EACH_ELEMENT(SPSD_SHAPE_OPS_INSTANCES, extern)

}  // namespace spsd
