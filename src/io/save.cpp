// save_checkpoint: every rank writes the boxes it is the first holder of, rank 0 the manifest
// last (the format: docs/checkpoints.md).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <random>

#include "agreed.hpp"
#include "file.hpp"
#include "manifest.hpp"
#include "spsd/boxing/to_layout.hpp"

namespace spsd {

namespace fs = std::filesystem;
using namespace detail;  // the format, files, manifest and failing together: src/io/*.hpp

static_assert(std::endian::native == std::endian::little, "checkpoint data files are little-endian");

void save_checkpoint(const StateDict& state, const std::string& dir) {
  check_not_capturing("save_checkpoint", "files written or read there would not be again on a replay; save and load between calls");
  constexpr std::string_view op = "save_checkpoint";
  std::vector<std::string> entries;
  for (const auto& [name, d] : state.entries()) entries.push_back(concat(name, " ", describe(d)));
  check_same_call(concat(op, "(", dir, ")"), std::move(entries));
  SPSD_CHECK(!dir.empty(), op, "dir must not be empty");
  SPSD_CHECK(state.size() > 0, op, "the state to save into ", dir, " holds no tensors");

  // Stored boxes are never partial: a P axis is reduced to B first (collective, in name order).
  std::vector<std::pair<std::string, GlobalData>> plain;
  for (const auto& [name, d] : state.entries())
    plain.emplace_back(name, d.nd_sbp.has_partial() ? to_layout(d, d.placement, without_partial(d.nd_sbp)) : d);

  // A fresh name for this save's data files, so an older checkpoint's stay until the new
  // manifest replaces the old one.
  int64_t id = 0;
  if (rank() == 0) id = static_cast<int64_t>(std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32) ^
                                             static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  world_communicator().broadcast(&id, 1, DType::kInt64, 0);
  char id_hex[17];
  std::snprintf(id_hex, sizeof id_hex, "%016llx", static_cast<unsigned long long>(id));
  const std::string file = concat("data-", id_hex, "-r", rank(), ".bin");

  agreed(op, [&] {
    if (rank() == 0) fs::create_directories(dir);
    SPSD_CHECK(rank() != 0 || fs::is_directory(dir), op, dir, " is not a folder");
  });

  // Each rank writes the distinct non-empty boxes it is the first holder of, into one file.
  std::string records;
  agreed(op, [&] {
    std::vector<std::pair<std::string, StoredBox>> mine;
    std::optional<File> out;
    int64_t offset = 0;
    const std::string path = (fs::path(dir) / file).string(), tmp = path + ".tmp";
    for (const auto& [name, d] : plain) {
      if (!d.placement.contains(rank())) continue;
      const std::vector<Box> boxes = boxes_of(d.shape, d.placement, d.nd_sbp);
      const std::vector<int64_t>& ranks = d.placement.ranks();
      const size_t k = static_cast<size_t>(std::find(ranks.begin(), ranks.end(), rank()) - ranks.begin());
      if (boxes[k].empty() || std::find(boxes.begin(), boxes.begin() + k, boxes[k]) != boxes.begin() + k) continue;
      const int64_t bytes = boxes[k].numel() * size_of(d.dtype);
      std::vector<char> staged;
      const char* data;
      if (d.placement.device_type() == DeviceType::kCPU) {
        data = static_cast<const char*>(std::as_const(*d.local).data());
      } else {
        staged.resize(static_cast<size_t>(bytes));
        copy_bytes(staged.data(), DeviceType::kCPU, std::as_const(*d.local).data(), d.placement.device_type(), bytes);
        data = staged.data();
      }
      if (!out) out.emplace(op, tmp, O_WRONLY | O_CREAT | O_TRUNC);
      out->write(op, data, bytes);
      StoredBox s{file, offset, bytes, boxes[k], {}};
      for (int64_t at = 0; at < bytes; at += kChunkBytes) s.crcs.push_back(crc32(data + at, std::min(kChunkBytes, bytes - at)));
      mine.emplace_back(name, std::move(s));
      offset += bytes;
    }
    if (!out) return;
    out->sync(op);
    out.reset();
    SPSD_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, op, "cannot rename ", tmp, " to ", path, ": ", errno_text());
    records = concat("file ", file, " ", offset, "\n");
    for (const auto& [name, s] : mine) records += box_line(name, s);
  });
  agreed(op, [&] {
    if (checkpoint_fault_hook) checkpoint_fault_hook("data written");
  });

  // Rank 0 writes the manifest last: the checkpoint exists once its rename is done.
  const std::vector<std::string> all = all_gather_text(world_communicator(), records);
  agreed(op, [&] {
    if (rank() != 0) return;
    sync_dir(op, dir);  // the data files' renames first
    std::string text = concat(kMagic, " ", kVersion, "\nchunk_bytes ", kChunkBytes, "\n");
    for (const std::string& r : all)
      if (!r.empty()) text += r.substr(0, r.find('\n') + 1);  // the file lines
    for (const auto& [name, d] : plain) {
      text += concat("tensor ", name, " ", to_string(d.dtype), " ", d.shape.ndim());
      for (int64_t x : d.shape) text += concat(" ", x);
      text += "\n";
    }
    for (const std::string& r : all)
      if (!r.empty()) text += r.substr(r.find('\n') + 1);  // the box lines
    text += "end " + hex32(crc32(text.data(), static_cast<int64_t>(text.size()))) + "\n";
    const std::string path = (fs::path(dir) / kManifest).string(), tmp = concat(path, "-", id_hex, ".tmp");
    {
      File f(op, tmp, O_WRONLY | O_CREAT | O_TRUNC);
      f.write(op, text.data(), static_cast<int64_t>(text.size()));
      f.sync(op);
    }
    if (checkpoint_fault_hook) checkpoint_fault_hook("manifest written");
    SPSD_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, op, "cannot rename ", tmp, " to ", path, ": ", errno_text());
    sync_dir(op, dir);
    // What older or interrupted saves left: data files the new manifest does not name, temporaries.
    for (const fs::directory_entry& f : fs::directory_iterator(dir)) {
      const std::string n = f.path().filename().string();
      const bool ours = n.starts_with("data-") || n.starts_with("manifest-");
      const bool current = n.ends_with(".bin") && text.find("file " + n + " ") != std::string::npos;
      if (ours && (n.ends_with(".tmp") || n.ends_with(".bin")) && !current) fs::remove(f.path());
    }
  });
}

}  // namespace spsd
