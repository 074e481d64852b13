// Distributed checkpoints: the format is specified in docs/checkpoints.md. Every step that can
// fail on one rank only (file I/O, a corrupt file) runs inside agreed(), so every rank leaves
// save/load together, with the same spsd::Error.
#include "spsd/io/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <utility>

#include "spsd/boxing/to_layout.hpp"
#include "spsd/runtime/consistency.hpp"

namespace spsd {

namespace fs = std::filesystem;
using detail::concat;
using detail::GlobalData;

static_assert(std::endian::native == std::endian::little, "checkpoint data files are little-endian");

namespace {

constexpr std::string_view kMagic = "spsd-checkpoint";
constexpr int64_t kVersion = 1;
constexpr int64_t kChunkBytes = 64 * 1024;  // the unit of checksums, so a partial read can be verified
constexpr const char* kManifest = "manifest";

thread_local CheckpointIoStats io_stats;  // a simulated rank is a thread

// ---- CRC-32 (the zlib / IEEE 802.3 polynomial, reflected), so zlib's crc32 can check a file.
constexpr std::array<uint32_t, 256> crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[n] = c;
  }
  return t;
}
uint32_t crc32(const void* data, int64_t bytes) {
  static constexpr std::array<uint32_t, 256> table = crc_table();
  uint32_t c = 0xFFFFFFFFu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (int64_t i = 0; i < bytes; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}
std::string hex32(uint32_t v) {
  char s[9];
  std::snprintf(s, sizeof s, "%08x", v);
  return s;
}

// ---- agreeing on failure ------------------------------------------------------------------

std::vector<int64_t> world_ranks() {
  std::vector<int64_t> r(world_size());
  for (int64_t i = 0; i < world_size(); ++i) r[i] = i;
  return r;
}

// Runs step on this rank; if it failed on any rank, throws on every rank: its own error where
// it failed, else the first failing rank's (a rank that did nothing wrong still learns why).
template <class F>
void agreed(std::string_view op, F&& step) {
  std::string error;
  try {
    step();
  } catch (const Error& e) {
    error = e.what();
    if (error.empty()) error = concat(op, ": failed");
  } catch (const std::exception& e) {
    error = concat(op, ": ", e.what());
  }
  if (world_size() == 1) {
    if (!error.empty()) throw Error(error);
    return;
  }
  const std::vector<std::string> all = detail::all_gather_text(world_communicator(), error);
  if (!error.empty()) throw Error(error);
  for (size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty()) throw Error(concat(all[r], " (raised on rank ", r, ")"));
}

// Compares the call across ranks (docs/communicators.md): ranks passing different arguments get
// an error naming the call instead of mismatched file writes.
void check_same_call(const std::string& description) {
  const std::vector<int64_t> ranks = world_ranks();
  detail::note_op(ranks, std::make_shared<const detail::OpIdentity>(description));
  detail::check_ops(ranks);
  synchronize();  // the check may have been queued: surface its error here
}

// ---- files --------------------------------------------------------------------------------

std::string errno_text() { return std::strerror(errno); }

class File {
 public:
  File(std::string_view op, const std::string& path, int flags) : path_(path) {
    fd_ = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    SPSD_CHECK(fd_ >= 0, op, "cannot open ", path, ": ", errno_text());
  }
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  int64_t size(std::string_view op) const {
    struct stat st {};
    SPSD_CHECK(::fstat(fd_, &st) == 0, op, "cannot stat ", path_, ": ", errno_text());
    return st.st_size;
  }
  void write(std::string_view op, const void* data, int64_t bytes) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::write(fd_, p, static_cast<size_t>(bytes));
      if (n < 0 && errno == EINTR) continue;
      SPSD_CHECK(n > 0, op, "cannot write ", path_, ": ", errno_text());
      p += n, bytes -= n;
      io_stats.bytes_written += n;
    }
  }
  void read_at(std::string_view op, void* data, int64_t bytes, int64_t offset) const {
    char* p = static_cast<char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::pread(fd_, p, static_cast<size_t>(bytes), offset);
      if (n < 0 && errno == EINTR) continue;
      SPSD_CHECK(n >= 0, op, "cannot read ", path_, ": ", errno_text());
      SPSD_CHECK(n > 0, op, "file ", path_, " is truncated: it ends before byte ", offset + bytes);
      p += n, bytes -= n, offset += n;
      io_stats.bytes_read += n;
    }
  }
  void sync(std::string_view op) { SPSD_CHECK(::fsync(fd_) == 0, op, "cannot fsync ", path_, ": ", errno_text()); }

 private:
  std::string path_;
  int fd_ = -1;
};

