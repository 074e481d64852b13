#pragma once
// Cross-rank consistency (DESIGN.md 3.5): every rank of a placement must issue the same global
// ops, in the same order, with the same metadata. Each op is folded into a running digest of
// its rank set; ranks compare digests before the rank set communicates, so a diverging rank
// gets spsd::Error instead of a mismatched collective and a hang.
//
// The environment variable SPSD_CHECK (read once per runtime, at the first note_op) selects:
//   unset or "on": note every op, compare before the rank set communicates and after every
//                  256 ops noted without a check;
//   "op":          compare after every op (slow; names the exact op where ranks diverge);
//   "off":         no checking at all: unsafe, a diverging rank then hangs or corrupts data
//                  until the timeout. For measurements only.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spsd::detail {

// What one global op was: its description (op, attributes, input shapes, dtypes, layouts)
// and a hash of that description. Built once per distinct op and shared (cached by dispatch).
// A call over many entries (a checkpoint's tensors) passes them as parts: the description
// then names the call only, the hash covers the parts too, and ranks that disagree are told
// the first entry that differs and how many do, not every entry on one line.
struct OpIdentity {
  explicit OpIdentity(std::string description);
  OpIdentity(std::string description, std::vector<std::string> parts);
  std::string description;
  std::vector<std::string> parts;
  uint64_t hash;
};

// An op's scalar operand (the 0.5 of x * 0.5f): kept out of the cached OpIdentity, since it
// never changes a signature, but compared across ranks all the same (a learning rate that
// differs between ranks would make a B result differ between them).
struct ScalarOperand {
  double value;   // for messages
  uint64_t bits;  // what is compared: the exact operand
};

// Folds op (and its scalar operand, if any) into the digest of the rank set (the calling rank
// must be one of ranks). Cheap: no communication, unless SPSD_CHECK=op asks for a check after
// every op, or 256 ops were noted on the rank set since its last check (then it checks: every
// rank reaches that point alike).
void note_op(const std::vector<int64_t>& ranks, std::shared_ptr<const OpIdentity> op,
             const ScalarOperand* scalar = nullptr);

// Collective over ranks: compares the ops noted since the last check. On a mismatch, throws
// spsd::Error on every rank naming the first op that differs and which ranks issued what; a
// rank that does not arrive within the timeout gives spsd::Error naming the missing ranks.
// Returns at once when nothing was noted since the last check, or ranks has one member.
// Runs on a communicator of its own (never matched with a data collective), and its traffic is
// not counted in comm_stats(). After a mismatch the rank set starts afresh (ops are numbered
// from 1 again), so a program that catches the error can go on.
void check_ops(const std::vector<int64_t>& ranks);

// A bad value that only this rank's pieces hold (an index out of range, op/index_check.hpp),
// found in the op numbered `op_number` on the rank set (op_number() right after its note_op).
// Throwing on this rank alone would leave the others waiting in their next collective, so it
// rides on the rank set's next check: that check's record carries it, and every member then
// throws the same spsd::Error: the message of the earliest op with one, and within it of the
// smallest global index (`index`). A rank set of one member throws at once. The first error
// noted since the last check is kept.
void note_data_error(const std::vector<int64_t>& ranks, uint64_t op_number, int64_t index, std::string message);
// The number of the last op noted on the rank set (0 before the first, or after SPSD_CHECK=off).
uint64_t op_number(const std::vector<int64_t>& ranks);

// SPSD_CHECK's modes; set_check_mode overrides the environment for the calling rank (tests).
enum class CheckMode { kOn, kEveryOp, kOff };
void set_check_mode(CheckMode mode);
CheckMode check_mode();

// The number of ops a rank set may note before note_op checks by itself.
inline constexpr size_t kMaxPendingOps = 256;

// Rank sets up to this size compare their records point-to-point (a timeout names the missing
// members); larger ones reduce the records' bounds (80 bytes, log n steps) and all-gather the
// records only when they differ (under MPI a timeout cannot name the missing members).
inline constexpr int64_t kPointToPointMembers = 8;

}  // namespace spsd::detail
