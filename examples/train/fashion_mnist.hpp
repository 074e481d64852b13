#pragma once
// Fashion-MNIST for the training example, its tests and its benchmark: the IDX files of Debian's
// `dataset-fashion-mnist` (/usr/share/datasets/fashion-mnist/*.gz, read with zlib), or a small
// generated stand-in with the same shapes where the package is absent; and batches as global
// tensors in any layout, each rank filling only its own box (no communication).
//
// Kept out of the library: a data format and a zlib dependency are an application's business.
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <spsd/spsd.hpp>
#include <string>
#include <vector>

namespace examples {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr int64_t kPixels = 28 * 28, kClasses = 10;

struct Dataset {
  std::vector<uint8_t> images;  // (n, 784) row-major, 0..255
  std::vector<int64_t> labels;  // (n)
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

// The whole decompressed file; throws spsd::Error naming it when it cannot be read.
inline std::vector<uint8_t> read_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  SPSD_CHECK(f != nullptr, "read_gzip", "cannot open ", path);
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) out.insert(out.end(), buf, buf + n);
  gzclose(f);
  return out;
}

inline int64_t big_endian_u32(const std::vector<uint8_t>& b, size_t at) {
  return int64_t{b[at]} << 24 | int64_t{b[at + 1]} << 16 | int64_t{b[at + 2]} << 8 | int64_t{b[at + 3]};
}

// One split ("train" or "t10k") from IDX files: images magic 2051 (n, 28, 28), labels magic 2049.
inline Dataset read_idx(const std::string& dir, const std::string& split, int64_t limit = -1) {
  const std::string ip = dir + "/" + split + "-images-idx3-ubyte.gz", lp = dir + "/" + split + "-labels-idx1-ubyte.gz";
  const std::vector<uint8_t> im = read_gzip(ip), lb = read_gzip(lp);
  SPSD_CHECK(im.size() >= 16 && big_endian_u32(im, 0) == 2051, "read_idx", ip, " is not an IDX image file");
  SPSD_CHECK(lb.size() >= 8 && big_endian_u32(lb, 0) == 2049, "read_idx", lp, " is not an IDX label file");
  int64_t n = big_endian_u32(im, 4);
  SPSD_CHECK(n == big_endian_u32(lb, 4) && big_endian_u32(im, 8) * big_endian_u32(im, 12) == kPixels &&
                 im.size() == static_cast<size_t>(16 + n * kPixels) && lb.size() == static_cast<size_t>(8 + n),
             "read_idx", ip, " and ", lp, " disagree on their sizes");
  if (limit >= 0 && limit < n) n = limit;
  Dataset d;
  d.images.assign(im.begin() + 16, im.begin() + 16 + n * kPixels);
  for (int64_t i = 0; i < n; ++i) d.labels.push_back(lb[8 + i]);
  return d;
}

// A learnable stand-in: class c lights up its own band of rows, plus deterministic noise.
inline Dataset generated_dataset(int64_t n, uint64_t seed) {
  Dataset d;
  d.images.resize(n * kPixels);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = static_cast<int64_t>(spsd::philox::uniform<double>(seed, i) * kClasses) % kClasses;
    d.labels.push_back(c);
    for (int64_t p = 0; p < kPixels; ++p) {
      const double noise = spsd::philox::uniform<double>(seed + 1, static_cast<uint64_t>(i * kPixels + p));
      const bool band = (p / 28) / 3 == c;
      d.images[i * kPixels + p] = static_cast<uint8_t>(band ? 150 + 100 * noise : 90 * noise);
    }
  }
  return d;
}

inline bool have_fashion_mnist(const std::string& dir = kFashionMnistDir) {
  return std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz");
}

// rows: the samples of the batch, in order (the same list on every rank). Returns the
// (rows, 784) images, normalized with Fashion-MNIST's mean and deviation, in layout (placement,
// nd_sbp), each rank filling its own box.
template <spsd::FloatingElement T>
spsd::GlobalTensor<T> image_batch(const Dataset& d, const std::vector<int64_t>& rows, const spsd::Placement& p,
                                  const spsd::NdSbp& nd_sbp) {
  const spsd::Shape shape{static_cast<int64_t>(rows.size()), kPixels};
  if (!p.contains(spsd::rank())) return spsd::GlobalTensor<T>(shape, p, nd_sbp, spsd::Tensor<T>());
  const spsd::Box box = spsd::box_of(shape, p, nd_sbp, spsd::rank());
  spsd::Tensor<T> local(box.shape());
  T* out = local.data();
  for (int64_t i = box.begin[0]; i < box.end[0]; ++i)
    for (int64_t j = box.begin[1]; j < box.end[1]; ++j)
      *out++ = static_cast<T>((static_cast<float>(d.images[rows[i] * kPixels + j]) / 255.0f - 0.2860f) / 0.3530f);
  return spsd::GlobalTensor<T>(shape, p, nd_sbp, local.to(p.device_type()));
}

inline spsd::GlobalTensor<int64_t> label_batch(const Dataset& d, const std::vector<int64_t>& rows,
                                               const spsd::Placement& p, const spsd::NdSbp& nd_sbp) {
  const spsd::Shape shape{static_cast<int64_t>(rows.size())};
  if (!p.contains(spsd::rank())) return spsd::GlobalTensor<int64_t>(shape, p, nd_sbp, spsd::Tensor<int64_t>());
  const spsd::Box box = spsd::box_of(shape, p, nd_sbp, spsd::rank());
  spsd::Tensor<int64_t> local(box.shape());
  for (int64_t i = box.begin[0]; i < box.end[0]; ++i) local.data()[i - box.begin[0]] = d.labels[rows[i]];
  return spsd::GlobalTensor<int64_t>(shape, p, nd_sbp, local.to(p.device_type()));
}

}  // namespace examples
