#pragma once
// What the character-GPT examples (08_gpt, 11_pipeline_gpt) share on the command line: the
// model's and the training loop's options, and the progress line printed while training.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <spsd/spsd.hpp>
#include <string>

#include "train/text.hpp"

namespace examples {

struct GptOptions {
  std::string parallel = "data", device, text = kFortunesDir, csv;
  int64_t steps = 1500, batch = 32, context = 64, dim = 128, heads = 4, layers = 2, text_limit = -1, log_every = 10;
  double lr = 3e-3, dropout = 0;
  bool tied = false;
  uint64_t seed = 1;
};

// Reads the value v of option a into o when a is one of GptOptions'; false when it is not.
inline bool read_gpt_option(GptOptions& o, const std::string& a, const std::string& v) {
  if (a == "--parallel") o.parallel = v;
  else if (a == "--device") o.device = v;
  else if (a == "--text") o.text = v;
  else if (a == "--csv") o.csv = v;
  else if (a == "--steps") o.steps = std::stoll(v);
  else if (a == "--batch") o.batch = std::stoll(v);
  else if (a == "--context") o.context = std::stoll(v);
  else if (a == "--dim") o.dim = std::stoll(v);
  else if (a == "--heads") o.heads = std::stoll(v);
  else if (a == "--layers") o.layers = std::stoll(v);
  else if (a == "--text-limit") o.text_limit = std::stoll(v);
  else if (a == "--log-every") o.log_every = std::max<int64_t>(1, std::stoll(v));
  else if (a == "--lr") o.lr = std::stod(v);
  else if (a == "--dropout") o.dropout = std::stod(v);
  else if (a == "--tied") o.tied = v != "0";
  else if (a == "--seed") o.seed = std::stoull(v);
  else return false;
  return true;
}

// "step 40/200 [======      ] loss 3.1234  6183 tokens/s" on rank 0, rewritten in place.
inline void progress(int64_t step, int64_t steps, double tokens_per_s, double loss, bool last) {
  if (spsd::rank() != 0) return;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * step / std::max<int64_t>(steps, 1));
  std::printf("\rstep %lld/%lld [%s%s] loss %.4f  %.0f tokens/s", static_cast<long long>(step),
              static_cast<long long>(steps), std::string(filled, '=').c_str(), std::string(kWidth - filled, ' ').c_str(),
              loss, tokens_per_s);
  std::printf(last ? "\n" : "");
  std::fflush(stdout);
}

}  // namespace examples
