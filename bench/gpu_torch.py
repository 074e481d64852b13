#!/usr/bin/env python3
"""PyTorch eager on the same GPU and shapes as bench/gpu: host microseconds per call of add,
matmul and relu on (4, 4) float32 cuda tensors (median of repetitions of back-to-back calls,
the GPU running behind the host, as bench/gpu measures spsd), matmul 4096^3 / 8192^3, and
8192^3 in bfloat16, float16, float32 with TF32 and exact float32, labelled as bench/gpu labels
its GEMM lines (tools/gpu-check pairs them)."""
import statistics
import sys
import time

import torch


def dispatch_us(op, calls, reps=10):
    times = []
    for r in range(reps + 2):
        start = time.perf_counter()
        for _ in range(calls):
            op()
        times.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times[2:])


def matmul_ms(n, reps=10, dtype=torch.float32):
    x = torch.randn(n, n, device="cuda", dtype=dtype)
    y = torch.randn(n, n, device="cuda", dtype=dtype)
    torch.matmul(x, y)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        torch.matmul(x, y)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main():
    quick = "--quick" in sys.argv
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 math, as spsd's default
    calls = 200 if quick else 2000
    a = torch.randn(4, 4, device="cuda")
    c = torch.randn(4, 4, device="cuda")
    print(f"PyTorch {torch.__version__} on {torch.cuda.get_device_name()}")
    print("| PyTorch eager, (4, 4) float | host us per call |\n|---|---|")
    print(f"| add | {dispatch_us(lambda: a + c, calls):.2f} |")
    print(f"| matmul | {dispatch_us(lambda: torch.matmul(a, c), calls):.2f} |")
    print(f"| relu | {dispatch_us(lambda: torch.relu(a), calls):.2f} |")
    for n in (4096, 8192):
        ms = matmul_ms(n, 3 if quick else 10)
        print(f"| torch.matmul {n}^3 float | {ms:.3f} ms | {2 * n ** 3 / (ms * 1e-3) / 1e12:.1f} TFLOP/s |")
    print("\n| GEMM, torch.matmul | ms | TFLOP/s |\n|---|---|---|")
    n = 8192
    for label, dtype, tf32 in (("bfloat16", torch.bfloat16, False), ("float16", torch.float16, False),
                               ("float32 tf32", torch.float32, True), ("float32", torch.float32, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        ms = matmul_ms(n, 3 if quick else 10, dtype)
        print(f"| torch.matmul {n}^3 {label} | {ms:.3f} ms | {2 * n ** 3 / (ms * 1e-3) / 1e12:.1f} TFLOP/s |")
    torch.backends.cuda.matmul.allow_tf32 = False


if __name__ == "__main__":
    main()
