#pragma once
// StateDict: named global tensors, what checkpoints (io/checkpoint.hpp) save and load, what a
// model's state_dict() and an optimizer's state_dict() give. A tensor-layer value: it only
// names tensors, so the layers that make state dicts (autograd's optimizers, nn's modules) and
// the one that stores them (io) all reach it.
#include <map>
#include <string>
#include <vector>

#include "spsd/tensor/global_tensor.hpp"

namespace spsd {

// Named global tensors of any element type: a model's state (parameters, optimizer state, the
// step count as a 0-d tensor). Entries share storage with the tensors inserted, so loading into
// a StateDict writes the model's own parameters in place.
class StateDict {
 public:
  // Names are printable ASCII without spaces (they are words of the manifest).
  template <Element T>
  void insert(const std::string& name, const GlobalTensor<T>& t) {
    check_name(name);
    entries_.insert_or_assign(name, t.data());
  }
  template <Element T>
  GlobalTensor<T> at(const std::string& name) const {
    const detail::GlobalData& d = entry(name);
    SPSD_CHECK(d.dtype == dtype_of<T>, "StateDict::at", "tensor \"", name, "\" is ", d.dtype, ", asked for ", dtype_of<T>);
    return GlobalTensor<T>::from_data(d);
  }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  // Adds every entry of other (the same tensors, shared); a name both hold is an Error.
  void merge(const StateDict& other);
  size_t size() const { return entries_.size(); }
  std::vector<std::string> names() const;  // sorted
  // Dtype-erased access, for the checkpoint implementation.
  const std::map<std::string, detail::GlobalData>& entries() const { return entries_; }
  const detail::GlobalData& entry(const std::string& name) const;

  // spsd::Error (naming StateDict::insert) unless name is non-empty printable ASCII without spaces.
  static void check_name(const std::string& name);

 private:
  std::map<std::string, detail::GlobalData> entries_;
};

}  // namespace spsd