// A rename is durable only once the folder holding it is synced.
void sync_dir(std::string_view op, const std::string& dir) { File(op, dir, O_RDONLY | O_DIRECTORY).sync(op); }

// ---- the manifest -------------------------------------------------------------------------

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

std::string box_line(const std::string& name, const StoredBox& b) {
  std::string s = concat("box ", name, " ", b.file, " ", b.offset, " ", b.bytes);
  for (int64_t i = 0; i < b.box.ndim(); ++i) s += concat(" ", b.box.begin[i], ":", b.box.end[i]);
  s += concat(" ", b.crcs.size());
  for (uint32_t c : b.crcs) s += " " + hex32(c);
  return s + "\n";
}

DType parse_dtype(const std::string& s, bool& ok) {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64})
    if (to_string(t) == s) return t;
  ok = false;
  return DType::kFloat32;
}

// Reads and checks the manifest; every mistake in it is "corrupt", naming the file and the line.
Manifest read_manifest(std::string_view op, const std::string& dir) {
  SPSD_CHECK(fs::exists(dir), op, "checkpoint folder ", dir, " does not exist");
  SPSD_CHECK(fs::is_directory(dir), op, dir, " is not a folder");
  const std::string path = (fs::path(dir) / kManifest).string();
  SPSD_CHECK(fs::exists(path), op, dir, " holds no checkpoint: ", path,
             " does not exist (a save that did not finish leaves none)");
  std::ifstream in(path, std::ios::binary);
  SPSD_CHECK(in, op, "cannot open ", path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto corrupt = [&](auto&&... why) { detail::throw_error(op, "manifest ", path, " is corrupt: ", why...); };

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

// ---- reading ------------------------------------------------------------------------------

// The data files one load opens, each once, its size checked against the manifest first.
class Readers {
 public:
  Readers(std::string_view op, const Manifest& m) : op_(op), m_(m) {}
  const File& get(const std::string& name) {
    auto it = files_.find(name);
    if (it != files_.end()) return *it->second;
    const std::string path = (fs::path(m_.dir) / name).string();
    auto f = std::make_unique<File>(op_, path, O_RDONLY);
    const int64_t size = f->size(op_), expected = m_.file_sizes.at(name);
    SPSD_CHECK(size >= expected, op_, "file ", path, " is truncated: ", size, " bytes, the manifest says ", expected);
    SPSD_CHECK(size == expected, op_, "file ", path, " is corrupt: ", size, " bytes, the manifest says ", expected);
    ++io_stats.files_read;
    return *files_.emplace(name, std::move(f)).first->second;
  }

 private:
  std::string_view op_;
  const Manifest& m_;
  std::map<std::string, std::unique_ptr<File>> files_;
};

std::vector<int64_t> strides_of(const Box& b) {
  std::vector<int64_t> s(b.ndim(), 1);
  for (int64_t i = b.ndim() - 2; i >= 0; --i) s[i] = s[i + 1] * (b.end[i + 1] - b.begin[i + 1]);
  return s;
}

// Calls run(source element offset in from, destination element offset in to, elements) for each
// innermost-axis run of the common part of the boxes, in increasing source offset.
template <class F>
void for_each_run(const Box& part, const Box& from, const Box& to, F run) {
  const int64_t d = part.ndim();
  if (d == 0) return run(0, 0, 1);
  const std::vector<int64_t> fs_ = strides_of(from), ts = strides_of(to);
  const int64_t length = part.end[d - 1] - part.begin[d - 1];
  std::vector<int64_t> idx(part.begin);
  for (int64_t done = 0; done < part.numel(); done += length) {
    int64_t src = 0, dst = 0;
    for (int64_t k = 0; k < d; ++k) src += (idx[k] - from.begin[k]) * fs_[k], dst += (idx[k] - to.begin[k]) * ts[k];
    run(src, dst, length);
    for (int64_t k = d - 2; k >= 0 && ++idx[k] == part.end[k]; --k) idx[k] = part.begin[k];
  }
}

// Fills the target box (row-major at out) from the stored boxes it meets, reading only the
// checksummed chunks that hold those bytes, and verifying each chunk read.
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

// This rank's box of `stored` in (placement, nd_sbp) read from the files, as a tensor in that
// layout, partial axes included; nothing is read on ranks outside the placement.
struct LoadedBox {
  std::shared_ptr<Storage> host;  // null outside the placement
};

LoadedBox read_local(std::string_view op, const std::string& name, const StoredTensor& stored, const Manifest& m,
                     Readers& files, const Placement& placement, const NdSbp& nd_sbp) {
  if (!placement.contains(rank())) return {};
  const Box target = box_of(stored.shape, placement, without_partial(nd_sbp), rank());
  auto host = Storage::allocate_uninitialized(target.numel() * size_of(stored.dtype), DeviceType::kCPU);
  read_box(op, name, stored, m, files, target, static_cast<char*>(host->data()));
  return {std::move(host)};
}

// The loaded boxes as a global tensor in (placement, nd_sbp): on the placement's device, and
// boxed from B to the partial axes (a local step) where nd_sbp has any. Collective.
GlobalData to_target(const StoredTensor& stored, const LoadedBox& loaded, const Placement& placement,
                     const NdSbp& nd_sbp) {
  const NdSbp plain = without_partial(nd_sbp);
  std::shared_ptr<Storage> local = loaded.host;
  if (local && placement.device_type() != DeviceType::kCPU) {
    local = Storage::allocate_uninitialized(loaded.host->bytes(), placement.device_type());
    detail::copy_bytes(local->data(), placement.device_type(), std::as_const(*loaded.host).data(), DeviceType::kCPU,
                       loaded.host->bytes());
  }
  GlobalData data{stored.shape, stored.dtype, placement, plain, std::move(local)};
  return plain == nd_sbp ? data : detail::to_layout(data, placement, nd_sbp);
}

std::string describe_layout(const Shape& shape, DType dtype, const Placement& placement, const NdSbp& nd_sbp) {
  return concat(shape, " ", to_string(dtype), " ", nd_sbp, " on ", placement);
}

}  // namespace

// ---- StateDict ----------------------------------------------------------------------------

void StateDict::check_name(const std::string& name) {
  SPSD_CHECK(!name.empty(), "StateDict::insert", "a name must not be empty");
  for (char c : name)
    SPSD_CHECK(c > ' ' && c < 127, "StateDict::insert", "name \"", name,
               "\" must be printable ASCII without spaces (it is a word of the checkpoint manifest)");
}

std::vector<std::string> StateDict::names() const {
  std::vector<std::string> n;
  for (const auto& [name, d] : entries_) n.push_back(name);
  return n;
}

const detail::GlobalData& StateDict::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it != entries_.end()) return it->second;
  std::string all;
  for (const auto& [n, d] : entries_) all += (all.empty() ? "" : ", ") + n;
  detail::throw_error("StateDict::at", "no tensor named \"", name, "\" (it holds: ", all, ")");
}

