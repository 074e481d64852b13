// Writing and reading the manifest (manifest.hpp; the format: docs/checkpoints.md).
#include "manifest.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace spsd::detail {

namespace fs = std::filesystem;

std::string box_line(const std::string& name, const StoredBox& b) {
  std::string s = concat("box ", name, " ", b.file, " ", b.offset, " ", b.bytes);
  for (int64_t i = 0; i < b.box.ndim(); ++i) s += concat(" ", b.box.begin[i], ":", b.box.end[i]);
  s += concat(" ", b.crcs.size());
  for (uint32_t c : b.crcs) s += " " + hex32(c);
  return s + "\n";
}

namespace {
DType parse_dtype(const std::string& s, bool& ok) {
  // Every DType: the enumerators are numbered from 0 without gaps (dtype.hpp).
  for (int i = 0; is_valid(static_cast<DType>(i)); ++i)
    if (to_string(static_cast<DType>(i)) == s) return static_cast<DType>(i);
  ok = false;
  return DType::kFloat32;
}
}  // namespace

Manifest read_manifest(std::string_view op, const std::string& dir) {
  SPSD_CHECK(fs::exists(dir), op, "checkpoint folder ", dir, " does not exist");
  SPSD_CHECK(fs::is_directory(dir), op, dir, " is not a folder");
  const std::string path = (fs::path(dir) / kManifest).string();
  SPSD_CHECK(fs::exists(path), op, dir, " holds no checkpoint: ", path,
             " does not exist (a save that did not finish leaves none)");
  std::ifstream in(path, std::ios::binary);
  SPSD_CHECK(in, op, "cannot open ", path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto corrupt = [&](auto&&... why) { throw_error(op, "manifest ", path, " is corrupt: ", why...); };

  // The last line, "end CRC", checks every byte before it: a truncated or edited manifest fails here.
  const size_t end = text.rfind("end ");
  if (end == std::string::npos || (end > 0 && text[end - 1] != '\n')) corrupt("no end line (truncated?)");
  const std::string stored_crc = text.substr(end + 4, text.find('\n', end) - end - 4);
  if (stored_crc != hex32(crc32(text.data(), static_cast<int64_t>(end))))
    corrupt("its checksum is ", hex32(crc32(text.data(), static_cast<int64_t>(end))), ", its end line says ",
            stored_crc);

  Manifest m;
  m.dir = dir;
  std::istringstream lines(text.substr(0, end));
  std::string line;
  int64_t number = 0;
  while (std::getline(lines, line)) {
    ++number;
    std::istringstream w(line);
    std::string kind;
    w >> kind;
    auto bad = [&](std::string_view what) { corrupt("line ", number, ": ", what, ": \"", line, "\""); };
    if (number == 1) {
      int64_t version = 0;
      if (kind != kMagic || !(w >> version)) bad("not a spsd checkpoint");
      if (version != kVersion) bad(concat("format version ", version, ", this build reads ", kVersion));
    } else if (kind == "chunk_bytes") {
      if (!(w >> m.chunk_bytes) || m.chunk_bytes <= 0) bad("bad chunk size");
    } else if (kind == "file") {
      std::string name;
      int64_t bytes = -1;
      if (!(w >> name >> bytes) || bytes < 0 || name.find('/') != std::string::npos) bad("bad file line");
      m.file_sizes[name] = bytes;
    } else if (kind == "tensor") {
      std::string name, dtype;
      int64_t ndim = -1;
      bool ok = true;
      if (!(w >> name >> dtype >> ndim) || ndim < 0) bad("bad tensor line");
      StoredTensor t{parse_dtype(dtype, ok), Shape{}, {}};
      if (!ok) bad("unknown dtype");
      std::vector<int64_t> dims(ndim);
      for (int64_t& d : dims)
        if (!(w >> d) || d < 0) bad("bad dimension");
      t.shape = Shape(dims);
      if (!m.tensors.emplace(name, std::move(t)).second) bad("tensor listed twice");
    } else if (kind == "box") {
      std::string name;
      StoredBox b;
      if (!(w >> name >> b.file >> b.offset >> b.bytes) || b.offset < 0 || b.bytes < 0) bad("bad box line");
      auto t = m.tensors.find(name);
      if (t == m.tensors.end()) bad("box of an unlisted tensor");
      if (!m.file_sizes.count(b.file)) bad("box in an unlisted file");
      const Shape& shape = t->second.shape;
      b.box = full_box(shape);
      for (int64_t i = 0; i < shape.ndim(); ++i) {
        char colon = 0;
        if (!(w >> b.box.begin[i] >> colon >> b.box.end[i]) || colon != ':' || b.box.begin[i] < 0 ||
            b.box.begin[i] >= b.box.end[i] || b.box.end[i] > shape[i])
          bad("bad box range");
      }
      if (b.bytes != b.box.numel() * size_of(t->second.dtype)) bad("byte count does not match the box");
      if (b.offset + b.bytes > m.file_sizes[b.file]) bad("box beyond the end of its file");
      size_t chunks = 0;
      if (!(w >> chunks) || chunks != static_cast<size_t>((b.bytes + m.chunk_bytes - 1) / m.chunk_bytes))
        bad("wrong number of checksums");
      b.crcs.resize(chunks);
      for (uint32_t& c : b.crcs) {
        std::string h;
        if (!(w >> h) || h.size() != 8 || h.find_first_not_of("0123456789abcdef") != std::string::npos) bad("bad checksum");
        c = static_cast<uint32_t>(std::stoul(h, nullptr, 16));
      }
      t->second.boxes.push_back(std::move(b));
    } else if (!kind.empty()) {
      bad("unknown line");
    }
  }
  if (number == 0) corrupt("empty");
  // The stored boxes of a tensor must tile it exactly: disjoint, and as many elements as it has.
  for (const auto& [name, t] : m.tensors) {
    int64_t covered = 0;
    for (size_t i = 0; i < t.boxes.size(); ++i) {
      covered += t.boxes[i].box.numel();
      for (size_t j = 0; j < i; ++j)
        if (overlap(t.boxes[i].box, t.boxes[j].box) > 0)
          corrupt("tensor \"", name, "\": boxes ", t.boxes[j].box, " and ", t.boxes[i].box, " overlap");
    }
    if (covered != t.shape.numel())
      corrupt("tensor \"", name, "\" of shape ", t.shape, ": its boxes hold ", covered, " elements");
  }
  return m;
}

}  // namespace spsd::detail
