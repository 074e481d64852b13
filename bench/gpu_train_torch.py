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
                    cross-entropy in float32"""
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


def ms_since(t):
    return (time.perf_counter() - t) * 1e3


def bench(sizes, batch, steps, fused, autocast):
    torch.manual_seed(0)
    model = mlp(sizes)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=fused)
    x = torch.randn(batch, sizes[0], device="cuda")
    labels = (torch.arange(batch, device="cuda") * 7) % sizes[-1]
    loss_fn = torch.nn.CrossEntropyLoss()

    def forward():
        ctx = torch.autocast("cuda", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
        with ctx:
            return loss_fn(model(x), labels)

    def step():
        loss = forward()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

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
    print(f"| PyTorch eager, {precision} | batch | step ms | forward ms | backward ms | optimizer ms |\n"
          "|---|---|---|---|---|---|")
    for sizes in ([784, 4096, 4096, 10], [784, 4096, 4096, 4096, 4096, 10]):
        for fused in (False, True):
            s, f, b, o = bench(sizes, 1024, steps, fused, dtype == "bfloat16")
            name = "MLP " + " -> ".join(map(str, sizes)) + (", Adam fused" if fused else "")
            print(f"| {name} | 1024 | {s:.2f} | {f:.2f} | {b:.2f} | {o:.2f} |")


if __name__ == "__main__":
    main()
