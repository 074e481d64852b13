#!/usr/bin/env python3
"""PyTorch on the CPU beside bench/train on the same machine: the same two training steps (forward,
cross-entropy, zero_grad, backward, Adam step; the loss is not read), float32, eager:
  MLP  784 -> 1024 -> 10 (relu), batch 128: bench/train's MLP table (examples/07_train_mlp)
  GPT  2 pre-norm blocks of dim 128, 4 heads, context 64, vocabulary 96, batch 16: bench/train's
       GPT table (examples/08_gpt's model): nn.Embedding plus a position table, nn.LayerNorm
       (eps 1e-5), q/k/v/out nn.Linear with biases, causal attention, an exact-gelu MLP of
       width 4 dim, a final nn.LayerNorm and a bias-free untied head
Attention is F.scaled_dot_product_attention(is_causal=True) where PyTorch has it (2.0+), else
the bmm-softmax-bmm it stands for (1.13, Debian 12's python3-torch): scores = q k^T / sqrt(d)
with a -inf upper triangle, softmax, times v.
Time: median over `steps` steps after 3 warm-ups (as bench/train), host clock; one line per
thread count (torch.set_num_threads), 1 up to the machine's cores.
  python3 bench/train_torch.py [--steps 10] [--threads 1,2] [--quick]
  python3 bench/train_torch.py --profile     one GPT step (1 thread, after 3 warm-ups) under
      torch.profiler: the ops by self CPU time as a markdown table, beside bench/train --profile
  python3 bench/train_torch.py --attention   attention alone as bench/attention times it, (1, 8, S,
      64) float32 on 1 thread for S = 64 to 2048, causal off and on: forward, and forward plus
      backward (q, k, v requiring grad), fastest of several calls
PyTorch comes from Debian (apt-get install python3-torch; tools/lib.sh's
spsd_install_bench_packages); no test needs it."""
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

VOCAB, CONTEXT, DIM, HEADS, LAYERS, GPT_BATCH = 96, 64, 128, 4, 2, 16
PIXELS, HIDDEN, CLASSES, MLP_BATCH = 784, 1024, 10, 128


def attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    t = q.shape[-2]
    scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    mask = torch.ones(t, t, dtype=torch.bool).triu(1)
    return torch.matmul(torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1), v)


class Block(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(dim, dim) for _ in range(4))
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, e = x.shape
        n = self.ln1(x)
        split = lambda y: y.view(b, t, self.heads, e // self.heads).transpose(1, 2)
        a = attention(split(self.q(n)), split(self.k(n)), split(self.v(n)))
        x = x + self.o(a.transpose(1, 2).reshape(b, t, e))
        return x + self.mlp(self.ln2(x))


class Gpt(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(VOCAB, DIM)
        self.positions = torch.nn.Parameter(torch.randn(CONTEXT, DIM) * 0.01)
        self.blocks = torch.nn.Sequential(*(Block(DIM, HEADS) for _ in range(LAYERS)))
        self.lnf = torch.nn.LayerNorm(DIM)
        self.head = torch.nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens):
        return self.head(self.lnf(self.blocks(self.table(tokens) + self.positions)))


def gpt_step():
    torch.manual_seed(0)
    model = Gpt()
    x = torch.randint(0, VOCAB, (GPT_BATCH, CONTEXT))
    y = torch.randint(0, VOCAB, (GPT_BATCH, CONTEXT))
    return model, lambda: F.cross_entropy(model(x).flatten(0, 1), y.flatten())


def mlp_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(PIXELS, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES))
    x = torch.rand(MLP_BATCH, PIXELS)
    y = torch.randint(0, CLASSES, (MLP_BATCH,))
    return model, lambda: F.cross_entropy(model(x), y)


def training_step(problem):
    model, loss = problem()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        loss().backward()
        opt.step()

    return step


def median_ms(step, steps):
    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def profile():
    torch.set_num_threads(1)
    step = training_step(gpt_step)
    for _ in range(3):
        step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    events.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events)
    print(f"PyTorch {torch.__version__}, 1 thread: one GPT step under torch.profiler, {total / 1e3:.2f} ms of self "
          f"CPU time (the profiler's own overhead included)")
    print("| torch op | calls | self ms | % | us per call |\n|---|--:|--:|--:|--:|")
    for e in events[:25]:
        us = e.self_cpu_time_total
        print(f"| {e.key} | {e.count} | {us / 1e3:.3f} | {100 * us / total:.1f} | {us / e.count:.1f} |")


def best_ms(call, reps):
    call()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        call()
        best = min(best, (time.perf_counter() - t) * 1e3)
    return best


def attention_table():
    torch.set_num_threads(1)
    print(f"PyTorch {torch.__version__}, 1 thread, attention of (1, 8, S, 64) float32 as bmm-softmax-bmm; "
          "backward: forward and backward less the forward")
    print("| S | causal | forward ms | backward ms | backward / forward |\n|---|---|---|---|---|")
    for s in (64, 128, 512, 1024, 2048):
        q, k, v = (torch.rand(1, 8, s, 64, requires_grad=True) for _ in range(3))
        g = torch.rand(1, 8, s, 64)
        reps = 2 if s >= 2048 else 5 if s >= 1024 else 20
        for causal in (False, True):
            def forward():
                t = q.shape[-2]
                scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
                if causal:
                    scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
                return torch.matmul(torch.softmax(scores, dim=-1), v)

            with torch.no_grad():
                fwd = best_ms(forward, reps)
            both = best_ms(lambda: forward().backward(g), reps)
            print(f"| {s} | {'yes' if causal else 'no'} | {fwd:.2f} | {both - fwd:.2f} | {(both - fwd) / fwd:.2f} |")


def main():
    args = sys.argv[1:]
    if "--profile" in args:
        return profile()
    if "--attention" in args:
        return attention_table()
    steps = 3 if "--quick" in args else int(args[args.index("--steps") + 1]) if "--steps" in args else 10
    cores = os.cpu_count() or 1
    threads = ([int(t) for t in args[args.index("--threads") + 1].split(",")] if "--threads" in args
               else list(range(1, cores + 1)))
    print(f"PyTorch {torch.__version__} eager on the CPU ({cores} cores), float32, Adam; median of {steps} steps")
    print("| threads | MLP step ms | MLP samples/s | GPT step ms | GPT tokens/s |\n|---|---|---|---|---|")
    for n in threads:
        torch.set_num_threads(n)
        mlp = median_ms(training_step(mlp_step), steps)
        gpt = median_ms(training_step(gpt_step), steps)
        print(f"| {n} | {mlp:.2f} | {MLP_BATCH / mlp * 1e3:.0f} | {gpt:.1f} | {GPT_BATCH * CONTEXT / gpt * 1e3:.0f} |")


if __name__ == "__main__":
    main()
