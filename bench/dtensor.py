#!/usr/bin/env python3
"""PyTorch DTensor on CPU/gloo, the other side of bench/dispatch and bench/boxing: the same
shapes, conversions and timing, each figure next to a baseline taken in the same run.

  torchrun --standalone --nproc-per-node N bench/dtensor.py [--quick] [--baseline-only]

for N = 1, 2, 4 (tools/gpu-check runs the three on the GPU machine, with /opt/torch/.venv).
gloo, CPU float32 tensors, DeviceMesh("cpu", ...) of all ranks (and the 2x2 mesh [[0, 1], [2, 3]]
on 4 ranks), torch.set_num_threads(1) per rank as spsd's runs use OPENBLAS_NUM_THREADS=1, autograd
off (spsd has none). --quick: fewer repetitions, for checking the script.

1. Per-op host overhead, bench/dispatch's cases on (4, 4) tensors: add of two Shard(0)
   DTensors and matmul Shard(0) x Replicate (neither communicates), then `.to_local()`,
   against the same torch op on the local shards. Warm-up, then repetitions of back-to-back
   calls, a barrier before each repetition; a repetition's per-call time is the max over
   ranks; medians over repetitions, in wall clock and in thread CPU time.
2. redistribute, bench/boxing's conversions of a square float32 matrix of 1, 16 and 64 MiB
   (512^2, 2048^2, 4096^2): `x.redistribute(mesh, dst).to_local()`, complete on return,
   against the raw torch.distributed collective doing the same movement (all_gather_into_tensor,
   all_reduce, reduce_scatter_tensor, all_to_all_single, a slice copy; the table names the one
   used, as gloo lacks some in some versions). Both sides allocate their result per call.
   Warm-up, then repetitions that time each side once, alternating which goes first, a barrier
   before every call; a call's time is the max over ranks; medians. Each side's result is
   checked once against the expected values; a mismatch makes the exit status 1.
Without DTensor (torch < 2.0, or --baseline-only) only the baselines run and the tables say n/a.
"""
import contextlib
import importlib
import logging
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist


def first(*names):  # the first "module:attribute" of names that imports, else None
    for name in names:
        module, attribute = name.split(":")
        try:
            return getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError):
            pass
    return None


# DTensor is public in torch.distributed.tensor from 2.5 on, in torch.distributed._tensor before
# (where Partial was once placement_types._Partial); torch < 2.0 has neither.
DT_FROM = next((m for m in ("torch.distributed.tensor", "torch.distributed._tensor") if first(m + ":DTensor")), None)
DTensor, DeviceMesh, Replicate, Shard, Partial = (
    first(f"{DT_FROM}:{a}", f"{DT_FROM}.placement_types:_{a}") if DT_FROM else None
    for a in ("DTensor", "DeviceMesh", "Replicate", "Shard", "Partial"))
AsyncCollectiveTensor = first("torch.distributed._functional_collectives:AsyncCollectiveTensor") or ()
CommDebugMode = first("torch.distributed.tensor.debug:CommDebugMode", "torch.distributed._tensor.debug:CommDebugMode")

QUICK = "--quick" in sys.argv
MIB = 1 << 20


def over_ranks(values, op):  # element-wise max or min over ranks
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=op)
    return t.tolist()


def median_of_max(samples):  # one sample per repetition -> median over repetitions of the max over ranks
    return statistics.median(over_ranks(samples, dist.ReduceOp.MAX))


def agree(ok):  # the same verdict on every rank, so that all ranks take the same branch
    return over_ranks([float(ok)], dist.ReduceOp.MIN)[0] == 1.0


def probe(fn):  # has this gloo the collective? Unsupported ones raise on every rank before communicating
    try:
        fn()
    except (RuntimeError, NotImplementedError, AttributeError, ValueError):
        return agree(False)
    return agree(True)


def finished(t):  # redistribute waits by default (async_op=False); this covers versions that might not
    return t.wait() if isinstance(t, AsyncCollectiveTensor) else t


