// load_checkpoint and checkpoint_contents: each rank reads the chunks that hold its box in the
// target layout, in any placement, layout or world size (the format: docs/checkpoints.md).
#include "agreed.hpp"
#include "convert.hpp"
#include "read_box.hpp"
#include "spsd/boxing/to_layout.hpp"

namespace spsd {

namespace detail {

namespace {

// Throws unless the stored tensor loads as dtype (the same, or both floating: then it converts).
void check_dtype(std::string_view op, const std::string& dir, const std::string& name, DType stored, DType dtype) {
  SPSD_CHECK(loads_as(stored, dtype), op, "tensor \"", name, "\" in ", dir, " is ", to_string(stored), ", asked for ",
             to_string(dtype), " (only floating dtypes convert on load)");
}

// This rank's box of `stored` in (placement, nd_sbp) with B for P, read from the files into host
// memory as dtype; null on ranks outside the placement, which read nothing.
std::shared_ptr<Storage> read_local(std::string_view op, const std::string& name, const StoredTensor& stored, const Manifest& m,
                     Readers& files, DType dtype, const Placement& placement, const NdSbp& nd_sbp) {
  if (!placement.contains(rank())) return nullptr;
  const Box target = box_of(stored.shape, placement, without_partial(nd_sbp), rank());
  auto host = Storage::allocate_uninitialized(target.numel() * size_of(stored.dtype), DeviceType::kCPU);
  read_box(op, name, stored, m, files, target, static_cast<char*>(host->data()));
  if (dtype == stored.dtype) return host;
  auto converted = Storage::allocate_uninitialized(target.numel() * size_of(dtype), DeviceType::kCPU);
  convert_elements(std::as_const(*host).data(), stored.dtype, converted->data(), dtype, target.numel());
  return converted;
}

// The loaded boxes as a global tensor in (placement, nd_sbp). They were read on the host in that
// layout with B for P; the plan boxes them into the partial axes and moves them to the
// placement's memory space (local steps only). Collective.
GlobalData to_target(const StoredTensor& stored, const std::shared_ptr<Storage>& loaded, DType dtype,
                     const Placement& placement, const NdSbp& nd_sbp) {
  const GlobalData read{stored.shape, dtype, on_device(placement, DeviceType::kCPU), without_partial(nd_sbp), loaded};
  return to_layout(read, placement, nd_sbp);
}

}  // namespace

GlobalData load_tensor(const std::string& dir, const std::string& name, DType dtype, const Placement& placement,
                       const NdSbp& nd_sbp) {
  constexpr std::string_view op = "load_checkpoint";
  check_same_call(concat(op, "(", dir, ", ", name, ", ", to_string(dtype), " ", nd_sbp, " on ", placement, ")"));
  Manifest m;
  const StoredTensor* stored = nullptr;
  std::shared_ptr<Storage> loaded;
  NdSbp layout = nd_sbp;  // negative split axes normalized once the stored shape is known
  agreed(op, [&] {
    m = read_manifest(op, dir);
    m.check_holds(op, {name});
    stored = &m.tensors.at(name);
    check_dtype(op, dir, name, stored->dtype, dtype);
    layout = normalize_axes(nd_sbp, stored->shape.ndim());
    check_global_layout(op, stored->shape, placement, layout);
    Readers files(op, m);
    loaded = read_local(op, name, *stored, m, files, dtype, placement, layout);
  });
  return to_target(*stored, loaded, dtype, placement, layout);
}

}  // namespace detail

using namespace detail;  // the format, manifest, reading and failing together: src/io/*.hpp

void load_checkpoint(const std::string& dir, StateDict& into) {
  check_not_capturing("load_checkpoint", "files written or read there would not be again on a replay; save and load between calls");
  constexpr std::string_view op = "load_checkpoint";
  std::vector<std::string> entries;
  for (const auto& [name, d] : into.entries()) entries.push_back(concat(name, " ", describe(d)));
  check_same_call(concat(op, "(", dir, ")"), std::move(entries));
  Manifest m;
  std::vector<std::shared_ptr<Storage>> loaded;
  agreed(op, [&] {
    m = read_manifest(op, dir);
    m.check_holds(op, into.names());
    for (const auto& [name, d] : into.entries()) {
      const StoredTensor& s = m.tensors.at(name);
      SPSD_CHECK(loads_as(s.dtype, d.dtype) && s.shape == d.shape, op, "tensor \"", name, "\" in ", dir, " is ",
                 s.shape, " ", to_string(s.dtype), ", the target is ", describe(d),
                 " (the shapes must be equal; only floating dtypes convert on load)");
    }
    Readers files(op, m);
    for (const auto& [name, d] : into.entries())
      loaded.push_back(read_local(op, name, m.tensors.at(name), m, files, d.dtype, d.placement, d.nd_sbp));
  });
  // Every read succeeded on every rank: only now are the targets written.
  size_t i = 0;
  for (const auto& [name, d] : into.entries()) {
    const GlobalData value = to_target(m.tensors.at(name), loaded[i++], d.dtype, d.placement, d.nd_sbp);
    bump_boxed_version(d.boxed);  // on every rank holding the tensor: what was boxed from it is stale
    if (!d.local || !value.local) continue;  // a rank outside the placement
    const int64_t bytes = box_of(d.shape, d.placement, d.nd_sbp, rank()).numel() * size_of(d.dtype);
    copy_bytes(d.local->data(), d.placement.device_type(), std::as_const(*value.local).data(), d.placement.device_type(),
               bytes);
    d.local->bump_version();  // written in place: a graph that saved the tensor must not use it
  }
}

std::vector<CheckpointEntry> checkpoint_contents(const std::string& dir) {
  constexpr std::string_view op = "checkpoint_contents";
  check_same_call(concat(op, "(", dir, ")"));
  std::vector<CheckpointEntry> entries;
  agreed(op, [&] {
    for (const auto& [name, t] : read_manifest(op, dir).tensors)
      entries.push_back({name, t.shape, t.dtype, static_cast<int64_t>(t.boxes.size())});
  });
  return entries;
}

}  // namespace spsd
