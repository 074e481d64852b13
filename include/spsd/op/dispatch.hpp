#pragma once
// The one path every global op takes: same placement, shape inference, signature resolution
// (cached), the cross-rank check, boxing of the inputs, the local kernel on this rank's pieces,
// and the output wrapped with the signature's output layout. The library's ops and a user's own
// ops (docs/custom_ops.md) take it alike: spsd::call_op<Op>(attrs, scalar, inputs...).
//
// An op is a struct of static members (no state; the struct is never constructed):
//   static constexpr std::string_view name;      // unique: two op types with one name are an Error
//   static TensorMeta infer(std::span<const TensorMeta> inputs, const OpAttrs&);
//       // the whole output's shape and dtype; SPSD_CHECK the inputs, naming the op
//   static std::vector<Signature> signatures(std::span<const TensorMeta> inputs, const OpAttrs&);
//       // the 1-d SBP table, in preference order, ending with the all-B signature
// and a kernel, which runs on this rank's pieces (KernelArgs) and writes every output element:
//   template <Element T> static void kernel(const KernelArgs&);      // any device (k.target), or
//   template <Element T> static void cpu_kernel(const KernelArgs&);  // cpu only, and optionally
//   template <Element T> static void cuda_kernel(const KernelArgs&); // for cuda placements
// (on a cuda placement an op with neither kernel nor cuda_kernel is an Error naming it).
// Optional: `valid` and `attrs_text` (see OpSchema); a backward written with global ops,
//   template <FloatingElement T> static void backward(const GradArgs<T>&);
// (autograd/grad_args.hpp; registered on the op's first call); for ops whose input values
// can be invalid (integer division by zero),
//   template <Element T> static int64_t first_bad_element(const KernelArgs&);
//   static std::string bad_element_error(const Resolution&, int64_t index);
// (see run_op), or that take indices (an int64 input whose values must lie in [0, bound)),
//   static IndexCheck index_check(std::span<const TensorMeta> inputs);   // op/index_check.hpp
// and, for inputs whose values are restricted (a divisor, indices), what the validator draws:
//   static void input_domains(std::span<ValidationInput> inputs, const OpAttrs&);  // op/input_domain.hpp
// Nothing else is needed. Check a table with validate_op (op/rule_validator.hpp); with
// SPSD_CHECK_OPS=1 every op's table is checked at its first dispatch (op/op_validation.hpp).
#include <bit>
#include <concepts>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "spsd/kernel/any_device.hpp"
#include "spsd/op/captured_op.hpp"
#include "spsd/op/kernel_args.hpp"
#include "spsd/op/index_check.hpp"
#include "spsd/op/input_domain.hpp"
#include "spsd/op/op_validation.hpp"
#include "spsd/op/resolve.hpp"
#include "spsd/runtime/device_traffic.hpp"
#include "spsd/runtime/trace.hpp"
#include "spsd/tensor/global_tensor.hpp"

