// Fake NCCL (the subset of libnccl that the NCCL communicator calls), over threads of one process, for
// testing that communicator's host-side logic without a GPU. Linked instead of libnccl into
// the fake-cuda tests only; device memory and streams are those of fake_cudart.cpp.
//
// What is faked, and how faithfully:
// - Communicators are nonblocking only (config.blocking must be 0, as spsd creates them):
//   ncclCommInitRankConfig returns ncclInProgress and ncclCommGetAsyncError reports ncclInProgress
//   until every member has called init, then for a few more polls at times (so the polling loops
//   run). ncclGroupEnd returns ncclInProgress every other call. ncclCommFinalize is in progress
//   until polled. Members of one communicator must be threads of the process that made the unique
//   id, and, as in NCCL, no two members may use the same device (ncclInvalidUsage).
// - A group is enqueued on its stream (fake_cudart's lazy queue) as one piece of work. When each
//   member's stream runs it, the members meet (a barrier, which gives up with an error after 20 s:
//   members that post different numbers of groups), each computes its results from its peers'
//   posted buffers, they meet again, and only then does each write its results: reading inputs
//   that an earlier event dependency should have produced, or writing too early, shows as wrong data.
// - Collectives are matched in order within a group (kind, count, dtype, root must agree, else the
//   process aborts with a message), sends and receives per peer in order (counts must agree, and
//   every send must be received). Sum, max, min over int32, int64, float32, float64, and bfloat16
//   and float16 (each combine in float, rounded once: core/half.hpp).
// - Checked as NCCL requires (an error result naming the problem, via ncclGetLastError): every
//   buffer is device memory of the communicator's device, the stream is on that device, calls
//   come inside ncclGroupStart/End (spsd always groups), one communicator and stream per group.
//   Overlapping send/recv buffers other than NCCL's in-place forms abort the process.
// - Not faked: more than one process, ncclCommSplit, registered buffers, the real algorithms
//   (reductions here run in member order, exactly), errors raised while work runs.
//
// fake_nccl_force_state (fake_control.hpp) lets the test make every communicator hang or report an
// asynchronous error, to exercise the timeout and abort paths; fake_nccl_take_calls says what a
// thread posted (the dtype a 16-bit reduction went to NCCL in, HalfReduction).
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <spsd/core/half.hpp>

#include "fake_control.hpp"

namespace {

enum Kind { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kSend, kRecv };
const char* const kKindNames[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "send", "recv"};

struct Op {
  Kind kind;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int peer;  // root of a broadcast
};

struct Group {
  explicit Group(int n) : n(n), posted(n) {}
  const int n;
  std::mutex mutex;
  std::condition_variable changed;
  int arrived = 0;
  uint64_t generation = 0;
  std::set<int> ranks, devices;  // members that called init
  std::vector<std::vector<Op>> posted;
  std::atomic<bool> aborted{false};
};

struct Comm {
  std::shared_ptr<Group> group;
  int rank;
  int device;
  int polls = 0;
};

std::mutex registry_mutex;
std::map<std::string, std::shared_ptr<Group>> registry;
std::atomic<int> next_id{0};
std::atomic<int> forced_state{ncclSuccess};
std::atomic<int> aborts{0};

thread_local int depth = 0;
thread_local std::vector<Op> pending;
thread_local Comm* pending_comm = nullptr;
thread_local cudaStream_t pending_stream = nullptr;
thread_local int group_ends = 0;
thread_local ncclResult_t group_error = ncclSuccess;  // the first refused call of the open group
thread_local std::string last_error;
thread_local std::vector<FakeNcclCall> posted_calls;  // fake_nccl_take_calls

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "FAKE NCCL: %s\n", what.c_str());
  std::abort();
}

ncclResult_t refuse(ncclResult_t result, std::string what) {
  last_error = "fake NCCL: " + std::move(what);
  if (depth > 0 && group_error == ncclSuccess) group_error = result;
  return result;
}

size_t size_of(ncclDataType_t t) {
  switch (t) {
    case ncclUint8: return 1;  // bool
    case ncclBfloat16: case ncclFloat16: return 2;
    case ncclInt32: case ncclFloat32: return 4;
    case ncclInt64: case ncclFloat64: return 8;
    default: return 0;  // not used by spsd: refused
  }
}