def op_name(key):  # CommDebugMode's keys are ops or Python functions, depending on the version
    return getattr(key, "__name__", str(key)).replace(".default", "").rsplit(".", 1)[-1]


def main():
    if set(sys.argv[1:]) - {"--quick", "--baseline-only"}:
        sys.exit("usage: torchrun --standalone --nproc-per-node N bench/dtensor.py [--quick] [--baseline-only]")
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    n, me = dist.get_world_size(), dist.get_rank()
    use_dtensor = None not in (DTensor, DeviceMesh, Replicate, Shard, Partial) and "--baseline-only" not in sys.argv
    # Older DTensor logs a warning on every CPU Shard(i)->Shard(j) (its gloo all-to-all fallback).
    for name in ("torch.distributed.tensor._collective_utils", "torch.distributed._tensor._collective_utils"):
        logging.getLogger(name).setLevel(logging.ERROR)
    has = {"ag": probe(lambda: dist.all_gather_into_tensor(torch.empty(2 * n), torch.ones(2))),
           "rs": probe(lambda: dist.reduce_scatter_tensor(torch.empty(1), torch.ones(n))),
           "a2a": probe(lambda: dist.all_to_all_single(torch.empty(n), torch.ones(n)))}
    meshes = {}
    if use_dtensor:  # every rank creates every mesh (and group), in the same order
        meshes[1] = DeviceMesh("cpu", torch.arange(n))
        if n == 4:
            meshes[2] = DeviceMesh("cpu", torch.arange(4).reshape(2, 2))
    if me == 0:
        cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
        print(f"bench/dtensor: torch {torch.__version__}, {n} rank(s), gloo, CPU float32, torch threads per rank "
              f"{torch.get_num_threads()} (set_num_threads(1), as OPENBLAS_NUM_THREADS=1 for spsd), autograd off; "
              f"host {socket.gethostname()}, {os.cpu_count()} CPUs ({cpu}){', --quick' if QUICK else ''}")
        if use_dtensor:
            print(f"bench/dtensor: DTensor from {DT_FROM}, partial placement {Partial.__name__}()")
        else:
            why = "--baseline-only" if Partial else "neither torch.distributed.tensor nor ._tensor has DTensor"
            print(f"bench/dtensor: DTensor NOT RUN ({why}); only the baselines run")
        print(f"bench/dtensor: this gloo has all_gather_into_tensor {has['ag']}, reduce_scatter_tensor {has['rs']}, "
              f"all_to_all_single {has['a2a']}\n", flush=True)
    with torch.no_grad():
        dispatch(n, me, meshes)
        ok = redistribute(n, me, meshes, has)
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