namespace spsd {

template <class Op>
concept GlobalOp = requires(std::span<const TensorMeta> metas, const OpAttrs& attrs) {
  { Op::name } -> std::convertible_to<std::string_view>;
  { Op::infer(metas, attrs) } -> std::same_as<TensorMeta>;
  { Op::signatures(metas, attrs) } -> std::same_as<std::vector<Signature>>;
};

// Whether Op has a kernel for element type T (any-device, or cpu-only).
template <class Op, class T>
concept HasKernel = requires(const KernelArgs& k) { Op::template kernel<T>(k); } ||
                    requires(const KernelArgs& k) { Op::template cpu_kernel<T>(k); };

namespace detail {
// An op's name belongs to one op type: the first op_schema of a name registers it (keyed by the
// schema's address); another type with that name throws spsd::Error naming both the name and
// the clash (a user op named "matmul" would otherwise take matmul's backward rule and cache).
void register_op_name(std::string_view name, const void* schema);
// Defined in autograd/grad_args.hpp (which an op with a backward includes to write it): adds
// Op::backward to the rule table. Declared here so that op/ need not include autograd/.
template <class Op>
void register_backward();
template <class Op>
concept HasBackward = requires { &Op::template backward<float>; };
}  // namespace detail

// The dtype-erased half of an op, built once per op type.
template <GlobalOp Op>
const OpSchema& op_schema() {
  static const OpSchema schema = [] {
    OpSchema s{Op::name, &Op::infer, &Op::signatures};
    if constexpr (requires { &Op::valid; }) s.valid = &Op::valid;
    if constexpr (requires { &Op::attrs_text; }) s.attrs_text = &Op::attrs_text;
    return s;
  }();
  static const bool registered = [] {
    detail::register_op_name(Op::name, &schema);
    if constexpr (detail::HasBackward<Op>) detail::register_backward<Op>();
    return true;
  }();
  (void)registered;
  return schema;
}

namespace detail {

// An input of an op, without its element type (no copies of shapes or placements).
struct InputRef {
  const Shape* shape;
  DType dtype;
  const Placement* placement;
  const NdSbp* nd_sbp;
  const std::shared_ptr<Storage>* local;
  const std::shared_ptr<AutogradMeta>* autograd;  // the tensor's autograd state (often null)
  const std::shared_ptr<BoxedCopies>* boxed;       // the layouts it was boxed to (tensor/boxed_copies.hpp)
};

template <Element T>
InputRef input_ref(const GlobalTensor<T>& t) {
  // An undefined tensor: null references, which prepare_op reports naming the op and the input.
  if (!t.defined()) return {nullptr, dtype_of<T>, nullptr, nullptr, nullptr, &t.autograd_meta(), nullptr};
  return {&t.shape(), dtype_of<T>, &t.placement(), &t.nd_sbp(), &t.to_local().storage(), &t.autograd_meta(),
          &t.boxed_copies()};
}

// out, recorded for backward when an input requires grad (autograd/ sits above op/: through the
// hooks table, tensor/hooks.hpp). Every rank records, those outside the placement too, so all
// ranks run the same backward ops.
template <Element T>
GlobalTensor<T> recorded(std::string_view op, std::span<const InputRef> inputs, const OpAttrs& attrs,
                         const Scalar& scalar, GlobalTensor<T> out) {
  if constexpr (!FloatingElement<T>) return out;  // integer and bool outputs carry no gradient
  for (const InputRef& in : inputs)
    if (*in.autograd && (*in.autograd)->requires_grad) {
      hooks.record_op(op, attrs, scalar, inputs, out.data(), out.autograd_meta());
      break;
    }
  return out;
}

// What the kernel needs after the dtype-erased steps (src/op/dispatch.cpp).
struct Prepared {
  std::shared_ptr<const Resolution> resolution;
  std::vector<std::shared_ptr<Storage>> locals;  // inputs' pieces in the chosen layouts
  bool participates = false;                     // this rank is in the placement
  std::vector<int64_t> coords;                   // this rank's mesh coordinates
  OpenSpan trace;  // the op's span under SPSD_TRACE: ends when run_op returns
};

// Ranks of the placement agree on a data-dependent error: each passes the global index it found
// in its pieces (-1 for none); all get the smallest (-1 when no rank found one). Collective over
// the placement (after the cross-rank check); free on one rank.
int64_t agree_on_bad_element(const Resolution& r, int64_t local);

// Checks the inputs share one placement, resolves (cached), notes the op and its scalar
// operand for the cross-rank check (checking first when the op communicates), boxes the inputs, logs under SPSD_LOG=dispatch.
Prepared prepare_op(const OpSchema& op, const OpAttrs& attrs, std::span<const InputRef> inputs,
                    const Scalar& scalar);

// Op's kernel for k.target: kernel<T> (any device), else cpu_kernel<T> or cuda_kernel<T>.
template <GlobalOp Op, Element T>
void run_kernel(const KernelArgs& k) {
  static_assert(HasKernel<Op, T>, "spsd op: needs `template <Element T> static void kernel(const KernelArgs&)` or "
                                  "`cpu_kernel` for this element type (see op/dispatch.hpp)");
  if constexpr (requires { Op::template kernel<T>(k); }) {
    Op::template kernel<T>(k);
  } else if (k.target.on_device()) {
    if constexpr (requires { Op::template cuda_kernel<T>(k); }) Op::template cuda_kernel<T>(k);
    else throw_error(Op::name, "has no cuda kernel (only cpu_kernel): run it on a cpu placement, or give the op "
                               "`template <Element T> static void cuda_kernel(const KernelArgs&)`");
  } else {
    Op::template cpu_kernel<T>(k);
  }
}

// Op's cpu kernel for output dtype `dtype`, one of Ts: what the rule validator runs.
template <class Op, class... Ts>
void run_cpu_kernel(DType dtype, const KernelArgs& k) {
  bool ran = false;
  ((!ran && dtype == dtype_of<Ts> ? (run_kernel<Op, Ts>(k), ran = true) : false), ...);
  SPSD_CHECK(ran, Op::name, "the validator has no kernel instance for ", dtype,
             " (name the element types: validate_op<Op, float, double>)");
}

template <GlobalOp Op>
void input_domains_of(std::span<ValidationInput> inputs, const OpAttrs& attrs) {
  if constexpr (requires { Op::input_domains(inputs, attrs); }) Op::input_domains(inputs, attrs);
}

// SPSD_CHECK_OPS: Op's table against its kernel, once per (Op, T) per process. 16-bit floats
// are checked as float32: their pieces round where the whole does not, beyond any tolerance
// that would still catch a wrong row.
template <GlobalOp Op, Element T>
void validate_first_dispatch(const Resolution& r, const OpAttrs& attrs, const Scalar& scalar) {
  using V = std::conditional_t<is_half_v<T>, float, T>;
  if constexpr (HasKernel<Op, V>)
    validate_on_first_dispatch({&op_schema<Op>(), &run_cpu_kernel<Op, V>, &input_domains_of<Op>, dtype_of<V>},
                               r.inputs, attrs, scalar);
}

// Op's kernel on args after its data checks (first_bad_element, index_check): what run_op runs
// once the pieces are in place, and what a compiled step replays (op/captured_op.hpp).
template <GlobalOp Op, Element T>
void run_checked_kernel(const KernelArgs& args, const Resolution& r) {
  if constexpr (requires { Op::template first_bad_element<T>(args); }) {
    // Only the ranks that hold a bad value see it; throwing there alone would leave the others
    // waiting in their next collective. So the ranks agree first, and all throw alike.
    const int64_t bad = agree_on_bad_element(r, Op::template first_bad_element<T>(args));
    if (bad >= 0) throw_error(Op::name, Op::bad_element_error(r, bad));
  }
  if constexpr (requires { Op::index_check(std::span<const TensorMeta>(r.inputs)); })
    check_indices(Op::name, r, args, Op::index_check(r.inputs));
  run_kernel<Op, T>(args);
}

template <GlobalOp Op>
constexpr bool kChecksIndices = requires(std::span<const TensorMeta> m) { Op::index_check(m); };

template <GlobalOp Op, Element T>
GlobalTensor<T> run_op(std::span<const InputRef> inputs, const OpAttrs& attrs = {}, Scalar scalar = {}) {
  const DeviceTrafficScope traffic(Op::name);
  Prepared p = prepare_op(op_schema<Op>(), attrs, inputs, scalar);
  const Resolution& r = *p.resolution;
  const NdSignature& sig = r.signature();
  SPSD_CHECK(r.output.dtype == dtype_of<T>, Op::name, "infers output dtype ", r.output.dtype, " but runs on ",
             dtype_of<T>);
  // Every rank, in the placement or not, reaches the same verdict here.
  if (op_validation()) validate_first_dispatch<Op, T>(r, attrs, scalar);
  if (!p.participates)
    return recorded(Op::name, inputs, attrs, scalar, GlobalTensor<T>(r.output.shape, r.placement, sig.output, Tensor<T>()));
  const Shape& mesh = r.placement.mesh();
  std::vector<LocalInput> locals;
  locals.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Box box = box_at(r.inputs[i].shape, mesh, sig.inputs[i], p.coords);
    Shape shape = box.shape();
    // Read access: waits for a pending boxing of this input, not for others reading it.
    locals.push_back({std::as_const(*p.locals[i]).data(), std::move(shape), std::move(box), &r.inputs[i]});
  }
  Box out_box = box_at(r.output.shape, mesh, sig.output, p.coords);
  Shape out_shape = out_box.shape();
  Tensor<T> out(out_shape, Storage::allocate_uninitialized(out_shape.numel() * static_cast<int64_t>(sizeof(T)),
                                                           r.placement.device_type()));
  KernelArgs args{attrs, scalar, locals, out.data(), out_shape, out_box, r.output, sig,
                  kernel::Target::of(r.placement.device_type())};
  run_checked_kernel<Op, T>(args, r);
  if (StepRecorder* recorder = tls_step_recorder) [[unlikely]]
    record_op(*recorder, {&op_schema<Op>(), attrs, scalar, p.resolution, &run_checked_kernel<Op, T>,
                          std::move(p.coords), kChecksIndices<Op>}, inputs, out.storage());
  return recorded(Op::name, inputs, attrs, scalar, GlobalTensor<T>(r.output.shape, r.placement, sig.output, std::move(out)));
}

}  // namespace detail

