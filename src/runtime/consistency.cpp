// The cross-rank consistency check (runtime/consistency.hpp, DESIGN.md 3.5, docs/communicators.md).
// Per rank set and rank: a count of the ops noted, a running digest of (count, op hash), the
// ops noted since the last successful check, and the first data error noted since then. A check
// exchanges one fixed-size record per rank on the rank set's check communicator (or, on large
// rank sets, reduces their bounds); only when records differ (or carry a data error) do ranks
// exchange more (the records, the pending op hashes, then the descriptions of the first op that
// differs; or the data errors) to name the culprit.
#include "spsd/runtime/consistency.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string_view>

#include "context.hpp"
#include "spsd/core/error.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/runtime/scheduler.hpp"
#include "spsd/runtime/value_errors.hpp"

namespace spsd::detail {

namespace {

// splitmix64's finalizer: every input bit affects every output bit.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash_text(std::string_view text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return mix(h);
}

// One op as noted: its identity, and the hash that is compared (the identity's, mixed with the
// scalar operand's bits when there is one).
struct NotedOp {
  std::shared_ptr<const OpIdentity> op;
  uint64_t hash;
  bool has_scalar;
  double scalar;
  std::string description() const {
    return has_scalar ? concat(op->description, " with scalar operand ", scalar) : op->description;
  }
};

// Separators of an op's parts in the text a mismatch exchanges (no description holds them).
constexpr char kPartsBegin = '\x1e', kPartSeparator = '\x1f';

// A bad value this rank found (note_data_error), waiting for the rank set's next check.
struct DataError {
  uint64_t op;    // the op's number on the rank set
  int64_t index;  // the first bad element's global index
  std::string message;
};

struct RankSetState {
  uint64_t seq = 0;              // ops noted since the start, or since the last mismatch
  uint64_t digest = 0;           // folds (seq, op hash) of each of them, in order
  std::vector<NotedOp> pending;  // since the last check was issued
  std::optional<DataError> data_error;  // the earliest noted since the last check was issued
  Communicator* comm = nullptr;  // the check communicator, once created (used by the check only)
  // Set by a check that found a mismatch (it may run on the communication stream); the rank's
  // thread starts the rank set afresh at its next note or check.
  std::atomic<bool> restart{false};

  void restart_if_asked() {
    if (!restart.exchange(false, std::memory_order_acquire)) return;
    seq = 0;
    digest = 0;
    pending.clear();
    data_error.reset();
  }
};

// What one check compares: this rank's state when the check was issued.
struct CheckRequest {
  std::vector<int64_t> ranks;
  uint64_t seq, digest;
  std::vector<NotedOp> pending;
  std::optional<DataError> data_error;
};

// What ranks compare. Equal records mean equal op sequences (up to 64-bit hash collisions);
// data_error is the number of the op where this rank found a bad value (0: none).
struct Record {
  uint64_t seq, digest, pending, last, data_error;
  friend bool operator==(const Record&, const Record&) = default;
  bool same_ops(const Record& o) const {
    return seq == o.seq && digest == o.digest && pending == o.pending && last == o.last;
  }
};
static_assert(sizeof(Record) == 5 * sizeof(int64_t));
constexpr int64_t kRecordWords = 5;

CheckMode mode_from_env() {
  const char* v = std::getenv("SPSD_CHECK");
  if (v == nullptr || std::string_view(v).empty() || std::string_view(v) == "on") return CheckMode::kOn;
  if (std::string_view(v) == "op") return CheckMode::kEveryOp;
  if (std::string_view(v) == "off") return CheckMode::kOff;
  throw_error("SPSD_CHECK", "must be \"on\", \"op\" or \"off\", got \"", v, "\"");
}

}  // namespace

struct ConsistencyTable {
  CheckMode mode = CheckMode::kOn;
  std::map<std::vector<int64_t>, RankSetState> sets;  // nodes never move: the cache below stays valid
  const std::vector<int64_t>* last_key = nullptr;     // note_op's fast path: the previous rank set
  RankSetState* last_state = nullptr;
};

