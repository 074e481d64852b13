// The caching device allocator's bookkeeping, over a fake driver (no GPU needed): steady-state
// reuse without driver calls, size classes, out-of-memory retry after emptying the cache, and
// misuse errors.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <vector>

#include <spsd/runtime/device_allocator.hpp>

#include "error_matchers.hpp"

using namespace spsd;

namespace {

// Hands out distinct fake addresses; refuses allocations beyond a byte budget (nullptr, as
// cudaMalloc's out-of-memory does) and records what is live.
class FakeDeviceMemory final : public RawDeviceMemory {
 public:
  explicit FakeDeviceMemory(int64_t budget, int64_t* live) : budget_(budget), live_(live) {}
  void* allocate(int64_t bytes) override {
    if (used_ + bytes > budget_) return nullptr;
    used_ += bytes;
    ++*live_;
    next_ += static_cast<uintptr_t>(bytes) + 4096;
    sizes_[reinterpret_cast<void*>(next_)] = bytes;
    return reinterpret_cast<void*>(next_);
  }
  void release(void* p) override {
    REQUIRE(sizes_.count(p) == 1);  // never released twice, never unknown
    used_ -= sizes_[p];
    sizes_.erase(p);
    --*live_;
  }
  std::string name() const override { return "fake:0"; }

 private:
  int64_t budget_, used_ = 0;
  int64_t* live_;
  uintptr_t next_ = 1 << 20;
  std::map<void*, int64_t> sizes_;
};

}  // namespace

TEST_CASE("device allocator: size classes", "[device-allocator]") {
  CHECK(DeviceAllocator::round_size(1) == 512);
  CHECK(DeviceAllocator::round_size(512) == 512);
  CHECK(DeviceAllocator::round_size(513) == 1024);
  CHECK(DeviceAllocator::round_size(1 << 20) == 1 << 20);
  CHECK(DeviceAllocator::round_size((1 << 20) + 1) == 2 << 20);
  CHECK(DeviceAllocator::round_size((5 << 20) + 7) == 6 << 20);
}

TEST_CASE("device allocator: a steady state makes no driver calls", "[device-allocator]") {
  int64_t live = 0;
  DeviceAllocator a(std::make_unique<FakeDeviceMemory>(int64_t{1} << 40, &live));
  CHECK(a.allocate(0) == nullptr);
  // One "training step": a few tensors of different sizes, freed at the end of the step.
  auto step = [&] {
    std::vector<void*> blocks;
    for (int64_t bytes : {100, 4000, 4000, 1 << 21, 700})
      blocks.push_back(a.allocate(bytes));
    CHECK(std::set<void*>(blocks.begin(), blocks.end()).size() == blocks.size());  // distinct while live
    for (void* p : blocks) a.free(p);
  };
  step();
  const DeviceAllocatorStats first = a.stats();
  CHECK(first.raw_allocations == 5);
  CHECK(first.bytes_in_use == 0);
  CHECK(first.bytes_cached == 512 + 4096 + 4096 + (2 << 20) + 1024);
  for (int i = 0; i < 10; ++i) step();
  const DeviceAllocatorStats later = a.stats();
  CHECK(later.raw_allocations == 5);  // every later request was a cache hit
  CHECK(later.cache_hits == 50);
  CHECK(later.requests == 55);
  CHECK(later.peak_bytes_in_use == first.bytes_cached);
  a.release_cached();
  CHECK(a.stats().bytes_cached == 0);
  CHECK(live == 0);
}

TEST_CASE("device allocator: reset_peak starts the peak from the bytes in use", "[device-allocator]") {
  int64_t live = 0;
  DeviceAllocator a(std::make_unique<FakeDeviceMemory>(int64_t{1} << 40, &live));
  void* big = a.allocate(1 << 21);
  void* small = a.allocate(1000);
  a.free(big);
  CHECK(a.stats().peak_bytes_in_use == (2 << 20) + 1024);
  a.reset_peak();
  CHECK(a.stats().peak_bytes_in_use == 1024);  // small is still in use
  void* again = a.allocate(600);
  CHECK(a.stats().peak_bytes_in_use == 1024 + 1024);
  a.free(small);
  a.free(again);
  a.release_cached();
}