def dispatch(n, me, meshes):
    assert 4 % n == 0, "the (4, 4) cases need 1, 2 or 4 ranks"
    reps, calls = (5, 200) if QUICK else (20, 2000)
    torch.manual_seed(1 + me)  # shards differ per rank; the replicated operand is the same everywhere
    la, lb = torch.randn(4 // n, 4), torch.randn(4 // n, 4)
    torch.manual_seed(3)
    lw = torch.randn(4, 4)
    cases = [["add", "S(0) + S(0)", lambda: la + lb], ["matmul", "S(0) x R", lambda: torch.matmul(la, lw)]]
    if meshes:
        a, b = (DTensor.from_local(t, meshes[1], [Shard(0)], run_check=False) for t in (la, lb))
        w = DTensor.from_local(lw, meshes[1], [Replicate()], run_check=False)
        cases[0].append(lambda: (a + b).to_local())
        cases[1].append(lambda: torch.matmul(a, w).to_local())
        assert all(torch.equal(c[3](), c[2]()) for c in cases), "DTensor op differs from the local op"

    def per_call_us(fn):
        for _ in range(calls):  # warm-up: sharding propagation cache, allocator
            fn()
        wall, cpu = [], []
        for _ in range(reps):
            dist.barrier()
            c0, t0 = time.thread_time(), time.perf_counter()
            for _ in range(calls):
                fn()
            wall.append((time.perf_counter() - t0) / calls * 1e6)
            cpu.append((time.thread_time() - c0) / calls * 1e6)
        return median_of_max(wall), median_of_max(cpu)

    rows = [(c, per_call_us(c[2]), per_call_us(c[3]) if meshes else None) for c in cases]
    if me == 0:
        print(f"per-op overhead, (4, 4) float32: {reps} repetitions of {calls} calls, median of the max over ranks; "
              "overhead = DTensor op - local op, both Python calls of the same expression\n")
        print("| op | layouts | ranks | DTensor op (us) | local torch op (us) | overhead (us) "
              "| overhead in CPU time (us) |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for c, lo, g in rows:
            d = ["n/a"] * 3 if g is None else [f"{g[0]:.3f}", f"{g[0] - lo[0]:.3f}", f"{g[1] - lo[1]:.3f}"]
            print(f"| {c[0]} | {c[1]} | {n} | {d[0]} | {lo[0]:.3f} | {d[1]} | {d[2]} |")
        print(flush=True)


def redistribute(n, me, meshes, has):
    if n == 4:  # the 2x2 mesh [[0, 1], [2, 3]]: rank r sits at (r // 2, r % 2)
        rows = [dist.new_group([0, 1]), dist.new_group([2, 3])]  # along mesh axis 1
        cols = [dist.new_group([0, 2]), dist.new_group([1, 3])]  # along mesh axis 0

    def gather(x, group=None):  # members' 2-d x concatenated along dim 0 (the output form gloo accepts)
        size = dist.get_world_size(group)
        out = torch.empty(size * x.shape[0], x.shape[1])
        if has["ag"]:
            dist.all_gather_into_tensor(out, x, group=group)
        else:
            dist.all_gather(list(out.chunk(size)), x, group=group)
        return out

    def p_to_r(x):  # all_reduce works in place: reduce a copy, as DTensor's functional all_reduce does
        dist.all_reduce(out := x.clone())
        return out

    def p_to_s0(x):
        if not has["rs"]:
            return p_to_r(x).chunk(n)[me].clone()
        dist.reduce_scatter_tensor(out := torch.empty(x.shape[0] // n, x.shape[1]), x)
        return out

    def s0_to_s1(x):
        br, bc = x.shape[0], x.shape[1] // n
        if not has["a2a"]:
            return gather(x)[:, me * bc:(me + 1) * bc].contiguous()
        send = x.view(br, n, bc).transpose(0, 1).contiguous()  # piece m: my rows x m's columns
        dist.all_to_all_single(recv := torch.empty_like(send), send)  # piece m: m's rows x my columns
        return recv.view(n * br, bc)  # already in row order

    ag = "all_gather_into_tensor" if has["ag"] else "all_gather to a list"
    cases = [("S(0)->B", ("S0",), ("R",), gather, ag),
             ("S(1)->B", ("S1",), ("R",), lambda x: torch.cat(gather(x).chunk(n), dim=1), ag + " + cat"),
             ("P->B", ("P",), ("R",), p_to_r, "clone + all_reduce"),
             ("P->S(0)", ("P",), ("S0",), p_to_s0, "reduce_scatter_tensor" if has["rs"] else "all_reduce + slice copy"),
             ("S(0)->S(1)", ("S0",), ("S1",), s0_to_s1, "pack + all_to_all_single" if has["a2a"] else ag + " + slice"),
             ("B->S(0)", ("R",), ("S0",), lambda x: x.chunk(n)[me].clone(), "slice copy"),
             ("(S(0),S(1))->(B,B)", ("S0", "S1"), ("R", "R"),  # columns along mesh axis 1, then rows along axis 0
              lambda x: gather(torch.cat(gather(x, rows[me // 2]).chunk(2), dim=1), cols[me % 2]),
              f"{ag} + cat on mesh rows, then {ag} on columns")]
    make = {"S0": lambda: Shard(0), "S1": lambda: Shard(1), "R": lambda: Replicate(), "P": lambda: Partial()}

    def box(t, spec):  # this rank's piece of t under spec, chunked evenly as DTensor does
        shape, coord = ((2, 2), (me // 2, me % 2)) if len(spec) == 2 else ((n,), (me,))
        for d, p in enumerate(spec):
            if p[0] == "S":
                t = t.chunk(shape[d], dim=int(p[1]))[coord[d]]
        return t.contiguous()

    budget, min_reps = (0.15, 3) if QUICK else (2.0, 5)
    if me == 0:
        print(f"redistribute, float32 square matrix: median over repetitions of the max over ranks; ratio = raw / "
              f"DTensor (> 1: DTensor faster); repetitions fewer where an entry would take over {budget} s\n")
        print("| conversion | size | ranks | DTensor median (ms) | raw collective median (ms) | ratio raw/DTensor "
              "| raw collective (baseline) | DTensor's collectives | reps |")
        print("|---|---:|---:|---:|---:|---:|---|---|---:|", flush=True)
    all_ok = True
    for name, src, dst, raw, raw_label in cases:
        if len(src) == 2 and n != 4:
            continue
        for size in (MIB, 16 * MIB, 64 * MIB):
            side = int((size // 4) ** 0.5)
            full = (torch.arange(side * side) % 4093).to(torch.float32).view(side, side)  # sums stay exact
            partial = src[0] == "P"
            local = full + me if partial else box(full, src)
            want = box(full * n + n * (n - 1) // 2 if partial else full, dst)
            sides = [lambda: raw(local)]
            ok, comms = torch.equal(sides[0](), want), "n/a"
            if meshes:
                mesh = meshes[len(src)]
                x = DTensor.from_local(local, mesh, [make[p]() for p in src], run_check=False)
                target = [make[p]() for p in dst]
                sides.append(lambda: finished(x.redistribute(mesh, target).to_local()))
                try:  # a failure loses this entry's DTensor side only (it raises on every rank, as a rule)
                    with CommDebugMode() if CommDebugMode else contextlib.nullcontext() as cm:  # like boxing's "plan"
                        ok = torch.equal(sides[1](), want) and ok
                    if CommDebugMode:
                        comms = ", ".join(f"{op_name(k)} x{v}" for k, v in cm.get_comm_counts().items() if v) or "none"
                except Exception as e:
                    print(f"bench/dtensor rank {me}: {name} at {size // MIB} MiB: {e!r}", file=sys.stderr)
                    comms = f"DTensor FAILED: {type(e).__name__} (see stderr)"
                if not agree(not comms.startswith("DTensor FAILED")):  # then time the baseline alone, exit 1
                    sides.pop()
                    all_ok, comms = False, comms if comms.startswith("DTensor FAILED") else "DTensor FAILED elsewhere"
            if not agree(ok):
                all_ok = False
                if me == 0:
                    print(f"| {name} | {size // MIB} MiB | {n} | MISMATCH: a result differs from the expected values |")
                continue
            warmup, most = (3, 100) if size <= MIB else (1, 30) if size <= 16 * MIB else (1, 15)
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(warmup):  # with the barriers of a timed repetition; it also sizes the repetitions
                for f in sides:
                    dist.barrier()
                    f()
            per_rep = median_of_max([(time.perf_counter() - t0) / warmup])  # the same on every rank
            reps = min(max(int(budget / per_rep), min_reps), max(3, most // 10) if QUICK else most)
            times = [[0.0] * reps for _ in sides]
            for i in range(reps):
                for k in range(len(sides)):
                    j = (i + k) % len(sides)  # alternate which side goes first
                    dist.barrier()
                    t0 = time.perf_counter()
                    sides[j]()
                    times[j][i] = time.perf_counter() - t0
            ms = [median_of_max(t) * 1e3 for t in times]
            if me == 0:
                dt, ratio = (f"{ms[1]:.3f}", f"{ms[0] / ms[1]:.2f}") if len(ms) == 2 else ("n/a", "n/a")
                print(f"| {name} | {size // MIB} MiB | {n} | {dt} | {ms[0]:.3f} | {ratio} | {raw_label} | {comms} "
                      f"| {reps} |", flush=True)
    return all_ok


if __name__ == "__main__":
    main()