template <class T>
void reduce_into(T* acc, const T* x, size_t n, ncclRedOp_t op) {
  for (size_t i = 0; i < n; ++i)
    acc[i] = op == ncclSum ? T(acc[i] + x[i]) : op == ncclMax ? std::max(acc[i], x[i]) : std::min(acc[i], x[i]);
}
void reduce_into(void* acc, const void* x, size_t n, ncclDataType_t t, ncclRedOp_t op) {
  switch (t) {
    case ncclFloat32: return reduce_into(static_cast<float*>(acc), static_cast<const float*>(x), n, op);
    case ncclFloat64: return reduce_into(static_cast<double*>(acc), static_cast<const double*>(x), n, op);
    case ncclInt32: return reduce_into(static_cast<int32_t*>(acc), static_cast<const int32_t*>(x), n, op);
    case ncclInt64: return reduce_into(static_cast<int64_t*>(acc), static_cast<const int64_t*>(x), n, op);
    case ncclBfloat16:
      return reduce_into(static_cast<spsd::bfloat16*>(acc), static_cast<const spsd::bfloat16*>(x), n, op);
    case ncclFloat16: return reduce_into(static_cast<spsd::float16*>(acc), static_cast<const spsd::float16*>(x), n, op);
    default: die("unexpected dtype");
  }
}