namespace {

ConsistencyTable& table(Context& ctx) {
  if (!ctx.consistency) {
    auto t = std::make_shared<ConsistencyTable>();
    t->mode = mode_from_env();
    ctx.consistency = std::move(t);
  }
  return *ctx.consistency;
}

RankSetState& state(Context& ctx, ConsistencyTable& t, const std::vector<int64_t>& ranks, const char* op) {
  if (t.last_key != nullptr && *t.last_key == ranks) return *t.last_state;
  auto it = t.sets.find(ranks);
  if (it == t.sets.end()) {
    // Checked once per rank set: the callers pass placements' ranks, so this never fails for them.
    SPSD_CHECK(std::find(ranks.begin(), ranks.end(), ctx.rank) != ranks.end(), op, "rank ", ctx.rank,
               " is not among the ranks ", join(ranks));
    for (int64_t r : ranks)
      SPSD_CHECK(r >= 0 && r < ctx.world_size, op, "ranks ", join(ranks), " name rank ", r, " but the world has ",
                 ctx.world_size, " ranks");
    it = t.sets.try_emplace(ranks).first;
  }
  t.last_key = &it->first;
  t.last_state = &it->second;
  return it->second;
}

Communicator& check_communicator(Context& ctx, RankSetState& s, const std::vector<int64_t>& ranks) {
  if (s.comm) return *s.comm;
  auto it = ctx.check_communicators.find(ranks);
  if (it == ctx.check_communicators.end()) {
    std::vector<int64_t> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    SPSD_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), "consistency check", "ranks ",
               join(ranks), " name a rank more than once");
    int64_t me = std::find(ranks.begin(), ranks.end(), ctx.rank) - ranks.begin();
    it = ctx.check_communicators.emplace(ranks, ctx.backend->create_check(ranks, me, &ctx.check_stats)).first;
    ++ctx.creation.check_communicators;
  }
  s.comm = it->second.get();
  return *s.comm;
}

// Every member's record when they differ; empty when every member holds mine. Up to
// kPointToPointMembers members: one message to and from each other member, so that a timeout
// names the members whose record never came (MPI cannot say who is missing from a collective).
// Larger rank sets first reduce: the maximum of each record word and of its complement (~w
// reverses the order, so that maximum is ~minimum), 2 x 40 bytes in log(n) steps whatever n;
// equal maximum and minimum everywhere means every member holds the same record. Only then do
// they all-gather the records, to name the culprit. Every member sees the same reduction, so
// all take the same path. Under MPI their timeout says a member is missing but not which.
std::vector<Record> differing_records(Communicator& comm, const Record& mine) {
  std::vector<Record> all(comm.size());
  if (comm.size() > kPointToPointMembers) {
    const auto* words = reinterpret_cast<const int64_t*>(&mine);
    int64_t bounds[2 * kRecordWords];
    for (int64_t i = 0; i < kRecordWords; ++i) {
      bounds[i] = words[i];
      bounds[kRecordWords + i] = ~words[i];
    }
    comm.all_reduce(bounds, bounds, 2 * kRecordWords, DType::kInt64, ReduceOp::kMax);
    bool same = true;
    for (int64_t i = 0; i < kRecordWords; ++i) same = same && bounds[i] == ~bounds[kRecordWords + i];
    if (same) return {};
    comm.all_gather(&mine, all.data(), kRecordWords, DType::kInt64);
    return all;
  }
  std::vector<SendSpec> sends;
  std::vector<RecvSpec> recvs;
  for (int64_t m = 0; m < comm.size(); ++m) {
    if (m == comm.rank()) continue;
    sends.push_back({m, &mine, kRecordWords});
    recvs.push_back({m, &all[m], kRecordWords});
  }
  comm.send_recv(sends, recvs, DType::kInt64);
  all[comm.rank()] = mine;
  if (std::all_of(all.begin(), all.end(), [&](const Record& r) { return r == mine; })) return {};
  return all;
}

// The size of a check that passes, for the scheduler (whether to run it inline) and the trace:
// every member's record, or the reduction's two records per step (log2 n steps).
int64_t check_bytes(int64_t members) {
  if (members <= kPointToPointMembers) return static_cast<int64_t>(sizeof(Record)) * members;
  int64_t steps = 0;
  while ((int64_t{1} << steps) < members) ++steps;
  return 2 * static_cast<int64_t>(sizeof(Record)) * steps;
}