// Calls the global op Op on its inputs (GlobalTensors, of one placement; element types may
// differ): attrs select its signatures and go to infer, signatures and the kernel; scalar is a
// scalar operand (Scalar::of(v), or {} for none). The output's element type is Out, by default
// the first input's. Records the op for backward when an input requires grad.
template <class Op, class Out = void, Element First, class... Rest>
auto call_op(const OpAttrs& attrs, Scalar scalar, const GlobalTensor<First>& first, const Rest&... rest) {
  // Readable errors for an incomplete op, one line each (the concept's failure is long).
  static_assert(requires { Op::name; }, "spsd op: needs `static constexpr std::string_view name`");
  static_assert(requires(std::span<const TensorMeta> m, const OpAttrs& a) {
    { Op::infer(m, a) } -> std::same_as<TensorMeta>;
  }, "spsd op: needs `static TensorMeta infer(std::span<const TensorMeta>, const OpAttrs&)`");
  static_assert(requires(std::span<const TensorMeta> m, const OpAttrs& a) {
    { Op::signatures(m, a) } -> std::same_as<std::vector<Signature>>;
  }, "spsd op: needs `static std::vector<Signature> signatures(std::span<const TensorMeta>, const OpAttrs&)`");
  using T = std::conditional_t<std::is_void_v<Out>, First, Out>;
  const detail::InputRef refs[] = {detail::input_ref(first), detail::input_ref(rest)...};
  return detail::run_op<Op, T>(refs, attrs, scalar);
}

// The same without attributes or scalar operand.
template <class Op, class Out = void, Element First, class... Rest>
auto call_op(const GlobalTensor<First>& first, const Rest&... rest) {
  return call_op<Op, Out>(OpAttrs{}, Scalar{}, first, rest...);
}

}  // namespace spsd