bool overlap(const void* a, size_t an, const void* b, size_t bn) {
  auto x = static_cast<const char*>(a), y = static_cast<const char*>(b);
  return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

// All members of the group meet here; gives up (aborting the process) when some never come.
void meet(Group& g, int me) {
  std::unique_lock lock(g.mutex);
  const uint64_t generation = g.generation;
  if (++g.arrived == g.n) {
    g.arrived = 0;
    ++g.generation;
    g.changed.notify_all();
    return;
  }
  if (!g.changed.wait_for(lock, std::chrono::seconds(20), [&] { return g.generation != generation; }))
    die("member " + std::to_string(me) + " waited 20 s for its peers in a group: they posted different groups");
}

// Runs when member `me`'s stream reaches its group.
void execute(const std::shared_ptr<Group>& g, int me, const std::vector<Op>& ops) {
  if (g->aborted) return;  // NCCL drops the work of an aborted communicator
  g->posted[me] = ops;
  meet(*g, me);
  std::vector<std::pair<void*, std::vector<char>>> writes;
  std::map<int, size_t> next_send;  // per peer: index in its posted ops of the next send to me
  size_t my_collective = 0;
  for (const Op& o : ops) {
    const size_t es = size_of(o.type);
    const auto* send = static_cast<const char*>(o.send);
    if (o.kind == kSend) continue;
    if (o.kind == kRecv) {
      const std::vector<Op>& theirs = g->posted[o.peer];
      size_t& k = next_send[o.peer];
      while (k < theirs.size() && !(theirs[k].kind == kSend && theirs[k].peer == me)) ++k;
      if (k == theirs.size()) die("member " + std::to_string(me) + " receives from " + std::to_string(o.peer) + ", which sends it nothing more");
      if (theirs[k].count != o.count || theirs[k].type != o.type) die("send/recv count or dtype mismatch");
      const auto* from = static_cast<const char*>(theirs[k].send);
      writes.push_back({o.recv, std::vector<char>(from, from + o.count * es)});
      ++k;
      continue;
    }
    // The my_collective-th collective of every member.
    std::vector<const Op*> peers(g->n);
    for (int m = 0; m < g->n; ++m) {
      size_t seen = 0;
      for (const Op& x : g->posted[m])
        if (x.kind != kSend && x.kind != kRecv && seen++ == my_collective) {
          peers[m] = &x;
          break;
        }
      if (!peers[m] || peers[m]->kind != o.kind || peers[m]->type != o.type || peers[m]->count != o.count ||
          peers[m]->op != o.op || peers[m]->peer != o.peer)
        die(std::string("collective mismatch: member ") + std::to_string(me) + " calls " + kKindNames[o.kind] +
            " of " + std::to_string(o.count) + ", member " + std::to_string(m) + " something else");
    }
    ++my_collective;
    const size_t bytes = o.count * es;
    std::vector<char> out;
    switch (o.kind) {
      case kAllReduce:
        if (o.send != o.recv && overlap(o.send, bytes, o.recv, bytes)) die("all_reduce: partly overlapping buffers");
        out.assign(static_cast<const char*>(peers[0]->send), static_cast<const char*>(peers[0]->send) + bytes);
        for (int m = 1; m < g->n; ++m) reduce_into(out.data(), peers[m]->send, o.count, o.type, o.op);
        break;
      case kReduceScatter: {
        const size_t offset = me * bytes;
        if (overlap(o.send, g->n * bytes, o.recv, bytes) && static_cast<const char*>(o.recv) != send + offset)
          die("reduce_scatter: overlapping buffers that are not NCCL's in-place form (recv = send + rank * count)");
        out.assign(static_cast<const char*>(peers[0]->send) + offset, static_cast<const char*>(peers[0]->send) + offset + bytes);
        for (int m = 1; m < g->n; ++m)
          reduce_into(out.data(), static_cast<const char*>(peers[m]->send) + offset, o.count, o.type, o.op);
        break;
      }
      case kAllGather:
        if (overlap(o.send, bytes, o.recv, g->n * bytes) && send != static_cast<const char*>(o.recv) + me * bytes)
          die("all_gather: overlapping buffers that are not NCCL's in-place form (send = recv + rank * count)");
        for (int m = 0; m < g->n; ++m)
          out.insert(out.end(), static_cast<const char*>(peers[m]->send), static_cast<const char*>(peers[m]->send) + bytes);
        break;
      case kBroadcast:
        if (o.send != o.recv && overlap(o.send, bytes, o.recv, bytes)) die("broadcast: partly overlapping buffers");
        out.assign(static_cast<const char*>(peers[o.peer]->send), static_cast<const char*>(peers[o.peer]->send) + bytes);
        break;
      default: break;
    }
    writes.push_back({o.recv, std::move(out)});
  }
  // Every send of mine must be received: count them against each peer's receives from me.
  std::map<int, int> sends, received;
  for (const Op& o : ops)
    if (o.kind == kSend) ++sends[o.peer];
  for (int m = 0; m < g->n; ++m)
    for (const Op& x : g->posted[m])
      if (x.kind == kRecv && x.peer == me) ++received[m];
  if (sends != received) die("member " + std::to_string(me) + ": its sends and its peers' receives from it differ");
  meet(*g, me);  // every member has read its inputs: results may be written now
  for (auto& [dst, bytes] : writes)
    if (!bytes.empty()) std::memcpy(dst, bytes.data(), bytes.size());
}

ncclResult_t post(Op o, ncclComm_t handle, cudaStream_t stream) {
  auto* c = reinterpret_cast<Comm*>(handle);
  if (!c) return refuse(ncclInvalidArgument, "null communicator");
  if (depth == 0) return refuse(ncclInvalidUsage, "a call outside ncclGroupStart/End (spsd always groups)");
  if (pending_comm && pending_comm != c) return refuse(ncclInvalidUsage, "two communicators in one group (unsupported by the fake)");
  if (pending_stream && pending_stream != stream) return refuse(ncclInvalidUsage, "two streams in one group");
  const size_t es = size_of(o.type);
  if (es == 0) return refuse(ncclInvalidArgument, "unsupported dtype");
  if (fake_cuda_stream_device(stream) != c->device)
    return refuse(ncclInvalidUsage, "a stream of device " + std::to_string(fake_cuda_stream_device(stream)) +
                                        " for a communicator on device " + std::to_string(c->device));
  const int n = c->group->n;
  const size_t send_count = o.kind == kReduceScatter ? n * o.count : o.count;
  const size_t recv_count = o.kind == kAllGather ? n * o.count : o.count;
  if (o.kind != kRecv && !(o.kind == kBroadcast && o.peer != c->rank)) {
    const int d = fake_cuda_device_of(o.send, send_count * es);
    if (d != -2 && d != c->device)
      return refuse(ncclInvalidArgument, std::string(kKindNames[o.kind]) + ": the send buffer is not memory of device " + std::to_string(c->device));
  }
  if (o.kind != kSend) {
    const int d = fake_cuda_device_of(o.recv, recv_count * es);
    if (d != -2 && d != c->device)
      return refuse(ncclInvalidArgument, std::string(kKindNames[o.kind]) + ": the receive buffer is not memory of device " + std::to_string(c->device));
  }
  if ((o.kind == kSend || o.kind == kRecv || o.kind == kBroadcast) && (o.peer < 0 || o.peer >= n))
    return refuse(ncclInvalidArgument, "peer or root out of range");
  pending_comm = c;
  pending_stream = stream;
  pending.push_back(o);
  posted_calls.push_back({kKindNames[o.kind], o.type, o.count});
  return ncclSuccess;
}

}  // namespace

void fake_nccl_force_state(ncclResult_t state) { forced_state = state; }
int fake_nccl_aborts() { return aborts; }
std::vector<FakeNcclCall> fake_nccl_take_calls() { return std::exchange(posted_calls, {}); }

