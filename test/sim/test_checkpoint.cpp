// Checkpoints under simulated ranks (docs/checkpoints.md): the shared resharding and corruption
// suites on 1 to 6 ranks, and what needs one process: the files themselves (format, checksums
// against zlib, who writes what), crash safety, argument errors on every rank, and resuming
// training bit for bit.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "checkpoint_suite.hpp"
#include "error_matchers.hpp"
#include "sim_helpers.hpp"
#include "temp_dir.hpp"
#include "train/checkpoint.hpp"
#include "train/fashion_mnist.hpp"
#include "train/mlp.hpp"

using namespace spsd;
using spsd_test::Failures;
namespace fs = std::filesystem;

namespace {

using spsd_test::TempDir;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void expect_no_failures(const Failures& f) {
  INFO(f.report());
  CHECK(f.empty());
}

// Every rank threw, and every message holds the fragments.
void expect_error_everywhere(const std::vector<std::string>& errors, std::initializer_list<std::string> fragments) {
  for (size_t r = 0; r < errors.size(); ++r) {
    INFO("rank " << r);
    CHECK_THAT(errors[r], ContainsAll(fragments));
  }
}

const Placement kGrid("cpu", {{0, 1}, {2, 3}});

}  // namespace

TEST_CASE("checkpoint: saved as (S(0), S(1)) on 2x2, loaded bit-equal in every layout on 1 to 6 ranks", "[checkpoint]") {
  TempDir tmp;
  spsd::simulate(4, [&] { spsd_test::save_reference_checkpoint(tmp.path); });
  for (int n : {1, 2, 3, 4, 6}) {
    INFO("loading on " << n << " ranks");
    std::vector<int> loads(n);
    expect_no_failures(spsd_test::on_simulated_ranks(n, [&](Failures& f) {
      loads[rank()] = spsd_test::check_reference_loads(f, tmp.path);
    }));
    CHECK(loads[0] > 50);
  }
}

TEST_CASE("checkpoint: a truncated, flipped or missing file fails on every rank, naming it", "[checkpoint]") {
  TempDir tmp, scratch;
  spsd::simulate(4, [&] { spsd_test::save_reference_checkpoint(tmp.path); });
  for (int n : {1, 3, 4})
    expect_no_failures(spsd_test::on_simulated_ranks(n, [&](Failures& f) {
      spsd_test::check_corruption_detected(f, tmp.path, scratch.path);
    }));
}

