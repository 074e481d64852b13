// HostBlockCache (runtime/host_block_cache.hpp): free lists by exact size under one mutex.
#include "spsd/runtime/host_block_cache.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "spsd/core/error.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define SPSD_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define SPSD_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define SPSD_POISON(p, n) ((void)(p), (void)(n))
#define SPSD_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace spsd::detail {

namespace {

constexpr size_t kAlignment = 64;

struct CacheState {
  std::mutex mutex;
  std::unordered_map<int64_t, std::vector<void*>> free;  // by bytes
  int64_t cached = 0;
  int64_t cap = 0;
  int perturb = 0;  // MALLOC_PERTURB_'s byte, 0: none
  CacheState() {
    cap = kDefaultCapMiB << 20;
    if (const char* p = std::getenv("MALLOC_PERTURB_")) perturb = std::atoi(p) & 0xff;
  }
  static constexpr int64_t kDefaultCapMiB = 256;
};

CacheState& state() {
  static CacheState* s = new CacheState;  // never destroyed: storages may go after static destructors ran
  return *s;
}

}  // namespace

void* HostBlockCache::take(int64_t bytes) {
  if (bytes >= kMinBytes) {
    CacheState& s = state();
    void* block = nullptr;
    {
      std::lock_guard lock(s.mutex);
      const auto it = s.free.find(bytes);
      if (it != s.free.end() && !it->second.empty()) {
        block = it->second.back();
        it->second.pop_back();
        s.cached -= bytes;
      }
    }
    if (block) {
      SPSD_UNPOISON(block, static_cast<size_t>(bytes));
      if (s.perturb) std::memset(block, s.perturb ^ 0xff, static_cast<size_t>(bytes));
      return block;
    }
  }
  return std::aligned_alloc(kAlignment, static_cast<size_t>(bytes));
}

void HostBlockCache::give(void* block, int64_t bytes) {
  if (!block) return;
  if (bytes >= kMinBytes) {
    CacheState& s = state();
    std::lock_guard lock(s.mutex);
    if (s.cached + bytes <= s.cap) {
      SPSD_POISON(block, static_cast<size_t>(bytes));
      s.free[bytes].push_back(block);
      s.cached += bytes;
      return;
    }
  }
  std::free(block);
}

int64_t HostBlockCache::cached_bytes() const {
  CacheState& s = state();
  std::lock_guard lock(s.mutex);
  return s.cached;
}

void HostBlockCache::release() {
  CacheState& s = state();
  std::lock_guard lock(s.mutex);
  for (auto& [bytes, blocks] : s.free)
    for (void* b : blocks) {
      SPSD_UNPOISON(b, static_cast<size_t>(bytes));
      std::free(b);
    }
  s.free.clear();
  s.cached = 0;
}

void HostBlockCache::set_cap(int64_t bytes) {
  CacheState& s = state();
  std::lock_guard lock(s.mutex);
  s.cap = bytes;
}

void configure_host_block_cache_from_env() {
  const char* v = std::getenv("SPSD_HOST_CACHE_MB");
  int64_t mib = CacheState::kDefaultCapMiB;
  if (v != nullptr && *v != '\0') {
    char* end = nullptr;
    const long long parsed = std::strtoll(v, &end, 10);
    SPSD_CHECK(end != v && *end == '\0' && parsed >= 0 && parsed < (int64_t{1} << 40), "SPSD_HOST_CACHE_MB",
               "must be a whole number of MiB >= 0, got \"", v, "\"");
    mib = parsed;
  }
  host_block_cache().set_cap(mib << 20);
}

HostBlockCache& host_block_cache() {
  static HostBlockCache cache;
  return cache;
}

}  // namespace spsd::detail
