#pragma once
// The checkpoint format's constants and its checksum (the format: docs/checkpoints.md).
#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace spsd::detail {

constexpr std::string_view kMagic = "spsd-checkpoint";
constexpr int64_t kVersion = 1;
constexpr int64_t kChunkBytes = 64 * 1024;  // the unit of checksums, so a partial read can be verified
constexpr const char* kManifest = "manifest";

// CRC-32 (the zlib / IEEE 802.3 polynomial, reflected), so zlib's crc32 can check a file.
constexpr std::array<uint32_t, 256> crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[n] = c;
  }
  return t;
}
inline uint32_t crc32(const void* data, int64_t bytes) {
  static constexpr std::array<uint32_t, 256> table = crc_table();
  uint32_t c = 0xFFFFFFFFu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (int64_t i = 0; i < bytes; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}
inline std::string hex32(uint32_t v) {
  char s[9];
  std::snprintf(s, sizeof s, "%08x", v);
  return s;
}

}  // namespace spsd::detail
