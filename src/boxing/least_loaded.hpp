#pragma once
// Dealing the requests for one replicated piece over its holders: each request goes to the holder
// with the least volume dealt so far, the first in holder order on ties. Requests arrive in runs
// of equal size, and a run is dealt in whole rounds where it can be: once the holder in front,
// after taking a request, would stand behind every other one, each next request goes to the next
// holder in turn, so `count` of them add count / holders rounds to everyone and one more to the
// first count % holders. Otherwise the front holder takes as many as keep it in front, then
// moves to its place. The result is the request-by-request rule's, at a cost that follows the
// runs rather than the requests (issue 27: a broadcast source with uneven pieces).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace spsd::detail {

class LeastLoaded {
 public:
  explicit LeastLoaded(int64_t holders) : load_(holders, 0), messages_(holders, 0), order_(holders) {
    std::iota(order_.begin(), order_.end(), int64_t{0});
  }

  // Deals `count` requests of `size` elements each; returns the holder (its index in holder
  // order) that takes the one numbered `watch` among them, or -1 if none is watched.
  int64_t deal(int64_t size, int64_t count, int64_t watch = -1) {
    const int64_t k = static_cast<int64_t>(order_.size());
    int64_t taker = -1;
    for (int64_t dealt = 0; dealt < count;) {
      const int64_t front = order_.front(), last = order_.back();
      if (k == 1 || behind(load_[front] + size, front, last)) {  // in turns from here on
        const int64_t left = count - dealt, rounds = left / k, rest = left % k;
        if (watch >= dealt) taker = order_[(watch - dealt) % k];
        for (int64_t i = 0; i < k; ++i) {
          const int64_t h = order_[i], taken = rounds + (i < rest ? 1 : 0);
          load_[h] += taken * size;
          messages_[h] += taken;
        }
        std::rotate(order_.begin(), order_.begin() + rest, order_.end());
        return taker;
      }
      // The front holder keeps taking while its load stays below the next one's.
      const int64_t next = order_[1], gap = load_[next] - load_[front];
      int64_t taken = count - dealt;
      if (size > 0) taken = std::min(taken, 1 + (front < next ? gap / size : (gap + size - 1) / size - 1));
      if (watch >= dealt && watch < dealt + taken) taker = front;
      load_[front] += taken * size;
      messages_[front] += taken;
      dealt += taken;
      const auto place = std::upper_bound(order_.begin() + 1, order_.end(), front,
                                          [&](int64_t h, int64_t other) { return before(h, other); });
      std::rotate(order_.begin(), order_.begin() + 1, place);
    }
    return taker;
  }

  int64_t max_load() const { return *std::max_element(load_.begin(), load_.end()); }
  // Holder h's elements and requests dealt so far.
  int64_t load(int64_t h) const { return load_[static_cast<size_t>(h)]; }
  int64_t messages(int64_t h) const { return messages_[static_cast<size_t>(h)]; }
  int64_t max_messages() const { return *std::max_element(messages_.begin(), messages_.end()); }

 private:
  // Holder order by (load, index): who takes the next request.
  bool before(int64_t a, int64_t b) const { return load_[a] < load_[b] || (load_[a] == load_[b] && a < b); }
  // Whether holder h with load `load` would come after holder other.
  bool behind(int64_t load, int64_t h, int64_t other) const {
    return load > load_[other] || (load == load_[other] && h > other);
  }

  std::vector<int64_t> load_, messages_;  // per holder
  std::vector<int64_t> order_;            // the holders by (load, index)
};

}  // namespace spsd::detail
