// runtime/host_block_cache.hpp: host storage blocks of 64 KiB and more are reused by exact size,
// smaller ones and blocks past the cap go back to malloc, and Storage takes its host memory there.
#include <catch2/catch.hpp>
#include <spsd/runtime/host_block_cache.hpp>
#include <spsd/tensor/storage.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

using spsd::detail::HostBlockCache;
using spsd::detail::host_block_cache;

TEST_CASE("host block cache: a block given back is the next one of its size, aligned and writable", "[memory]") {
  HostBlockCache& cache = host_block_cache();
  cache.release();
  cache.set_cap(int64_t{256} << 20);
  const int64_t big = HostBlockCache::kMinBytes * 3;
  void* a = cache.take(big);
  REQUIRE(a != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(a) % 64 == 0);
  std::memset(a, 1, static_cast<size_t>(big));
  cache.give(a, big);
  CHECK(cache.cached_bytes() == big);
  void* other = cache.take(big + 64);  // another size: not that block
  CHECK(other != a);
  void* again = cache.take(big);
  CHECK(again == a);
  CHECK(cache.cached_bytes() == 0);
  std::memset(again, 2, static_cast<size_t>(big));
  cache.give(again, big);
  cache.give(other, big + 64);
  CHECK(cache.cached_bytes() == 2 * big + 64);
  cache.release();
  CHECK(cache.cached_bytes() == 0);
}

TEST_CASE("host block cache: small blocks are not kept, and the kept bytes stay under the cap", "[memory]") {
  HostBlockCache& cache = host_block_cache();
  cache.release();
  void* small = cache.take(4096);
  cache.give(small, 4096);
  CHECK(cache.cached_bytes() == 0);
  // 300 MiB given back: past a cap of 256 MiB (the default) the blocks are freed.
  const int64_t mib = int64_t{1} << 20;
  cache.set_cap(256 * mib);
  std::vector<void*> blocks;
  for (int i = 0; i < 300; ++i) blocks.push_back(cache.take(mib));
  for (void* b : blocks) cache.give(b, mib);
  CHECK(cache.cached_bytes() <= 256 * mib);
  CHECK(cache.cached_bytes() >= 200 * mib);
  cache.release();
  cache.set_cap(0);  // SPSD_HOST_CACHE_MB=0: nothing kept
  void* b = cache.take(mib);
  cache.give(b, mib);
  CHECK(cache.cached_bytes() == 0);
  cache.set_cap(256 * mib);
}

TEST_CASE("host block cache: a host Storage reuses the block of one that went, counted as before", "[memory]") {
  host_block_cache().release();
  host_block_cache().set_cap(int64_t{256} << 20);
  const int64_t bytes = 1 << 20;
  const spsd::MemoryStats before = spsd::detail::host_memory_counter()->stats();
  const void* first = nullptr;
  {
    auto s = spsd::Storage::allocate(bytes, spsd::DeviceType::kCPU);
    first = s->data();
    CHECK(spsd::detail::host_memory_counter()->stats().current_bytes == before.current_bytes + bytes);
  }
  CHECK(spsd::detail::host_memory_counter()->stats().current_bytes == before.current_bytes);
  CHECK(host_block_cache().cached_bytes() == bytes);
  auto s = spsd::Storage::allocate(bytes, spsd::DeviceType::kCPU);
  CHECK(s->data() == first);
  const auto* p = static_cast<const unsigned char*>(s->data());
  CHECK(p[0] == 0);  // allocate zero-fills a reused block too
  CHECK(p[bytes - 1] == 0);
  CHECK(host_block_cache().cached_bytes() == 0);
}
