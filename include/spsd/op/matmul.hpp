#pragma once
// matmul: (..., m, k) x (..., k, n) -> (..., m, n), batch axes broadcast (numpy rules).
// Signatures (seeds 000/001, plus batch splits):
//   S(m) x B -> S(m)       B x S(n) -> S(n)       S(k) x S(k) -> P(sum)
//   P(sum) x B -> P(sum)   B x P(sum) -> P(sum)   S(batch) x S(batch) -> S(batch)   B x B -> B
//
// Internally (backward's da = g b^T, db = a^T g) either operand may be read transposed:
// detail::matmul_transposed(a, b, trans_a, trans_b), the same op with attrs [trans_a, trans_b]
// (logged as matmul with "a^T" / "b^T"). Its table is the one above for op(a), op(b) with each
// split of a transposed operand's last two axes swapped back to the stored axis (transposed()):
// e.g. a^T g for x S(0), g S(0) is S(k) x S(k) -> P(sum), a partial gradient. The kernels pass
// the flags to BLAS (CblasTrans, CUBLAS_OP_T): no transposed copy is made.
//
// A 2-d weight's gradient x^T g, with x (..., r, k) and g (..., r, n) of the same batch shape,
// is summed over the batch: detail::matmul_batch_summed(x, g), attrs [1, 0, 1] (logged "a^T,
// batch summed"), is sum(x^T g, batch axes) as one op. Its table is that composition's: the
// a^T table with a batch split's output S(d) -> P(sum) and the matrix axes' S(ro-2), S(ro-1) ->
// S(0), S(1), so layouts and messages are the ones the composition gives. The kernel reads each
// piece (b, r, k) as the (b r, k) rows it is stored as: one GEMM over all rows, where the
// composition ran b GEMMs and a sum (other summation order, see docs/operators.md).
#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/op/broadcasting.hpp"
#include "spsd/op/dispatch.hpp"

namespace spsd {

namespace detail {

struct MatmulDef {
  static constexpr std::string_view name = "matmul";

  // attrs: [] (plain matmul), [trans_a, trans_b], each 0 or 1, or [1, 0, 1] (batch summed).
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    if (summed(attrs)) return infer_summed(in, attrs);
    SPSD_CHECK(attrs.empty() || (attrs.size() == 2 && (attrs[0] == 0 || attrs[0] == 1) && (attrs[1] == 0 || attrs[1] == 1)),
               name, "attrs must be [] or [trans_a, trans_b] with 0 or 1 each, or [1, 0, 1], got ", join(attrs));
    SPSD_CHECK(!flag(attrs, 0) || in[0].shape.ndim() >= 2, name, "needs matrices (2 or more axes): a is ", in[0].shape);
    SPSD_CHECK(!flag(attrs, 1) || in[1].shape.ndim() >= 2, name, "needs matrices (2 or more axes): b is ", in[1].shape);
    // The checks below read op(a) and op(b); an error names a transposed operand "a^T".
    const Shape a = logical(in[0].shape, flag(attrs, 0)), b = logical(in[1].shape, flag(attrs, 1));
    SPSD_CHECK(in[0].dtype == in[1].dtype, name, "dtypes differ: a is ", in[0].dtype, ", b is ", in[1].dtype);
    const char *an = flag(attrs, 0) ? "a^T" : "a", *bn = flag(attrs, 1) ? "b^T" : "b";
    SPSD_CHECK(a.ndim() >= 2 && b.ndim() >= 2, name, "needs matrices (2 or more axes): a is ", a, ", b is ", b);
    SPSD_CHECK(a[a.ndim() - 1] == b[b.ndim() - 2], name, "inner dimensions differ: ", an, " is ", a, ", ", bn, " is ",
               b);
    const Shape ba = batch_of(a), bb = batch_of(b);
    for (int64_t i = 1; i <= std::min(ba.ndim(), bb.ndim()); ++i) {
      const int64_t x = ba[ba.ndim() - i], y = bb[bb.ndim() - i];
      SPSD_CHECK(x == y || x == 1 || y == 1, name, "batch dimensions do not broadcast: ", an, " is ", a, ", ", bn,
                 " is ", b,
                 " (batch axis -", i, ": ", x, " vs ", y, ")");
    }
    Shape batch = broadcast_shapes(name, ba, bb);
    std::vector<int64_t> dims = batch.dims();
    dims.insert(dims.end(), {a[a.ndim() - 2], b[b.ndim() - 1]});
    return {Shape(std::move(dims)), in[0].dtype};
  }