// "ranks 0, 2, 3 issued add(...); rank 1 issued full(...)": members grouped by what they said.
std::string group_by_text(const std::vector<int64_t>& ranks, const std::vector<std::string>& texts,
                          std::string_view verb = "issued") {
  std::vector<std::pair<std::string, std::vector<int64_t>>> groups;
  for (size_t m = 0; m < texts.size(); ++m) {
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& p) { return p.first == texts[m]; });
    if (g == groups.end()) groups.push_back({texts[m], {ranks[m]}});
    else g->second.push_back(ranks[m]);
  }
  std::string out;
  for (const auto& [text, members] : groups) {
    if (!out.empty()) out += "; ";
    out += members.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < members.size(); ++i) out += (i ? ", " : "") + std::to_string(members[i]);
    out += (verb == ":" ? ": " : " " + std::string(verb) + " ") + text;
  }
  return out;
}

// What a member says about the first op that differs: its description, and its parts if any.
std::string mismatch_text(const NotedOp& op) {
  std::string text = op.description();
  if (op.op->parts.empty()) return text;
  text += kPartsBegin;
  for (size_t i = 0; i < op.op->parts.size(); ++i) text += (i ? std::string(1, kPartSeparator) : "") + op.op->parts[i];
  return text;
}

struct SplitText {
  std::string head;
  bool has_parts = false;
  std::vector<std::string> parts;
};

