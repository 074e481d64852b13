// Reading boxes of stored tensors (read_box.hpp).
#include "read_box.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

namespace spsd::detail {

namespace fs = std::filesystem;

const File& Readers::get(const std::string& name) {
  auto it = files_.find(name);
  if (it != files_.end()) return *it->second;
  const std::string path = (fs::path(m_.dir) / name).string();
  auto f = std::make_unique<File>(op_, path, O_RDONLY);
  const int64_t size = f->size(op_), expected = m_.file_sizes.at(name);
  SPSD_CHECK(size >= expected, op_, "file ", path, " is truncated: ", size, " bytes, the manifest says ", expected);
  SPSD_CHECK(size == expected, op_, "file ", path, " is corrupt: ", size, " bytes, the manifest says ", expected);
  ++checkpoint_stats().files_read;
  return *files_.emplace(name, std::move(f)).first->second;
}

namespace {

// Calls run(source element offset in from, destination element offset in to, elements) for each
// innermost-axis run of the common part of the boxes, in increasing source offset.
template <class F>
void for_each_run(const Box& part, const Box& from, const Box& to, F run) {
  const int64_t d = part.ndim();
  if (d == 0) return run(0, 0, 1);
  const std::vector<int64_t> fs_ = contiguous_strides(from.shape()), ts = contiguous_strides(to.shape());
  const int64_t length = part.end[d - 1] - part.begin[d - 1];
  std::vector<int64_t> idx(part.begin);
  for (int64_t done = 0; done < part.numel(); done += length) {
    int64_t src = 0, dst = 0;
    for (int64_t k = 0; k < d; ++k) src += (idx[k] - from.begin[k]) * fs_[k], dst += (idx[k] - to.begin[k]) * ts[k];
    run(src, dst, length);
    for (int64_t k = d - 2; k >= 0 && ++idx[k] == part.end[k]; --k) idx[k] = part.begin[k];
  }
}

}  // namespace

void read_box(std::string_view op, const std::string& name, const StoredTensor& t, const Manifest& m, Readers& files,
              const Box& target, char* out) {
  const int64_t e = size_of(t.dtype), chunk = m.chunk_bytes;
  for (const StoredBox& s : t.boxes) {
    const Box part = intersect(target, s.box);
    if (part.empty()) continue;
    // The chunks holding the part, as runs of consecutive chunks (one pread each).
    std::vector<char> needed(s.crcs.size(), 0);
    for_each_run(part, s.box, target, [&](int64_t src, int64_t, int64_t n) {
      for (int64_t c = src * e / chunk; c <= ((src + n) * e - 1) / chunk; ++c) needed[c] = 1;
    });
    struct Segment {
      int64_t begin, end;  // byte range within the stored box
      std::vector<char> bytes;
    };
    std::vector<Segment> segments;
    for (int64_t c = 0; c < static_cast<int64_t>(needed.size()); ++c) {
      if (!needed[c]) continue;
      if (!segments.empty() && segments.back().end == c * chunk) segments.back().end = std::min((c + 1) * chunk, s.bytes);
      else segments.push_back({c * chunk, std::min((c + 1) * chunk, s.bytes), {}});
    }
    const File& file = files.get(s.file);
    const std::string path = (fs::path(m.dir) / s.file).string();
    for (Segment& g : segments) {
      g.bytes.resize(static_cast<size_t>(g.end - g.begin));
      file.read_at(op, g.bytes.data(), g.end - g.begin, s.offset + g.begin);
      for (int64_t at = g.begin; at < g.end; at += chunk) {
        const int64_t n = std::min(chunk, g.end - at);
        const uint32_t got = crc32(g.bytes.data() + (at - g.begin), n), want = s.crcs[at / chunk];
        SPSD_CHECK(got == want, op, "file ", path, " is corrupt: bytes ", s.offset + at, "..", s.offset + at + n,
                   " (tensor \"", name, "\", box ", s.box, ") have CRC32 ", hex32(got), ", the manifest says ",
                   hex32(want));
      }
    }
    size_t g = 0;  // runs come in increasing source offset, and each lies within one segment
    for_each_run(part, s.box, target, [&](int64_t src, int64_t dst, int64_t n) {
      while (segments[g].end < (src + n) * e) ++g;
      std::memcpy(out + dst * e, segments[g].bytes.data() + (src * e - segments[g].begin), static_cast<size_t>(n * e));
    });
  }
}

}  // namespace spsd::detail
