#pragma once
// What the consistency check carries besides op identities, on one rank set (collective over
// its members; each records its own findings), shared by test/sim/test_consistency.cpp and
// test/mpi/test_consistency.cpp:
//   - data errors (note_data_error: a bad value only some members' pieces hold): every member
//     throws the message of the earliest op with one, and within it of the smallest index, at
//     the set's next check, also when every member found one (their records are then equal);
//     a set of one member throws at once;
//   - a call over many entries (OpIdentity's parts: a checkpoint's tensors) that differs on one
//     member: a few lines naming the first entry that differs and how many do.
#include <algorithm>
#include <string>
#include <vector>

#include "failures.hpp"

namespace spsd_test {

namespace data_error_detail {

inline std::shared_ptr<const spsd::detail::OpIdentity> op(const std::string& description,
                                                          std::vector<std::string> parts = {}) {
  return parts.empty() ? std::make_shared<const spsd::detail::OpIdentity>(description)
                       : std::make_shared<const spsd::detail::OpIdentity>(description, std::move(parts));
}

// The spsd::Error message of f, "" when it returns; a check queued on the communication stream
// surfaces in synchronize().
template <class F>
std::string error_of(F&& f) {
  try {
    f();
    spsd::synchronize();
  } catch (const spsd::Error& e) {
    return e.what();
  }
  return "";
}

inline void expect_message(Failures& f, const std::string& what, const std::string& got,
                           const std::vector<std::string>& fragments) {
  if (got.empty()) f.add(what + ": no error on world rank " + std::to_string(spsd::rank()));
  for (const std::string& frag : fragments)
    if (!got.empty() && got.find(frag) == std::string::npos)
      f.add(what + ": world rank " + std::to_string(spsd::rank()) + " got \"" + got + "\", lacking \"" + frag + "\"");
}

}  // namespace data_error_detail

inline void run_data_error_suite(const std::vector<int64_t>& ranks, Failures& f) {
  using namespace data_error_detail;
  using spsd::detail::check_ops;
  using spsd::detail::note_data_error;
  using spsd::detail::note_op;
  using spsd::detail::op_number;
  const int64_t n = static_cast<int64_t>(ranks.size());
  const int64_t me = std::find(ranks.begin(), ranks.end(), spsd::rank()) - ranks.begin();
  const std::string last = std::to_string(ranks.back());

  // The last member alone holds a bad value: every member raises it at the next check.
  std::string e = error_of([&] {
    note_op(ranks, op("pick()"));
    if (me == n - 1) note_data_error(ranks, op_number(ranks), 5, "pick: labels[5] = 9 is outside [0, 4)");
    note_op(ranks, op("full()"));
    check_ops(ranks);
  });
  expect_message(f, "one member's data error", e, {"pick: labels[5] = 9 is outside [0, 4)"});
  if (n > 1) expect_message(f, "one member's data error", e, {"found by world rank " + last, "at their next consistency check"});

  // Several: the earliest op's, and within it the smallest index.
  e = error_of([&] {
    note_op(ranks, op("a()"));
    const uint64_t a = op_number(ranks);
    note_op(ranks, op("b()"));
    if (me == 0) note_data_error(ranks, a + 1, 0, "b: [0]");
    if (me == n - 1 && n > 1) note_data_error(ranks, a, 7, "a: [7]");
    if (me == 1 && n > 2) note_data_error(ranks, a, 3, "a: [3]");
    check_ops(ranks);
  });
  expect_message(f, "data errors of two ops", e, {n == 1 ? "b: [0]" : n == 2 ? "a: [7]" : "a: [3]"});

  // Every member holds the same one: the records agree, and all raise it all the same.
  e = error_of([&] {
    note_op(ranks, op("embedding()"));
    note_data_error(ranks, op_number(ranks), 2, "embedding: indices[2] = -1");
    check_ops(ranks);
  });
  expect_message(f, "every member's data error", e, {"embedding: indices[2] = -1"});

  // Nothing stays behind: the next check passes.
  e = error_of([&] {
    note_op(ranks, op("after(the data errors)"));
    check_ops(ranks);
  });
  if (!e.empty()) f.add("the check after the data errors threw on world rank " + std::to_string(spsd::rank()) + ": " + e);
  if (n < 2) return;

  // One call over 37 entries, two of which differ on the last member.
  const auto agreed_entries = [] {
    std::vector<std::string> v;
    for (int i = 0; i < 37; ++i) v.push_back("w" + std::to_string(i) + " (4, 6) float32 (S(0))");
    return v;
  };
  std::vector<std::string> entries = agreed_entries();
  if (me == n - 1) entries[5] = entries[20] = "w5 (4, 6) float32 (B)";
  e = error_of([&] {
    note_op(ranks, op("load_checkpoint(/tmp/c)", entries));
    check_ops(ranks);
  });
  std::string others = n == 2 ? "rank 0" : "ranks 0";
  for (int64_t m = 1; m < n - 1; ++m) others += ", " + std::to_string(ranks[m]);
  expect_message(f, "a call over 37 entries", e,
                 {"ranks disagree on global op #", ": load_checkpoint(/tmp/c): 2 of 37 entries differ, the first at entry 5:\n  ",
                  others + ": w5 (4, 6) float32 (S(0))", "\n  rank " + last + ": w5 (4, 6) float32 (B)"});
  if (e.size() > 400 || std::count(e.begin(), e.end(), '\n') > 2)
    f.add("a call over 37 entries: the message has " + std::to_string(e.size()) + " characters: " + e);
  // A member that passes one entry fewer.
  entries = agreed_entries();
  if (me == n - 1) entries.resize(36);
  e = error_of([&] {
    note_op(ranks, op("load_checkpoint(/tmp/c)", entries));
    check_ops(ranks);
  });
  expect_message(f, "a call over fewer entries", e,
                 {"1 of 37 entries differ, the first at entry 36 (" + others + ": 37 entries; rank " + last + ": 36 entries)",
                  "\n  rank " + last + ": (none: 36 entries)"});
}

}  // namespace spsd_test