  // The table of op(a) x op(b), mapped to the stored operands (transposed()).
  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    if (summed(attrs)) {
      infer_summed(in, attrs);
      std::vector<Signature> t = signatures(in, {1, 0});
      const int64_t batch = in[0].shape.ndim() - 2;
      for (Signature& s : t)
        if (s.output.is_split())
          s.output = s.output.axis() < batch ? sbp::partial_sum : sbp::split(s.output.axis() - batch);
      return t;
    }
    const bool ta = flag(attrs, 0), tb = flag(attrs, 1);
    const TensorMeta logical_in[] = {{logical(in[0].shape, ta), in[0].dtype}, {logical(in[1].shape, tb), in[1].dtype}};
    std::vector<Signature> t = untransposed_signatures(logical_in);
    if (ta || tb)
      for (Signature& s : t) s.inputs = {transposed(s.inputs[0], in[0].shape.ndim(), ta),
                                         transposed(s.inputs[1], in[1].shape.ndim(), tb)};
    return t;
  }

  static std::string attrs_text(const OpAttrs& attrs) {
    if (summed(attrs)) return "a^T, batch summed";
    return flag(attrs, 0) && flag(attrs, 1) ? "a^T b^T" : flag(attrs, 0) ? "a^T" : flag(attrs, 1) ? "b^T" : "";
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    if (summed(k.attrs)) {  // pieces (b, r, k) and (b, r, n), dense row-major: (b r, k)^T (b r, n)
      const Shape &a = k.inputs[0].shape, &b = k.inputs[1].shape;
      const int64_t rows = a.numel() / std::max<int64_t>(a[a.ndim() - 1], 1);
      kernel::matmul<T>(k.target, k.in<T>(0), Shape{rows, a[a.ndim() - 1]}, k.in<T>(1), Shape{rows, b[b.ndim() - 1]},
                        k.out_as<T>(), k.out_shape, true, false);
      return;
    }
    kernel::matmul<T>(k.target, k.in<T>(0), k.inputs[0].shape, k.in<T>(1), k.inputs[1].shape, k.out_as<T>(), k.out_shape,
                      flag(k.attrs, 0), flag(k.attrs, 1));
  }

 private:
  static bool flag(const OpAttrs& attrs, size_t i) { return attrs.size() == 2 && attrs[i] != 0; }
  static bool summed(const OpAttrs& attrs) { return attrs.size() == 3; }  // checked by infer_summed

  // sum over the batch of a^T b: a (..., r, k) and b (..., r, n), equal batch shapes of one or
  // more axes -> (k, n).
  static TensorMeta infer_summed(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    SPSD_CHECK((attrs == OpAttrs{1, 0, 1}), name, "attrs must be [] or [trans_a, trans_b] with 0 or 1 each, or [1, 0, 1], got ",
               detail::join(attrs));
    const Shape &a = in[0].shape, &b = in[1].shape;
    SPSD_CHECK(in[0].dtype == in[1].dtype, name, "dtypes differ: a is ", in[0].dtype, ", b is ", in[1].dtype);
    SPSD_CHECK(a.ndim() >= 3 && b.ndim() == a.ndim() && batch_of(a) == batch_of(b) && a[a.ndim() - 2] == b[b.ndim() - 2],
               name, "a^T b summed over the batch needs a (..., r, k) and b (..., r, n) with the same batch axes, got a ",
               a, ", b ", b);
    return {Shape{a[a.ndim() - 1], b[b.ndim() - 1]}, in[0].dtype};
  }