// ---- saving -------------------------------------------------------------------------------

void save_checkpoint(const StateDict& state, const std::string& dir) {
  constexpr std::string_view op = "save_checkpoint";
  std::string call = concat(op, "(", dir);
  for (const auto& [name, d] : state.entries()) call += concat(", ", name, " ", detail::describe(d));
  check_same_call(call + ")");
  SPSD_CHECK(!dir.empty(), op, "dir must not be empty");
  SPSD_CHECK(state.size() > 0, op, "the state to save into ", dir, " holds no tensors");

  // Stored boxes are never partial: a P axis is reduced to B first (collective, in name order).
  std::vector<std::pair<std::string, GlobalData>> plain;
  for (const auto& [name, d] : state.entries())
    plain.emplace_back(name, d.nd_sbp.has_partial() ? detail::to_layout(d, d.placement, without_partial(d.nd_sbp)) : d);

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
        detail::copy_bytes(staged.data(), DeviceType::kCPU, std::as_const(*d.local).data(), d.placement.device_type(), bytes);
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
    if (detail::checkpoint_fault_hook) detail::checkpoint_fault_hook("data written");
  });

  // Rank 0 writes the manifest last: the checkpoint exists once its rename is done.
  const std::vector<std::string> all = detail::all_gather_text(world_communicator(), records);
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
    if (detail::checkpoint_fault_hook) detail::checkpoint_fault_hook("manifest written");
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

