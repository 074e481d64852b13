#!/usr/bin/env python3
"""PyTorch eager beside bench/gpu_train on the same GPU: the same MLPs (784 -> 4096 -> 4096 -> 10
and 784 -> 4096 x4 -> 10), batch 1024, Adam, cross-entropy; the whole step (forward, zero_grad,
backward, step, loss.item()) and each phase ended by a synchronize; medians over steps after
warm-up, host clock. Adam runs PyTorch's default implementation (foreach on CUDA) and, on a second
line, fused=True. The flags match bench/gpu_train's:
  (none)            float32, TF32 off
  --tf32            float32 parameters, TF32 matmuls (torch.backends.cuda.matmul.allow_tf32)
  --dtype bfloat16  float32 parameters, the forward (and so its backward) under
                    torch.autocast("cuda", dtype=torch.bfloat16): Linear in bfloat16,
                    cross-entropy in float32
  --gpt             instead of the MLPs, bench/gpu_train --gpt's character GPT (examples/08_gpt's
                    model): 4 pre-norm blocks of dim 512, 8 heads, context 256, vocabulary 96,
                    batch 32; nn.Embedding, nn.LayerNorm, bias-free q/k/v nn.Linear,
                    F.scaled_dot_product_attention(is_causal=True), exact nn.GELU, an untied
                    bias-free head; cross-entropy in float32
  --gpt --compile   bench/gpu_train --gpt --compile's host-bound GPT (2 blocks, dim 128, 4 heads,
                    context 64, batch 32): the whole step eagerly and with the model under
                    torch.compile(mode="reduce-overhead") (CUDA graphs), medians after 3 warm-ups
  --profile         instead of the timings, one step (default Adam) after 3 warm-ups under
                    torch.profiler (CPU and CUDA activities): its key_averages table sorted by
                    CUDA time (row_limit 25), then the step's kernels by self device time as a
                    markdown table (the 12 longest), beside bench/gpu_train --profile's per-op table"""
import contextlib
import statistics
import sys
import time

import torch


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).cuda()