  // op(x)'s shape: the last two axes swapped when transposed.
  static Shape logical(const Shape& s, bool transposed) {
    if (!transposed || s.ndim() < 2) return s;
    std::vector<int64_t> d = s.dims();
    std::swap(d[d.size() - 1], d[d.size() - 2]);
    return Shape(std::move(d));
  }

  // A layout of op(x) as a layout of the stored x: a split of one of the last two axes of a
  // transposed operand is a split of the other; batch splits, B and P are unchanged.
  static Sbp transposed(const Sbp& s, int64_t rank, bool transposed) {
    if (!transposed || !s.is_split() || s.axis() < rank - 2) return s;
    return sbp::split(2 * rank - 3 - s.axis());
  }

  static std::vector<Signature> untransposed_signatures(std::span<const TensorMeta> in) {
    const int64_t ra = in[0].shape.ndim(), rb = in[1].shape.ndim();
    const Shape out = infer(in, {}).shape;
    const int64_t ro = out.ndim();
    const Sbp &B = sbp::broadcast, &P = sbp::partial_sum;
    std::vector<Signature> t = {
        {{sbp::split(ra - 2), B}, sbp::split(ro - 2)},
        {{B, sbp::split(rb - 1)}, sbp::split(ro - 1)},
        {{sbp::split(ra - 1), sbp::split(rb - 2)}, P},
    };
    // Batch axes: split where an input has the axis at full size, broadcast where it stretches.
    const Shape batch_out = batch_of(out);
    for (int64_t d = 0; d < batch_out.ndim(); ++d) {
      int64_t a = source_axis(batch_of(in[0].shape), batch_out, d), b = source_axis(batch_of(in[1].shape), batch_out, d);
      t.push_back({{a >= 0 ? sbp::split(a) : B, b >= 0 ? sbp::split(b) : B}, sbp::split(d)});
    }
    t.insert(t.end(), {{{P, B}, P}, {{B, P}, P}, {{B, B}, B}});
    return t;
  }

  static Shape batch_of(const Shape& s) {
    return Shape(std::vector<int64_t>(s.dims().begin(), s.dims().end() - 2));
  }
};

}  // namespace detail

// (..., m, k) x (..., k, n) -> (..., m, n), batch axes broadcast.
template <Element T>
GlobalTensor<T> matmul(const GlobalTensor<T>& a, const GlobalTensor<T>& b) {
  return call_op<detail::MatmulDef>({}, {}, a, b);
}

namespace detail {

// op(a) @ op(b) with op(x) = x^T (last two axes) where trans_x: for backward rules.
template <Element T>
GlobalTensor<T> matmul_transposed(const GlobalTensor<T>& a, const GlobalTensor<T>& b, bool trans_a, bool trans_b) {
  if (!trans_a && !trans_b) return spsd::matmul(a, b);  // one cache entry with the plain form
  return call_op<MatmulDef>({trans_a ? 1 : 0, trans_b ? 1 : 0}, {}, a, b);
}

// sum over the batch axes of a^T b, a (..., r, k) and b (..., r, n) with the same batch shape:
// a 2-d weight's gradient x^T g as one op and one GEMM per piece (see the top of this file).
template <Element T>
GlobalTensor<T> matmul_batch_summed(const GlobalTensor<T>& a, const GlobalTensor<T>& b) {
  return call_op<MatmulDef>({1, 0, 1}, {}, a, b);
}

}  // namespace detail

// Compiled into the library (core/instances.hpp).
#define SPSD_MATMUL_INSTANCES(prefix, T)                                                  \
  prefix template GlobalTensor<T> matmul<T>(const GlobalTensor<T>&, const GlobalTensor<T>&); \
  prefix template GlobalTensor<T> detail::matmul_transposed<T>(const GlobalTensor<T>&, const GlobalTensor<T>&, bool, bool); \
  prefix template GlobalTensor<T> detail::matmul_batch_summed<T>(const GlobalTensor<T>&, const GlobalTensor<T>&);
SPSD_FOR_EACH_ELEMENT(SPSD_MATMUL_INSTANCES, extern)

}  // namespace spsd
