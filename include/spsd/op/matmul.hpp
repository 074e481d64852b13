#pragma once
// matmul: (..., m, k) x (..., k, n) -> (..., m, n), batch axes broadcast (numpy rules).
// Signatures (seeds 000/001, plus batch splits):
//   S(m) x B -> S(m)       B x S(n) -> S(n)       S(k) x S(k) -> P(sum)
//   P(sum) x B -> P(sum)   B x P(sum) -> P(sum)   S(batch) x S(batch) -> S(batch)   B x B -> B
#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/op/broadcasting.hpp"
#include "spsd/op/dispatch.hpp"

namespace spsd {

namespace detail {

struct MatmulDef {
  static constexpr std::string_view name = "matmul";

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    const Shape &a = in[0].shape, &b = in[1].shape;
    SPSD_CHECK(in[0].dtype == in[1].dtype, name, "dtypes differ: a is ", in[0].dtype, ", b is ", in[1].dtype);
    SPSD_CHECK(a.ndim() >= 2 && b.ndim() >= 2, name, "needs matrices (2 or more axes): a is ", a, ", b is ", b);
    SPSD_CHECK(a[a.ndim() - 1] == b[b.ndim() - 2], name, "inner dimensions differ: a is ", a, ", b is ", b);
    const Shape ba = batch_of(a), bb = batch_of(b);
    for (int64_t i = 1; i <= std::min(ba.ndim(), bb.ndim()); ++i) {
      const int64_t x = ba[ba.ndim() - i], y = bb[bb.ndim() - i];
      SPSD_CHECK(x == y || x == 1 || y == 1, name, "batch dimensions do not broadcast: a is ", a, ", b is ", b,
                 " (batch axis -", i, ": ", x, " vs ", y, ")");
    }
    Shape batch = broadcast_shapes(name, ba, bb);
    std::vector<int64_t> dims = batch.dims();
    dims.insert(dims.end(), {a[a.ndim() - 2], b[b.ndim() - 1]});
    return {Shape(std::move(dims)), in[0].dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    const int64_t ra = in[0].shape.ndim(), rb = in[1].shape.ndim();
    const Shape out = infer(in, attrs).shape;
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

  template <Element T>
  static void kernel(const KernelArgs& k) {
    kernel::matmul<T>(k.target, k.in<T>(0), k.inputs[0].shape, k.in<T>(1), k.inputs[1].shape, k.out_as<T>(), k.out_shape);
  }

 private:
  static Shape batch_of(const Shape& s) {
    return Shape(std::vector<int64_t>(s.dims().begin(), s.dims().end() - 2));
  }
};

}  // namespace detail

template <Element T>
GlobalTensor<T> matmul(const GlobalTensor<T>& a, const GlobalTensor<T>& b) {
  return detail::apply<detail::MatmulDef>({}, {}, a, b);
}

// Compiled into the library (core/instances.hpp).
#define SPSD_MATMUL_INSTANCES(prefix, T) \
  prefix template GlobalTensor<T> matmul<T>(const GlobalTensor<T>&, const GlobalTensor<T>&);
SPSD_FOR_EACH_ELEMENT(SPSD_MATMUL_INSTANCES, extern)

}  // namespace spsd
