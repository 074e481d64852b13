#pragma once
// The manifest: which tensors a checkpoint holds, and where each stored box lies in which
// file with which checksums.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "format.hpp"
#include "spsd/io/checkpoint.hpp"

namespace spsd::detail {

struct StoredBox {
  std::string file;
  int64_t offset = 0, bytes = 0;
  Box box;
  std::vector<uint32_t> crcs;  // one per kChunkBytes of the box's bytes
};

struct StoredTensor {
  DType dtype;
  Shape shape;
  std::vector<StoredBox> boxes;
};

struct Manifest {
  std::string dir;
  int64_t chunk_bytes = kChunkBytes;
  std::map<std::string, int64_t> file_sizes;
  std::map<std::string, StoredTensor> tensors;

  // Throws unless every name is a stored tensor.
  void check_holds(std::string_view op, const std::vector<std::string>& names) const {
    std::string missing, held;
    for (const std::string& n : names)
      if (!tensors.count(n)) missing += concat(missing.empty() ? "" : ", ", "\"", n, "\"");
    for (const auto& [n, t] : tensors) held += (held.empty() ? "" : ", ") + n;
    SPSD_CHECK(missing.empty(), op, "checkpoint ", dir, " holds no tensor ", missing, " (it holds: ", held, ")");
  }
};

// The manifest's line for one stored box of tensor name.
std::string box_line(const std::string& name, const StoredBox& b);
// Reads and checks the manifest; every mistake in it is "corrupt", naming the file and the line.
Manifest read_manifest(std::string_view op, const std::string& dir);

}  // namespace spsd::detail