TEST_CASE("device allocator: out of memory empties the cache and retries", "[device-allocator]") {
  int64_t live = 0;
  DeviceAllocator a(std::make_unique<FakeDeviceMemory>(8192, &live));
  void* small = a.allocate(4096);
  a.free(small);  // cached: 4096 of the 8192 budget held by the cache
  void* big = a.allocate(6000);  // 6144 does not fit beside the cached block: the cache goes first
  CHECK(big != nullptr);
  CHECK(a.stats().bytes_cached == 0);
  CHECK(a.stats().raw_releases == 1);
  // Nothing left to free: the error names the request, the device and what is in use.
  CHECK_THAT(error_of([&] { a.allocate(4096); }),
             ContainsAll({"device allocate", "out of memory", "fake:0", "4096 bytes", "6144 bytes in use"}));
  a.free(big);
}

TEST_CASE("device allocator: misuse", "[device-allocator][errors]") {
  int64_t live = 0;
  DeviceAllocator a(std::make_unique<FakeDeviceMemory>(1 << 20, &live));
  void* p = a.allocate(10);
  a.free(p);
  CHECK_THAT(error_of([&] { a.free(p); }), ContainsAll({"device free", "fake:0", "freed twice"}));
  int local = 0;
  CHECK_THAT(error_of([&] { a.free(&local); }), ContainsAll({"device free", "not allocated"}));
  CHECK_THAT(error_of([&] { a.allocate(-1); }), ContainsAll({"device allocate", "non-negative", "-1"}));
  CHECK_THAT(error_of([] { DeviceAllocator none(nullptr); }), ContainsAll({"DeviceAllocator", "raw device memory"}));
}

// The communication worker's rules (device_allocator.hpp): an instruction issued at generation g
// takes only blocks freed before g, and its own frees return once it ends.
TEST_CASE("device allocator: generations and deferred frees", "[device-allocator]") {
  int64_t live = 0;
  DeviceAllocator a(std::make_unique<FakeDeviceMemory>(int64_t{1} << 40, &live));
  void* before = a.allocate(1000);
  a.free(before);                          // freed in generation 0
  const int64_t g = a.begin_generation();  // an instruction is issued
  void* after = a.allocate(1000);
  CHECK(after == before);  // the rank's own thread may take any block
  a.free(after);           // freed in generation g: its readers may come after the issue
  {
    const DeviceAllocator::OnlyBlocksFreedBefore worker(g);
    void* fresh = a.allocate(1000);
    CHECK(fresh != before);  // not the block freed after the issue
    CHECK(a.stats().raw_allocations == 2);
    {
      const DeviceAllocator::DeferFrees held(a);
      a.free(fresh);
      CHECK(a.stats().bytes_in_use == 1024);  // held back while the instruction runs
    }
    CHECK(a.stats().bytes_in_use == 0);
    CHECK(a.stats().bytes_cached == 2048);
  }
  // A later instruction may take both blocks.
  const DeviceAllocator::OnlyBlocksFreedBefore next(a.begin_generation());
  void* x = a.allocate(1000);
  void* y = a.allocate(1000);
  CHECK(std::set<void*>{x, y}.size() == 2);
  CHECK(a.stats().raw_allocations == 2);
  a.free(x);
  a.free(y);
}

// What DeviceRuntime::capture_graph relies on: blocks freed while a graph captures, on any thread
// and through DeferFrees too, are held for the graph (still in use, never handed out again) and
// go back to the free lists only when the graph frees them.
TEST_CASE("device allocator: frees held for a CUDA graph", "[device-allocator]") {
  int64_t live = 0;
  DeviceAllocator a(std::make_unique<FakeDeviceMemory>(int64_t{1} << 40, &live));
  void* before = a.allocate(1000);
  std::vector<void*> held;
  a.hold_frees(&held);
  void* inside = a.allocate(1000);
  CHECK(inside != before);
  a.free(before);
  {
    DeviceAllocator::DeferFrees deferred(a);
    a.free(inside);
  }
  CHECK(held == std::vector<void*>{before, inside});
  CHECK(a.stats().bytes_in_use == 2 * 1024);
  void* after = a.allocate(1000);  // a new block: the held ones are the graph's
  CHECK(after != before);
  CHECK(after != inside);
  int local = 0;
  CHECK_THAT(error_of([&] { a.free(&local); }), ContainsAll({"device free", "not allocated"}));
  a.hold_frees(nullptr);
  for (void* p : held) a.free(p);
  a.free(after);
  CHECK(a.stats().bytes_in_use == 0);
  CHECK(a.allocate(1000) != nullptr);
  CHECK(a.stats().cache_hits == 1);
}