extern "C" {

const char* ncclGetErrorString(ncclResult_t r) {
  static const char* const text[] = {"no error", "unhandled cuda error", "unhandled system error", "internal error",
                                     "invalid argument", "invalid usage", "remote process exited or there was a network error",
                                     "NCCL operation in progress"};
  return r >= 0 && r < 8 ? text[r] : "unknown result";
}
const char* ncclGetLastError(ncclComm_t) { return last_error.c_str(); }
ncclResult_t ncclGetVersion(int* version) {
  *version = 22800;
  return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  std::snprintf(id->internal, sizeof id->internal, "fake-nccl %d %d", static_cast<int>(getpid()), next_id++);
  return ncclSuccess;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int n, ncclUniqueId id, int rank, ncclConfig_t* config) {
  if (!config || config->blocking != 0) return refuse(ncclInvalidUsage, "the fake supports nonblocking communicators only");
  int pid = -1;
  if (std::sscanf(id.internal, "fake-nccl %d", &pid) != 1 || pid != static_cast<int>(getpid()))
    return refuse(ncclInvalidUsage, "a unique id from another process: the fake runs within one process");
  if (rank < 0 || rank >= n) return refuse(ncclInvalidArgument, "rank out of range");
  int device = -1;
  cudaGetDevice(&device);
  std::shared_ptr<Group> g;
  {
    std::lock_guard lock(registry_mutex);
    std::shared_ptr<Group>& entry = registry[std::string(id.internal)];
    if (!entry) entry = std::make_shared<Group>(n);
    g = entry;
  }
  {
    std::lock_guard lock(g->mutex);
    if (g->n != n) return refuse(ncclInvalidArgument, "members disagree on the size");
    if (g->ranks.count(rank)) return refuse(ncclInvalidUsage, "rank " + std::to_string(rank) + " joined twice");
    if (g->devices.count(device))
      return refuse(ncclInvalidUsage, "Duplicate GPU detected: two members on device " + std::to_string(device));
    g->ranks.insert(rank);  // a refused member never joins: the others' init does not complete
    g->devices.insert(device);
  }
  *comm = reinterpret_cast<ncclComm_t>(new Comm{g, rank, device});
  return ncclInProgress;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t handle, ncclResult_t* state) {
  auto* c = reinterpret_cast<Comm*>(handle);
  if (!c) return refuse(ncclInvalidArgument, "null communicator");
  if (forced_state != ncclSuccess) {
    *state = static_cast<ncclResult_t>(forced_state.load());
    return ncclSuccess;
  }
  bool everyone;
  {
    std::lock_guard lock(c->group->mutex);
    everyone = static_cast<int>(c->group->ranks.size()) == c->group->n;
  }
  *state = !everyone || ++c->polls % 3 ? ncclInProgress : ncclSuccess;
  return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclInProgress; }
ncclResult_t ncclCommDestroy(ncclComm_t c) {
  delete reinterpret_cast<Comm*>(c);
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t handle) {
  auto* c = reinterpret_cast<Comm*>(handle);
  if (c) c->group->aborted = true;
  ++aborts;
  delete c;
  return ncclSuccess;
}
ncclResult_t ncclGroupStart() {
  ++depth;
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
  if (depth == 0) return refuse(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--depth > 0) return ncclSuccess;
  const ncclResult_t result = std::exchange(group_error, ncclSuccess);
  if (pending_comm && !pending.empty() && result == ncclSuccess) {
    std::shared_ptr<Group> g = pending_comm->group;
    const int me = pending_comm->rank;
    fake_cuda_enqueue(pending_stream, [g, me, ops = std::move(pending)] { execute(g, me, ops); });
  }
  pending.clear();
  pending_comm = nullptr;
  pending_stream = nullptr;
  if (result != ncclSuccess) return result;  // as NCCL: the group fails, nothing of it runs
  return ++group_ends % 2 ? ncclInProgress : ncclSuccess;
}
ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
  return post({kAllReduce, s, r, n, t, op, 0}, c, st);
}
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                               cudaStream_t st) {
  return post({kReduceScatter, s, r, n, t, op, 0}, c, st);
}
ncclResult_t ncclAllGather(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st) {
  return post({kAllGather, s, r, n, t, ncclSum, 0}, c, st);
}
ncclResult_t ncclBroadcast(const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st) {
  return post({kBroadcast, s, r, n, t, ncclSum, root}, c, st);
}
ncclResult_t ncclSend(const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  return post({kSend, s, nullptr, n, t, ncclSum, peer}, c, st);
}
ncclResult_t ncclRecv(void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  return post({kRecv, nullptr, r, n, t, ncclSum, peer}, c, st);
}

}  // extern "C"
