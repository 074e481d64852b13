// Training resumed in another world size and plan under mpirun (docs/checkpoints.md), driven by
// check_resume.sh: trains spsd_test::train_resumable's MLP (Adam, cosine schedule, clipping) in
// one plan for steps [from, to), resuming from and saving to checkpoints, and prints the losses
// on rank 0, one per line: "loss STEP VALUE" (9 significant digits).
//   resume_training MODE FROM TO [save DIR] [resume DIR] [model-only]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "training_checks.hpp"

int main(int argc, char** argv) {
  spsd::Runtime runtime(argc, argv);
  if (argc < 4) {
    std::fprintf(stderr, "usage: resume_training MODE FROM TO [save DIR] [resume DIR] [model-only]\n");
    return 2;
  }
  std::string save, resume;
  bool model_only = false;
  for (int i = 4; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "save" && i + 1 < argc) save = argv[++i];
    else if (a == "resume" && i + 1 < argc) resume = argv[++i];
    else if (a == "model-only") model_only = true;
    else {
      std::fprintf(stderr, "resume_training: unknown argument \"%s\"\n", a.c_str());
      return 2;
    }
  }
  const int64_t from = std::atoll(argv[2]), to = std::atoll(argv[3]);
  const std::vector<float> losses = spsd_test::train_resumable(argv[1], from, to, resume, save, !model_only);
  if (spsd::rank() == 0)
    for (size_t k = 0; k < losses.size(); ++k) std::printf("loss %lld %.9g\n", static_cast<long long>(from + k), losses[k]);
  return 0;
}
