#pragma once
// The text of examples/08_gpt (and its tests and benchmark): a character corpus, its
// vocabulary, and batches of windows. Every rank reads the same text and draws the same
// windows (one seeded generator), so the batches are global values like any other input; the
// layout they start in is the only parallelism.
//
// The corpus is Debian's `fortunes` package (/usr/share/games/fortunes, tools/lib.sh installs
// it): every fortune file, its "%" separator lines dropped, characters outside printable ASCII
// dropped. Without the package a generated stand-in is used (sentences drawn from short word
// lists): enough structure for the loss to fall, and the program says which one it trains on.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <spsd/spsd.hpp>
#include <string>
#include <vector>

namespace examples {

inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

struct Corpus {
  std::string text;
  std::string source;           // what the text is, for the user
  std::vector<char> vocab;      // the distinct characters, sorted: token i is vocab[i]
  std::array<int64_t, 256> id{};  // character -> token (-1: not in the vocabulary)
  std::vector<int64_t> tokens;  // the text as tokens

  int64_t vocab_size() const { return static_cast<int64_t>(vocab.size()); }

  // The entropy (nats per character) of the text's character frequencies: the loss a model
  // that ignores context reaches at best. Falling well below it means the model uses context.
  double unigram_entropy() const {
    std::array<double, 256> count{};
    for (char c : text) count[static_cast<unsigned char>(c)] += 1;
    double h = 0;
    for (double n : count)
      if (n > 0) h -= n / static_cast<double>(text.size()) * std::log(n / static_cast<double>(text.size()));
    return h;
  }

  std::string decode(const std::vector<int64_t>& t) const {
    std::string s;
    for (int64_t i : t) s += vocab[static_cast<size_t>(i)];
    return s;
  }
};

inline Corpus make_corpus(std::string text, std::string source) {
  Corpus c;
  c.text = std::move(text);
  c.source = std::move(source);
  std::array<bool, 256> seen{};
  for (char ch : c.text) seen[static_cast<unsigned char>(ch)] = true;
  c.id.fill(-1);
  for (int ch = 0; ch < 256; ++ch)
    if (seen[ch]) {
      c.id[ch] = static_cast<int64_t>(c.vocab.size());
      c.vocab.push_back(static_cast<char>(ch));
    }
  c.tokens.reserve(c.text.size());
  for (char ch : c.text) c.tokens.push_back(c.id[static_cast<unsigned char>(ch)]);
  return c;
}

inline bool have_fortunes(const std::string& dir = kFortunesDir) { return std::filesystem::is_directory(dir); }

// Every fortune file of dir (the plain ones: not the .dat indexes nor the .u8 links), in name
// order; limit > 0 keeps the first limit characters.
inline Corpus read_fortunes(const std::string& dir = kFortunesDir, int64_t limit = -1) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && !e.path().has_extension()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& f : files) {
    std::ifstream in(f);
    for (std::string line; std::getline(in, line);) {
      if (line == "%") continue;
      for (char ch : line)
        if (ch == '\t') text += ' ';
        else if (ch >= 32 && ch < 127) text += ch;
      text += '\n';
      if (limit > 0 && static_cast<int64_t>(text.size()) >= limit) break;
    }
    if (limit > 0 && static_cast<int64_t>(text.size()) >= limit) break;
  }
  SPSD_CHECK(text.size() > 1, "read_fortunes", "no text in ", dir);
  if (limit > 0 && static_cast<int64_t>(text.size()) > limit) text.resize(static_cast<size_t>(limit));
  return make_corpus(std::move(text), "fortunes (" + dir + ", " + std::to_string(files.size()) + " files)");
}

// Sentences from short word lists: deterministic in seed.
inline Corpus generated_corpus(int64_t chars, uint64_t seed) {
  static const std::vector<std::string> subjects = {"the cat", "a dog", "my friend", "the old man", "our teacher",
                                                    "a small bird", "the program", "every rank"};
  static const std::vector<std::string> verbs = {"sees", "likes", "finds", "reads", "writes", "sends", "keeps"};
  static const std::vector<std::string> objects = {"the ball", "a letter", "the tensor", "some bread",
                                                   "a long book", "the message", "its piece"};
  std::mt19937_64 g(seed);
  std::string text;
  auto pick = [&](const std::vector<std::string>& v) { return v[g() % v.size()]; };
  while (static_cast<int64_t>(text.size()) < chars) {
    std::string s = pick(subjects) + " " + pick(verbs) + " " + pick(objects) + (g() % 3 == 0 ? ".\n" : ". ");
    s[0] = static_cast<char>(s[0] - 'a' + 'A');
    text += s;
  }
  text.resize(static_cast<size_t>(chars));
  return make_corpus(std::move(text), "generated sentences (the fortunes package is not installed)");
}

// A batch of `batch` windows of `context` tokens and their next tokens (the window shifted by
// one), both (batch, context) int64, drawn uniformly with g.
struct TextBatch {
  spsd::Tensor<int64_t> inputs, targets;
};

inline TextBatch draw_batch(const Corpus& c, int64_t batch, int64_t context, std::mt19937_64& g) {
  const int64_t n = static_cast<int64_t>(c.tokens.size());
  SPSD_CHECK(n > context, "draw_batch", "the corpus has ", n, " tokens, fewer than the context ", context, " + 1");
  std::vector<int64_t> in(static_cast<size_t>(batch * context)), out(in.size());
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t start = static_cast<int64_t>(g() % static_cast<uint64_t>(n - context));
    for (int64_t t = 0; t < context; ++t) {
      in[b * context + t] = c.tokens[start + t];
      out[b * context + t] = c.tokens[start + t + 1];
    }
  }
  return {spsd::Tensor<int64_t>::from_vector({batch, context}, std::move(in)),
          spsd::Tensor<int64_t>::from_vector({batch, context}, std::move(out))};
}

}  // namespace examples