// ---- loading ------------------------------------------------------------------------------

namespace detail {

GlobalData load_tensor(const std::string& dir, const std::string& name, DType dtype, const Placement& placement,
                       const NdSbp& nd_sbp) {
  constexpr std::string_view op = "load_checkpoint";
  check_same_call(concat(op, "(", dir, ", ", name, ", ", to_string(dtype), " ", nd_sbp, " on ", placement, ")"));
  Manifest m;
  const StoredTensor* stored = nullptr;
  LoadedBox loaded;
  agreed(op, [&] {
    m = read_manifest(op, dir);
    m.check_holds(op, {name});
    stored = &m.tensors.at(name);
    SPSD_CHECK(stored->dtype == dtype, op, "tensor \"", name, "\" in ", dir, " is ", to_string(stored->dtype),
               ", asked for ", to_string(dtype));
    check_global_layout(op, stored->shape, placement, nd_sbp);
    Readers files(op, m);
    loaded = read_local(op, name, *stored, m, files, placement, nd_sbp);
  });
  return to_target(*stored, loaded, placement, nd_sbp);
}

}  // namespace detail

void load_checkpoint(const std::string& dir, StateDict& into) {
  constexpr std::string_view op = "load_checkpoint";
  std::string call = concat(op, "(", dir);
  for (const auto& [name, d] : into.entries()) call += concat(", ", name, " ", detail::describe(d));
  check_same_call(call + ")");
  Manifest m;
  std::vector<LoadedBox> loaded;
  agreed(op, [&] {
    m = read_manifest(op, dir);
    m.check_holds(op, into.names());
    for (const auto& [name, d] : into.entries()) {
      const StoredTensor& s = m.tensors.at(name);
      SPSD_CHECK(s.dtype == d.dtype && s.shape == d.shape, op, "tensor \"", name, "\" in ", dir, " is ", s.shape, " ",
                 to_string(s.dtype), ", the target is ", describe_layout(d.shape, d.dtype, d.placement, d.nd_sbp));
    }
    Readers files(op, m);
    for (const auto& [name, d] : into.entries())
      loaded.push_back(read_local(op, name, m.tensors.at(name), m, files, d.placement, d.nd_sbp));
  });
  // Every read succeeded on every rank: only now are the targets written.
  size_t i = 0;
  for (const auto& [name, d] : into.entries()) {
    const GlobalData value = to_target(m.tensors.at(name), loaded[i++], d.placement, d.nd_sbp);
    if (!d.local || !value.local) continue;  // a rank outside the placement
    const int64_t bytes = box_of(d.shape, d.placement, d.nd_sbp, rank()).numel() * size_of(d.dtype);
    detail::copy_bytes(d.local->data(), d.placement.device_type(), std::as_const(*value.local).data(),
                       d.placement.device_type(), bytes);
  }
}

std::vector<CheckpointEntry> checkpoint_contents(const std::string& dir) {
  constexpr std::string_view op = "checkpoint_contents";
  check_same_call(concat(op, "(", dir, ")"));
  std::vector<CheckpointEntry> entries;
  agreed(op, [&] {
    for (const auto& [name, t] : read_manifest(op, dir).tensors)
      entries.push_back({name, t.shape, t.dtype, static_cast<int64_t>(t.boxes.size())});
  });
  return entries;
}

CheckpointIoStats checkpoint_io_stats() { return io_stats; }
void reset_checkpoint_io_stats() { io_stats = {}; }

}  // namespace spsd