class Block(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.q, self.k, self.v = (torch.nn.Linear(dim, dim, bias=False) for _ in range(3))
        self.o = torch.nn.Linear(dim, dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, e = x.shape
        n = self.ln1(x)
        split = lambda y: y.view(b, t, self.heads, e // self.heads).transpose(1, 2)
        a = torch.nn.functional.scaled_dot_product_attention(split(self.q(n)), split(self.k(n)), split(self.v(n)),
                                                             is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, e))
        return x + self.mlp(self.ln2(x))


class Gpt(torch.nn.Module):
    def __init__(self, vocab, context, dim, heads, layers):
        super().__init__()
        self.table = torch.nn.Embedding(vocab, dim)
        self.positions = torch.nn.Parameter(torch.randn(context, dim) * 0.01)
        self.blocks = torch.nn.Sequential(*(Block(dim, heads) for _ in range(layers)))
        self.lnf = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        return self.head(self.lnf(self.blocks(self.table(tokens) + self.positions[: tokens.shape[1]])))


def ms_since(t):
    return (time.perf_counter() - t) * 1e3


def mlp_problem(sizes, batch):
    model = mlp(sizes)
    x = torch.randn(batch, sizes[0], device="cuda")
    labels = (torch.arange(batch, device="cuda") * 7) % sizes[-1]
    return model, x, labels


# bench/gpu_train --gpt's tokens: the same arithmetic sequences.
def gpt_problem(vocab, context, dim, heads, layers, batch):
    model = Gpt(vocab, context, dim, heads, layers).cuda()
    i = torch.arange(batch * context, device="cuda")
    return model, ((i * 31 + 7) % vocab).view(batch, context), ((i * 17 + 3) % vocab).view(batch, context)


# A problem's optimizer, its forward (with the loss) and its whole training step.
def training(problem, fused, autocast):
    torch.manual_seed(0)
    model, x, labels = problem()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=fused)
    loss_fn = torch.nn.CrossEntropyLoss()

    def forward():
        ctx = torch.autocast("cuda", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
        with ctx:
            out = model(x)
        return loss_fn(out.float().flatten(0, -2), labels.flatten())

    def step():
        loss = forward()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    return opt, forward, step


# Device time of an event (torch 2.4 renamed cuda_ to device_; the old name warns).
def self_device_us(event):
    return event.self_device_time_total if hasattr(event, "self_device_time_total") else event.self_cuda_time_total


def profile(name, problem, autocast):
    _, _, step = training(problem, False, autocast)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        step()
        torch.cuda.synchronize()
    averages = prof.key_averages()
    try:
        table = averages.table(sort_by="cuda_time_total", row_limit=25)
    except (AttributeError, KeyError):  # torch without the cuda_ names
        table = averages.table(sort_by="device_time_total", row_limit=25)
    print(f"\n{name}: torch.profiler, one step after 3 warm-ups\n{table}")
    # The kernels themselves (device events), which the rows of aten ops above also count.
    kernels = [e for e in averages if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA]
    kernels.sort(key=self_device_us, reverse=True)
    total = sum(self_device_us(e) for e in kernels)
    print(f"{name}: device time in kernels {total / 1e3:.2f} ms over {sum(e.count for e in kernels)} launches")
    print(f"| torch kernel, {name} | calls | total ms | % of kernels | mean us |\n|---|--:|--:|--:|--:|")
    for e in kernels[:12]:
        us = self_device_us(e)
        label = e.key if len(e.key) <= 70 else e.key[:67] + "..."
        print(f"| {label.replace('|', '/')} | {e.count} | {us / 1e3:.3f} | {100 * us / max(total, 1e-9):.1f} | "
              f"{us / e.count:.1f} |")


def bench(problem, steps, fused, autocast):
    opt, forward, step = training(problem, fused, autocast)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    whole, fwd, bwd, upd = [], [], [], []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        whole.append(ms_since(t))
    for _ in range(steps):
        t = time.perf_counter()
        loss = forward()
        torch.cuda.synchronize()
        fwd.append(ms_since(t))
        t = time.perf_counter()
        opt.zero_grad()
        loss.backward()
        torch.cuda.synchronize()
        bwd.append(ms_since(t))
        t = time.perf_counter()
        opt.step()
        torch.cuda.synchronize()
        upd.append(ms_since(t))
    return [statistics.median(v) for v in (whole, fwd, bwd, upd)]


def main():
    args = sys.argv[1:]
    quick = "--quick" in args
    tf32 = "--tf32" in args
    dtype = args[args.index("--dtype") + 1] if "--dtype" in args else "float32"
    if dtype not in ("float32", "bfloat16") or (tf32 and dtype != "float32"):
        sys.exit(f"gpu_train_torch.py: --dtype float32|bfloat16, --tf32 with float32 only; got {args}")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    steps = 3 if quick else 10
    precision = ("bfloat16 autocast, float32 parameters" if dtype == "bfloat16"
                 else "float32, TF32 matmuls" if tf32 else "float32, TF32 off")
    print(f"PyTorch {torch.__version__} eager on {torch.cuda.get_device_name()}; {precision}, Adam")
    if "--gpt" in args and "--compile" in args:
        print("| PyTorch, GPT 2 blocks, dim 128, context 64, batch 32 (host-bound) | step ms |\n|---|---|")
        for name, compiled in (("eager", False), ('torch.compile(mode="reduce-overhead")', True)):
            try:
                torch.manual_seed(0)
                model, x, labels = gpt_problem(96, 64, 128, 4, 2, 32)
                run = torch.compile(model, mode="reduce-overhead") if compiled else model
                opt = torch.optim.Adam(model.parameters(), lr=1e-3)
                loss_fn = torch.nn.CrossEntropyLoss()

                def step():
                    loss = loss_fn(run(x).float().flatten(0, -2), labels.flatten())
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    return loss.item()

                for _ in range(3):
                    step()
                times = []
                for _ in range(steps):
                    t = time.perf_counter()
                    step()
                    times.append(ms_since(t))
                print(f"| {name} | {statistics.median(times):.3f} |")
            except Exception as e:  # torch.compile needs its compiler toolchain (triton) on the machine
                print(f"| {name} | failed: {type(e).__name__}: {str(e).splitlines()[0][:80]} |")
        return
    if "--gpt" in args:
        problems = [("GPT 4 blocks, dim 512, context 256", 32, lambda: gpt_problem(96, 256, 512, 8, 4, 32))]
    else:
        problems = [("MLP " + " -> ".join(map(str, sizes)), 1024, lambda sizes=sizes: mlp_problem(sizes, 1024))
                    for sizes in ([784, 4096, 4096, 10], [784, 4096, 4096, 4096, 4096, 10])]
    if "--profile" in args:
        for name, batch, problem in problems:
            profile(f"{name}, batch {batch}", problem, dtype == "bfloat16")
        return
    print(f"| PyTorch eager, {precision} | batch | step ms | forward ms | backward ms | optimizer ms |\n"
          "|---|---|---|---|---|---|")
    for name, batch, problem in problems:
        for fused in (False, True):
            s, f, b, o = bench(problem, steps, fused, dtype == "bfloat16")
            print(f"| {name}{', Adam fused' if fused else ''} | {batch} | {s:.2f} | {f:.2f} | {b:.2f} | {o:.2f} |")


if __name__ == "__main__":
    main()
