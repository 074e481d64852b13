#pragma once
// Numbered<T>: distinct items numbered in the order they first appear, for walks over ranks that
// meet a few items again and again (rank_classes_impl.hpp).
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <type_traits>
#include <utility>
#include <vector>

namespace spsd::detail {

// Numbers distinct items in the order they first appear. A walk meets a few items over and over
// (alternating, typically), so the last few answers and a small table by hash answer most
// lookups with a compare or two; a map holds them all.
template <class T>
class Numbered {
 public:
  // item's number; `hint`, a number item likely has (the last one), is tried first.
  int64_t number(const T& item, int64_t hint) {
    if (hint >= 0 && same(items_[hint], item)) return hint;
    for (int64_t k : latest_)  // the last few answers: a walk alternating among a few hits here
      if (k >= 0 && same(items_[k], item)) return k;
    const int64_t k = find(item);
    std::copy_backward(latest_.begin(), latest_.end() - 1, latest_.end());
    return latest_[0] = k;
  }
  const T& item(size_t k) const { return items_[k]; }
  size_t size() const { return items_.size(); }

 private:
  int64_t find(const T& item) {
    int64_t& recent = recent_[hash(item) % recent_.size()];
    if (recent >= 0 && same(items_[recent], item)) return recent;
    auto [it, added] = index_.try_emplace(item, static_cast<int64_t>(items_.size()));
    if (added) items_.push_back(item);
    return recent = it->second;
  }
  // Items are integers, pairs of them, or sequences of either.
  static void mix(uint64_t& h, int64_t v) { h = (h ^ static_cast<uint64_t>(v)) * 0x9E3779B97F4A7C15ull; }
  static void mix(uint64_t& h, const std::pair<int64_t, int64_t>& p) { mix(h, p.first), mix(h, p.second); }
  template <class Seq>
  static void mix(uint64_t& h, const Seq& items) {
    for (const auto& x : items) mix(h, x);
  }
  static size_t hash(const T& item) {
    uint64_t h = 0;
    mix(h, item);
    return static_cast<size_t>(h >> 32);
  }
  // Element by element: == on a std::array or vector of integers calls memcmp, which costs more
  // than the few compares of the short items here.
  static bool same(const T& a, const T& b) {
    if constexpr (std::is_same_v<T, std::pair<int64_t, int64_t>>) {
      return a == b;
    } else {
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (a[i] != b[i]) return false;
      return true;
    }
  }
  std::vector<T> items_;
  std::map<T, int64_t> index_;
  std::array<int64_t, 61> recent_ = filled(-1);  // by hash
  std::array<int64_t, 3> latest_ = {-1, -1, -1};   // most recent first
  static constexpr std::array<int64_t, 61> filled(int64_t v) {
    std::array<int64_t, 61> a{};
    for (int64_t& x : a) x = v;
    return a;
  }
};

}  // namespace spsd::detail