SplitText split_text(const std::string& text) {
  SplitText r;
  const size_t begin = text.find(kPartsBegin);
  r.head = text.substr(0, begin);
  if (begin == std::string::npos) return r;
  r.has_parts = true;
  for (size_t at = begin + 1;;) {
    const size_t end = text.find(kPartSeparator, at);
    r.parts.push_back(text.substr(at, end == std::string::npos ? end : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return r;
}

// Members issued the same call over different entries (a checkpoint's tensors): how many entries
// differ and, grouped by member, the first of them; a few lines whatever the number of entries.
std::string parts_difference(const std::vector<int64_t>& ranks, const std::vector<SplitText>& said) {
  size_t longest = 0;
  for (const SplitText& t : said) longest = std::max(longest, t.parts.size());
  const auto entry = [&](const SplitText& t, size_t i) {
    return i < t.parts.size() ? t.parts[i] : concat("(none: ", t.parts.size(), " entries)");
  };
  int64_t differ = 0;
  size_t first = longest;
  for (size_t i = 0; i < longest; ++i)
    for (const SplitText& t : said)
      if (entry(t, i) != entry(said[0], i)) {
        ++differ;
        first = std::min(first, i);
        break;
      }
  std::vector<std::string> counts, firsts;
  for (const SplitText& t : said) {
    counts.push_back(concat(t.parts.size(), " entries"));
    firsts.push_back(entry(t, first));
  }
  std::string text = concat(said[0].head, ": ", differ, " of ", longest, " entries differ, the first at entry ", first);
  if (std::any_of(said.begin(), said.end(), [&](const SplitText& t) { return t.parts.size() != longest; }))
    text += " (" + group_by_text(ranks, counts, ":") + ")";
  // One line per group of members: "  ranks 0, 2: w1 (4, 4) float32 (S(0)) on placement(...)".
  std::string lines = group_by_text(ranks, firsts, ":");
  for (size_t at = 0; (at = lines.find("; ", at)) != std::string::npos;) lines.replace(at, 2, "\n  ");
  return text + ":\n  " + lines;
}

// Records differ. Every member holds the same records, so all take this path together and make
// the same exchanges; every member throws the same message.
[[noreturn]] void report_mismatch(Communicator& comm, const CheckRequest& s, const std::vector<Record>& records) {
  const std::vector<int64_t>& ranks = s.ranks;
  const int64_t n = comm.size();
  std::vector<int64_t> counts(n);
  for (int64_t m = 0; m < n; ++m) counts[m] = static_cast<int64_t>(records[m].pending);
  std::vector<int64_t> mine(s.pending.size());
  for (size_t i = 0; i < s.pending.size(); ++i) mine[i] = static_cast<int64_t>(s.pending[i].hash);
  std::vector<int64_t> displs = displacements(counts);
  std::vector<int64_t> hashes(displs.back() + counts.back());
  comm.all_gather_v(mine.data(), hashes.data(), counts, DType::kInt64);

  // The first pending index where some member has another op, or none.
  const int64_t longest = *std::max_element(counts.begin(), counts.end());
  int64_t first = -1;
  for (int64_t i = 0; i < longest && first < 0; ++i)
    for (int64_t m = 0; m < n; ++m)
      if (i >= counts[m] || i >= counts[0] || hashes[displs[m] + i] != hashes[displs[0] + i]) {
        first = i;
        break;
      }
  if (first < 0) {
    // Same recent ops, different history: ranks disagreed before the last check (a hash
    // collision hid it then). Only the counts can be named.
    std::vector<int64_t> seqs(n);
    for (int64_t m = 0; m < n; ++m) seqs[m] = static_cast<int64_t>(records[m].seq);
    throw_error("consistency check", "ranks ", join(ranks), " disagree on the global ops issued before the last ",
                counts[0], ": they issued ", join(seqs), " ops in all, with different digests");
  }
  // Ops are numbered from 1 per rank set; members agreed up to the last check, so their bases match.
  const uint64_t base = records[0].seq - records[0].pending;
  std::string text = first < static_cast<int64_t>(s.pending.size())
                         ? mismatch_text(s.pending[first])
                         : concat("<no op: this rank issued only ", s.seq, " ops>");
  std::vector<SplitText> said;
  for (const std::string& t : all_gather_text(comm, text)) said.push_back(split_text(t));
  const std::string prefix = concat("ranks disagree on global op #", base + first + 1, " on ranks ", join(ranks), ": ");
  // One call over different entries (a member with none has no parts).
  const bool same_call =
      std::all_of(said.begin(), said.end(), [&](const SplitText& t) { return t.head == said[0].head; }) &&
      std::any_of(said.begin(), said.end(), [](const SplitText& t) { return t.has_parts; });
  if (same_call) throw_error("consistency check", prefix, parts_difference(ranks, said));
  std::vector<std::string> heads;
  for (const SplitText& t : said) heads.push_back(t.head);
  throw_error("consistency check", prefix, group_by_text(ranks, heads));
}

// Members issued the same ops, and some found a bad value in their pieces (note_data_error).
// Every member learns each one's (op, index) and message, and all throw the earliest's.
[[noreturn]] void report_data_error(Communicator& comm, const CheckRequest& s) {
  const int64_t n = comm.size();
  const int64_t none = std::numeric_limits<int64_t>::max();
  const int64_t mine[2] = {s.data_error ? static_cast<int64_t>(s.data_error->op) : none,
                           s.data_error ? s.data_error->index : none};
  std::vector<int64_t> all(static_cast<size_t>(2 * n));
  comm.all_gather(mine, all.data(), 2, DType::kInt64);
  const std::vector<std::string> messages = all_gather_text(comm, s.data_error ? s.data_error->message : "");
  int64_t first = 0;
  for (int64_t m = 1; m < n; ++m)
    if (std::pair(all[2 * m], all[2 * m + 1]) < std::pair(all[2 * first], all[2 * first + 1])) first = m;
  throw Error(concat(messages[first], " (found by world rank ", s.ranks[first], "; raised on every rank of ",
                     join(s.ranks), " at their next consistency check)"));
}

}  // namespace

OpIdentity::OpIdentity(std::string d) : description(std::move(d)), hash(hash_text(description)) {}

OpIdentity::OpIdentity(std::string d, std::vector<std::string> p) : description(std::move(d)), parts(std::move(p)) {
  std::string all = description;
  for (const std::string& part : parts) all += kPartSeparator + part;
  hash = hash_text(all);
}

void set_check_mode(CheckMode mode) { table(context("set_check_mode")).mode = mode; }
CheckMode check_mode() { return table(context("check_mode")).mode; }

void note_op(const std::vector<int64_t>& ranks, std::shared_ptr<const OpIdentity> op, const ScalarOperand* scalar) {
  Context& ctx = context("note_op");
  ConsistencyTable& t = table(ctx);
  if (t.mode == CheckMode::kOff) return;
  SPSD_CHECK(op != nullptr, "note_op", "the op identity is null");
  RankSetState& s = state(ctx, t, ranks, "note_op");
  s.restart_if_asked();
  const uint64_t hash = scalar ? mix(op->hash ^ mix(scalar->bits)) : op->hash;
  ++s.seq;
  s.digest = mix(s.digest ^ mix(hash + s.seq));
  if (ranks.size() == 1) return;  // nobody to disagree with
  s.pending.push_back({std::move(op), hash, scalar != nullptr, scalar ? scalar->value : 0.0});
  if (t.mode == CheckMode::kEveryOp || s.pending.size() >= kMaxPendingOps) check_ops(ranks);
}

void note_data_error(const std::vector<int64_t>& ranks, uint64_t op_number, int64_t index, std::string message) {
  if (ranks.size() == 1) throw Error(std::move(message));  // nobody waits for this rank's answer
  Context& ctx = context("note_data_error");
  ConsistencyTable& t = table(ctx);
  if (t.mode == CheckMode::kOff) return;  // no check would carry it (docs/operators.md)
  RankSetState& s = state(ctx, t, ranks, "note_data_error");
  s.restart_if_asked();
  if (!s.data_error || std::pair(op_number, index) < std::pair(s.data_error->op, s.data_error->index))
    s.data_error = DataError{op_number, index, std::move(message)};
}

uint64_t op_number(const std::vector<int64_t>& ranks) {
  Context& ctx = context("op_number");
  ConsistencyTable& t = table(ctx);
  if (t.mode == CheckMode::kOff) return 0;
  RankSetState& s = state(ctx, t, ranks, "op_number");
  s.restart_if_asked();
  return s.seq;
}

namespace {

// The check itself: on the communication stream, or inline when it is idle.
void compare(Context& ctx, RankSetState& s, const CheckRequest& request) {
  const Record mine{request.seq, request.digest, request.pending.size(), request.pending.back().hash,
                    request.data_error ? request.data_error->op : 0};
  std::vector<Record> records;
  try {
    records = differing_records(check_communicator(ctx, s, request.ranks), mine);
  } catch (const Error& e) {
    s.restart.store(true, std::memory_order_release);
    throw_error("consistency check", "ranks ", join(request.ranks), " could not compare their global ops (world rank ",
                ctx.rank, " is at op #", request.seq, ", ", request.pending.back().description(), "): ", e.what());
  }
  // Every member holds the same records here, so all take the same branch below.
  if (records.empty()) {
    if (mine.data_error != 0) report_data_error(*s.comm, request);  // every member found one
    return;
  }
  if (std::all_of(records.begin(), records.end(), [&](const Record& r) { return r.same_ops(mine); }))
    report_data_error(*s.comm, request);
  s.restart.store(true, std::memory_order_release);
  report_mismatch(*s.comm, request, records);
}

}  // namespace

void check_ops(const std::vector<int64_t>& ranks) {
  Context& ctx = context("check_ops");
  ConsistencyTable& t = table(ctx);
  if (t.mode == CheckMode::kOff) return;
  poll_value_checks(false);  // a bad value a device kernel found by now rides on this check
  RankSetState& s = state(ctx, t, ranks, "check_ops");
  s.restart_if_asked();
  if (s.pending.empty() || ranks.size() == 1) return;
  // The check is communication like any other: it goes to the stream in program order, with
  // what this rank noted so far (the rank goes on noting while it waits there).
  auto request = std::make_shared<const CheckRequest>(
      CheckRequest{ranks, s.seq, s.digest, std::move(s.pending), std::move(s.data_error)});
  s.pending.clear();
  s.data_error.reset();
  issue_comm({"consistency check", {}, {}, [&ctx, &s, request] { compare(ctx, s, *request); },
              check_bytes(static_cast<int64_t>(ranks.size()))});
}

}  // namespace spsd::detail