TEST_CASE("checkpoint: the files: one writer per distinct box, zlib's CRC-32 per chunk, the manifest last", "[checkpoint]") {
  TempDir tmp;
  // (B, S(1)): ranks 2 and 3 hold the same halves as ranks 0 and 1, so they write nothing.
  const Shape shape{300, 200};  // 120 000 bytes per half: two chunks, the second partial
  std::vector<CheckpointIoStats> stats(4);
  spsd::simulate(4, [&] {
    reset_checkpoint_io_stats();
    save_checkpoint(arange<float>(shape.numel(), kGrid, {sbp::broadcast, sbp::broadcast}), tmp.path);
    auto x = reshape(arange<float>(shape.numel(), kGrid, {sbp::broadcast, sbp::split(0)}), shape);
    reset_checkpoint_io_stats();
    save_checkpoint(x.to_global({sbp::broadcast, sbp::split(1)}), tmp.path);
    stats[rank()] = checkpoint_io_stats();
  });
  const std::string manifest = read_text(tmp.path + "/manifest");
  CHECK(stats[0].bytes_written == 120'000 + static_cast<int64_t>(manifest.size()));
  CHECK(stats[1].bytes_written == 120'000);
  CHECK(stats[2].bytes_written == 0);
  CHECK(stats[3].bytes_written == 0);
  // The second save replaced the first: its data files are gone, no temporaries are left.
  const std::vector<std::string> files = files_in(tmp.path);
  REQUIRE(files.size() == 3);
  CHECK(files[2] == "manifest");
  CHECK_THAT(files[0], Catch::StartsWith("data-") && Catch::EndsWith("-r0.bin"));
  CHECK_THAT(files[1], Catch::StartsWith("data-") && Catch::EndsWith("-r1.bin"));

  // The manifest (docs/checkpoints.md), its checksums recomputed with zlib.
  std::istringstream lines(manifest);
  std::string line;
  std::vector<std::string> boxes;
  while (std::getline(lines, line))
    if (line.starts_with("box ")) boxes.push_back(line);
  CHECK(manifest.starts_with("spsd-checkpoint 1\nchunk_bytes 65536\n"));
  CHECK_THAT(manifest, Catch::Contains("\ntensor tensor float32 2 300 200\n"));
  const size_t end = manifest.rfind("end ");
  char end_crc[9];
  std::snprintf(end_crc, sizeof end_crc, "%08lx",
                crc32(0L, reinterpret_cast<const Bytef*>(manifest.data()), static_cast<uInt>(end)));
  CHECK(manifest.substr(end) == "end " + std::string(end_crc) + "\n");
  REQUIRE(boxes.size() == 2);
  for (size_t k = 0; k < 2; ++k) {
    std::istringstream w(boxes[k]);
    std::string word, name, file, range0, range1, crc;
    int64_t offset = 0, bytes = 0, chunks = 0;
    w >> word >> name >> file >> offset >> bytes >> range0 >> range1 >> chunks;
    CHECK(file == files[k]);
    CHECK(offset == 0);
    CHECK(bytes == 120'000);
    CHECK(range0 == "0:300");
    CHECK(range1 == (k == 0 ? "0:100" : "100:200"));
    REQUIRE(chunks == 2);
    const std::string data = read_text(tmp.path + "/" + file);
    REQUIRE(data.size() == 120'000);
    for (int64_t c = 0; c < chunks; ++c) {
      w >> crc;
      const int64_t at = c * 65536, n = std::min<int64_t>(65536, bytes - at);
      char want[9];
      std::snprintf(want, sizeof want, "%08lx", crc32(0L, reinterpret_cast<const Bytef*>(data.data() + at), static_cast<uInt>(n)));
      CHECK(crc == want);
    }
  }
}

TEST_CASE("checkpoint: a save that stops before its manifest leaves the previous checkpoint, or none", "[checkpoint]") {
  TempDir tmp;
  auto save_values = [&](float value, std::string_view crash_at) {
    detail::checkpoint_fault_hook = [crash_at](std::string_view stage) {
      if (stage == crash_at) throw Error(detail::concat("crashed at ", stage));
    };
    const std::vector<std::string> errors = spsd_test::errors_by_rank(
        4, [&] { save_checkpoint(full<float>({5, 3}, value, kGrid, {sbp::split(0), sbp::split(1)}), tmp.path); });
    detail::checkpoint_fault_hook = nullptr;
    return errors;
  };
  auto load_first = [&] {
    std::vector<float> got(4, -1);
    const std::vector<std::string> errors = spsd_test::errors_by_rank(4, [&] {
      got[rank()] = load_checkpoint<float>(tmp.path, Placement("cpu", {0, 1, 2, 3}), sbp::split(1)).full().to_vector()[0];
    });
    return std::pair(got, errors);
  };

  // No checkpoint yet: data files without a manifest do not load.
  expect_error_everywhere(save_values(1, "data written"), {"crashed at data written"});
  CHECK(!fs::exists(tmp.path + "/manifest"));
  expect_error_everywhere(load_first().second, {"load_checkpoint", "holds no checkpoint", tmp.path + "/manifest", "does not exist"});

  // A checkpoint of 2s, then a save of 3s that stops with its manifest written but not renamed.
  CHECK(save_values(2, "") == std::vector<std::string>(4));
  const std::vector<std::string> complete = files_in(tmp.path);
  expect_error_everywhere(save_values(3, "manifest written"), {"crashed at manifest written"});
  CHECK(files_in(tmp.path).size() > complete.size());  // the 3s' data files and temporary manifest
  auto [got, errors] = load_first();
  CHECK(errors == std::vector<std::string>(4));
  CHECK(got == std::vector<float>(4, 2));
  // The next complete save loads, and removes what the stopped one left.
  CHECK(save_values(4, "") == std::vector<std::string>(4));
  std::tie(got, errors) = load_first();
  CHECK(got == std::vector<float>(4, 4));
  CHECK(files_in(tmp.path).size() == complete.size());
}

TEST_CASE("checkpoint: bad arguments throw on every rank, naming the operation and the values", "[checkpoint]") {
  TempDir tmp;
  const Placement line("cpu", {0, 1, 2});
  spsd::simulate(3, [&] {
    StateDict state;
    state.insert("w", randn<float>({4, 6}, line, sbp::split(0), 1));
    state.insert("step", full<int64_t>({}, 7, line, sbp::broadcast));
    save_checkpoint(state, tmp.path);
  });
  const std::string missing = tmp.path + "/nowhere";
  expect_error_everywhere(spsd_test::errors_by_rank(3, [&] { load_checkpoint<float>(missing, "w", line, sbp::broadcast); }),
                          {"load_checkpoint", "checkpoint folder " + missing + " does not exist"});
  expect_error_everywhere(spsd_test::errors_by_rank(3, [&] { load_checkpoint<int32_t>(tmp.path, "w", line, sbp::broadcast); }),
                          {"load_checkpoint", "tensor \"w\" in " + tmp.path + " is float32, asked for int32"});
  // Floating dtypes convert on load (check_reference_loads); integers never do.
  expect_error_everywhere(spsd_test::errors_by_rank(3, [&] { load_checkpoint<spsd::bfloat16>(tmp.path, "step", line, sbp::broadcast); }),
                          {"load_checkpoint", "tensor \"step\" in " + tmp.path + " is int64, asked for bfloat16",
                           "only floating dtypes convert on load"});
  expect_error_everywhere(spsd_test::errors_by_rank(3, [&] { load_checkpoint<float>(tmp.path, "v", line, sbp::broadcast); }),
                          {"load_checkpoint", "holds no tensor \"v\" (it holds: step, w)"});
  expect_error_everywhere(spsd_test::errors_by_rank(3, [&] { load_checkpoint<float>(tmp.path, "w", line, sbp::split(2)); }),
                          {"load_checkpoint", "splits axis 2", "(4, 6)"});
  expect_error_everywhere(spsd_test::errors_by_rank(3, [&] { load_checkpoint<float>(tmp.path, "w", Placement("cpu", {0, 1, 5}), sbp::broadcast); }),
                          {"load_checkpoint", "names rank 5", "the world has 3 ranks"});
  expect_error_everywhere(spsd_test::errors_by_rank(3, [&] { checkpoint_contents(missing); }),
                          {"checkpoint_contents", missing, "does not exist"});
  expect_error_everywhere(spsd_test::errors_by_rank(3, [&] { save_checkpoint(StateDict{}, tmp.path + "/empty"); }),
                          {"save_checkpoint", tmp.path + "/empty", "holds no tensors"});
  CHECK(!fs::exists(tmp.path + "/empty"));
  CHECK_THAT(error_of([] { StateDict{}.at<float>("w"); }), ContainsAll({"StateDict::at", "no tensor named \"w\""}));
  CHECK_THAT(error_of([] {
               StateDict d;
               d.insert("w", GlobalTensor<float>(Shape{}, Placement("cpu", {0}), sbp::broadcast, Tensor<float>()));
               d.at<int64_t>("w");
             }),
             ContainsAll({"StateDict::at", "tensor \"w\" is float32, asked for int64"}));
  CHECK_THAT(error_of([] {
               StateDict().insert("", GlobalTensor<float>(Shape{}, Placement("cpu", {0}), sbp::broadcast, Tensor<float>()));
             }),
             ContainsAll({"StateDict::insert", "must not be empty"}));
  // The one-tensor form reads the tensor named "tensor".
  expect_error_everywhere(spsd_test::errors_by_rank(3, [&] { load_checkpoint<float>(tmp.path, line, sbp::broadcast); }),
                          {"load_checkpoint", "holds no tensor \"tensor\""});
  expect_error_everywhere(spsd_test::errors_by_rank(3, [&] {
                            StateDict into;
                            into.insert("w", zeros<float>({6, 4}, line, sbp::split(0)));
                            load_checkpoint(tmp.path, into);
                          }),
                          {"load_checkpoint", "tensor \"w\" in " + tmp.path + " is (4, 6) float32",
                           "the target is (6, 4) float32 (S(0)) on placement"});
  // A failed load writes nothing: "step" keeps its value.
  std::vector<int64_t> steps(3);
  expect_error_everywhere(spsd_test::errors_by_rank(3, [&] {
                            StateDict into;
                            auto step = full<int64_t>({}, -1, line, sbp::broadcast);
                            into.insert("step", step);
                            into.insert("x", zeros<float>({4, 6}, line, sbp::split(0)));
                            try {
                              load_checkpoint(tmp.path, into);
                            } catch (const Error&) {
                              steps[rank()] = step.to_local().to_vector()[0];
                              throw;
                            }
                          }),
                          {"holds no tensor \"x\""});
  CHECK(steps == std::vector<int64_t>(3, -1));
  // Saving into a path that is a file.
  std::ofstream(tmp.path + "/a-file") << "x";
  expect_error_everywhere(spsd_test::errors_by_rank(3, [&] {
                            save_checkpoint(zeros<float>({2}, line, sbp::broadcast), tmp.path + "/a-file");
                          }),
                          {"save_checkpoint", tmp.path + "/a-file"});
  // Ranks that disagree on the folder get an error, not files written by half of them.
  expect_error_everywhere(spsd_test::errors_by_rank(3, [&] {
                            save_checkpoint(zeros<float>({2}, line, sbp::broadcast), tmp.path + "/r" + std::to_string(rank() == 2));
                          }),
                          {"save_checkpoint("});
  CHECK(!fs::exists(tmp.path + "/r0/manifest"));
  CHECK_THAT(error_of([] {
               StateDict d;
               d.insert("two words", GlobalTensor<float>(Shape{}, Placement("cpu", {0}), sbp::broadcast, Tensor<float>()));
             }),
             ContainsAll({"StateDict::insert", "\"two words\"", "without spaces"}));
}

TEST_CASE("checkpoint: ranks that pass different tensors are told the first that differs and how many, in a few lines",
          "[checkpoint]") {
  TempDir tmp;
  const Placement line("cpu", {0, 1, 2});
  const auto name = [](int i) { return std::string("layer") + (i < 10 ? "0" : "") + std::to_string(i) + ".weight"; };
  spsd::simulate(3, [&] {
    StateDict state;
    for (int i = 0; i < 37; ++i) state.insert(name(i), zeros<float>({4, 6}, line, sbp::split(0)));
    save_checkpoint(state, tmp.path);
  });
  // Rank 2 asks for two tensors in another layout (made by the raw constructor, which the
  // consistency check does not see: only the load call differs).
  const std::vector<std::string> errors = spsd_test::errors_by_rank(3, [&] {
    StateDict into;
    for (int i = 0; i < 37; ++i) {
      const NdSbp nd = rank() == 2 && (i == 5 || i == 20) ? NdSbp(sbp::broadcast) : NdSbp(sbp::split(0));
      into.insert(name(i), GlobalTensor<float>(Shape{4, 6}, line, nd, Tensor<float>(box_of(Shape{4, 6}, line, nd, rank()).shape())));
    }
    load_checkpoint(tmp.path, into);
  });
  const std::string on = " on placement(type=\"cpu\", ranks=[0, 1, 2])";
  expect_error_everywhere(errors, {"consistency check: ranks disagree on global op #",
                                   ": load_checkpoint(" + tmp.path + "): 2 of 37 entries differ, the first at entry 5:\n",
                                   "\n  ranks 0, 1: layer05.weight (4, 6) float32 (S(0))" + on,
                                   "\n  rank 2: layer05.weight (4, 6) float32 (B)" + on});
  for (const std::string& e : errors) {
    CHECK(std::count(e.begin(), e.end(), '\n') == 2);
    CHECK(e.size() < 500);
  }
}

namespace {

// Trains the 2d MLP on 4 ranks for steps [from, to), starting from `resume` if given and
// saving into `save` if given; returns the losses and (on rank 0) the final parameters.
struct Run {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;
};
Run train(int64_t from, int64_t to, const std::string& resume, const std::string& save, uint64_t init_seed) {
  static const examples::Dataset data = examples::generated_dataset(160, 4);
  Run run;
  spsd::simulate(4, [&] {
    const nn::Plan plan = examples::mlp_plan("2d");
    examples::Mlp<float> model({examples::mlp_placement("2d", 4), init_seed}, examples::kPixels, 16, examples::kClasses);
    nn::parallelize(model, plan);
    const Placement& placement = model.fc1.weight.placement();
    const NdSbp batch = nn::input_layout(plan);
    Adam<float> adam(model.named_parameters(), {.lr = 1e-2});
    const int64_t first = resume.empty() ? 0 : examples::resume_training(resume, model, adam);
    if (first != from) throw Error(detail::concat("resumed at step ", first, ", expected ", from));
    for (int64_t s = from; s < to; ++s) {
      std::vector<int64_t> rows(20);
      std::iota(rows.begin(), rows.end(), (s * 20) % data.size());
      GlobalTensor<float> loss = cross_entropy(model(examples::image_batch<float>(data, rows, placement, batch)),
                                               examples::label_batch(data, rows, placement, batch));
      adam.zero_grad();
      backward(loss);
      adam.step();
      const float value = loss.full().to_vector()[0];
      if (rank() == 0) run.losses.push_back(value);
    }
    if (!save.empty()) examples::save_training(save, model, adam, to);
    for (const GlobalTensor<float>& p : model.parameters()) {
      const std::vector<float> whole = p.full().to_vector();
      if (rank() == 0) run.params.push_back(whole);
    }
  });
  return run;
}

}  // namespace

TEST_CASE("checkpoint: training resumed from a checkpoint continues the same losses and parameters bit for bit",
          "[checkpoint]") {
  TempDir tmp;
  const Run straight = train(0, 8, "", "", 5);
  const Run first = train(0, 4, "", tmp.path, 5);
  // Other initial values: the checkpoint must replace all of them.
  const Run second = train(4, 8, tmp.path, "", 99);
  std::vector<float> resumed = first.losses;
  resumed.insert(resumed.end(), second.losses.begin(), second.losses.end());
  CHECK(resumed == straight.losses);
  CHECK(second.params == straight.params);
  CHECK(first.params != straight.params);  // the second half moved the parameters
}

// sbp::split(-1) means the last axis here too (the stored shape decides which).
TEST_CASE("checkpoint: a layout with a negative split axis loads like the normalized one", "[checkpoint]") {
  TempDir tmp;
  const Tensor<float> host = Tensor<float>::from_vector({3, 5}, std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14});
  struct Loaded {
    std::string nd_sbp;
    std::vector<float> values;
  };
  const auto loaded = spsd_test::results_by_rank<Loaded>(2, [&] {
    const Placement p("cpu", {0, 1});
    save_checkpoint(from_host(host, p, NdSbp(sbp::split(0))), tmp.path);
    const auto t = load_checkpoint<float>(tmp.path, p, NdSbp(sbp::split(-1)));
    return Loaded{t.nd_sbp().to_string(), t.full().to_vector()};
  });
  for (const Loaded& l : loaded) {
    CHECK(l.nd_sbp == NdSbp(sbp::split(1)).to_string());
    CHECK(l.values == host.to_vector());
  }
}
