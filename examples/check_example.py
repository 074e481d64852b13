#!/usr/bin/env python3
"""examples/check_example.py NAME COMMAND...: runs example NAME (COMMAND, e.g. tools/mpirun -np 4
build/examples/NAME ARGS...) and checks what it printed, not only its exit status (the examples
suite, examples/meson.build). Prints the output, then what failed; exits 0 only when the example
exited 0 and every check of CHECKS[NAME] holds.

The checks hold on any machine: exact layouts, boxes and byte counts (metadata, the same
everywhere), the examples' own comparisons with a single process ("yes", "(ok)"), and for the
training examples a loss that fell and an accuracy above a bound, never digits that vary with the
BLAS build or timing. They expect 4 ranks, as the suite runs them (11_pipeline_gpt: any count)."""
import math
import re
import subprocess
import sys


def matches(lines, pattern):
    return [m for m in (re.search(pattern, line) for line in lines) if m]


def count(pattern, n):
    """Exactly n lines match pattern."""
    def check(lines):
        got = len(matches(lines, pattern))
        return [] if got == n else [f"{got} lines match /{pattern}/, expected {n}"]
    return check


def numbers(lines, pattern):
    """Group 1 of every line matching pattern, as floats."""
    return [float(m.group(1)) for m in matches(lines, pattern)]


def fell(pattern, at_least=2):
    """The values group 1 of pattern captures, in the order printed: at least at_least of them,
    the last below the first."""
    def check(lines):
        values = numbers(lines, pattern)
        if len(values) < at_least:
            return [f"{len(values)} values match /{pattern}/, expected at least {at_least}"]
        return [] if values[-1] < values[0] else [f"/{pattern}/ did not fall: {values}"]
    return check


def boxes(shape, layouts):
    """For each layout_diagram of shape (its header names the layout), the box each of the 4 ranks
    reports, in rank order (01_placement)."""
    def check(lines):
        found, current = {}, None
        for line in lines:
            header = re.match(rf"shape \({re.escape(shape)}\) as (.*) on placement", line)
            if header:
                current = found.setdefault(header.group(1), [])
            elif current is not None and (box := re.match(r"  rank \d+ reports box \[(.*)\]", line)):
                current.append(box.group(1))
        return [f"layout {layout}: boxes {found.get(layout)}, expected {want}"
                for layout, want in layouts.items() if found.get(layout) != want]
    return check


def predicted_bytes_counted(lines):
    """Every rank's bytes sent and received are those the plan predicted (03)."""
    rows = matches(lines, r"predicted sent/received (\d+)/(\d+) B, counted sent (\d+) B, received (\d+) B")
    bad = [m.group(0) for m in rows if m.group(1, 2) != m.group(3, 4)]
    return ([f"{len(rows)} byte reports, expected 20"] if len(rows) != 20 else []) + [f"differs: {b}" for b in bad]


def gpt_learned(lines):
    """The last loss is below the first logged and below uniform guessing, ln(vocabulary) (08)."""
    vocabulary = numbers(lines, r"vocabulary (\d+)")
    last = numbers(lines, r"last loss ([\d.]+)")
    if len(vocabulary) != 1 or len(last) != 1:
        return [f"found vocabulary {vocabulary} and last loss {last}, expected one of each"]
    bound = math.log(vocabulary[0])
    return [] if last[0] < bound else [f"last loss {last[0]} is not below ln(vocabulary) = {bound:.3f}"]


def above(pattern, bound):
    """Exactly one line matches pattern, its group 1 at least bound."""
    def check(lines):
        values = numbers(lines, pattern)
        return [] if len(values) == 1 and values[0] >= bound else [f"/{pattern}/ gives {values}, expected one >= {bound}"]
    return check


def custom_op_learned(lines):
    """The loss after 30 steps is under half the first (09)."""
    m = matches(lines, r"loss ([\d.]+) -> ([\d.]+) after 30 steps")
    if len(m) != 1:
        return [f"{len(m)} 'loss A -> B after 30 steps' lines, expected 1"]
    first, last = float(m[0].group(1)), float(m[0].group(2))
    return [] if last < first / 2 else [f"loss {first} -> {last}: not under half"]


OK = r"max abs error (vs one process )?\S+ \(ok\)$"  # the examples' own comparison with one process
CHECKS = {
    "01_placement": [boxes("6, 8", {
        "(S(0))": ["0:2, 0:8", "2:4, 0:8", "4:5, 0:8", "5:6, 0:8"],
        "(S(1))": ["0:6, 0:2", "0:6, 2:4", "0:6, 4:6", "0:6, 6:8"],
        "(B)": ["0:6, 0:8"] * 4,
        "(P(sum))": ["0:6, 0:8"] * 4,
        "(S(0), S(1))": ["0:3, 0:4", "0:3, 4:8", "3:6, 0:4", "3:6, 4:8"],
        "(B, S(0))": ["0:3, 0:8", "3:6, 0:8", "0:3, 0:8", "3:6, 0:8"],
        "(S(0), S(0))": ["0:2, 0:8", "2:3, 0:8", "3:5, 0:8", "5:6, 0:8"],
        "(P(sum), S(1))": ["0:6, 0:4", "0:6, 4:8", "0:6, 0:4", "0:6, 4:8"],
    })],
    "02_global_tensor": [count(r": yes$", 5), count(r": NO$", 0)],
    "03_boxing_across_placements": [
        predicted_bytes_counted,
        count(r"equals randn\(\(4, 8\)\) made on this rank alone: yes$", 2),
        # P(sum) of rank 0's 1s and rank 1's 2s, on ranks 2 and 3.
        count(r"^      \[  3\.0000,  3\.0000,  3\.0000\]$", 4),
    ],
    "04_matmul_data_parallel": [
        count(r"^y: shape \(8, 8\), sbp \(S\(0\)\)$", 1),
        count(r"matmul communicated: sent 0 B, received 0 B", 4),
        count(OK, 4),
    ],
    "05_sbp_signatures": [
        count(r"^  6 of 16 combinations are legal as they come", 1),
        count(r"^matmul on .*: chose \(\(S\(1\)\), \(S\(0\)\)\) -> \(P\(sum\)\)$", 1),
        count(r"Y2 \(4, 6\) \(S\(1\)\) on \[2, 3\], local \(4, 3\); " + OK, 2),
    ],
    "06_2d_sbp": [
        count(r"^shape \(4, 8\) as \(S\(1\), S\(0\)\) on placement\(type=\"cpu\", ranks=\[\[0, 1\], \[2, 3\]\]\)$", 1),
        count(r"^-> signature \(\(S\(1\), S\(0\)\), \(S\(0\), B\)\) -> \(P\(sum\), S\(0\)\), 0 B on the busiest rank", 1),
        count(r"y \(P\(sum\), S\(0\)\) -> \(S\(1\), S\(0\)\): sent 32 B, received 32 B", 4),
        count(OK, 8),
    ],
    "07_train_mlp": [
        count(r"^  x \(S\(0\), B\), fc1\.weight \(B, S\(1\)\), fc1\.bias \(B, S\(0\)\), fc2\.weight \(B, S\(0\)\), "
              r"fc2\.bias \(B, B\)$", 1),
        fell(r"^epoch 1 .* loss ([\d.]+)$"),
        above(r"test accuracy ([\d.]+)$", 0.6),
    ],
    "08_gpt": [
        count(r"^  tokens \(S\(0\), B\), attn\.q \(B, S\(1\)\), attn\.out \(B, S\(0\)\), token table \(B, S\(0\)\)$", 1),
        fell(r"^step \d+/20 .* loss ([\d.]+) "),
        gpt_learned,
        count(r"^--- sample \(40 characters\) ---$", 1),
    ],
    "09_custom_op": [
        count(r"--parallel tensor on placement\(type=\"cpu\", ranks=\[0, 1, 2, 3\]\); W1 \(S\(1\)\), b1 \(S\(0\)\), "
              r"W2 \(S\(0\)\)$", 1),
        custom_op_learned,
    ],
    "10_transformer_2d": [fell(r"^step \d+: loss ([\d.]+)$", at_least=3)],
    # Any --parallel, --schedule and rank count (the suite runs three).
    "11_pipeline_gpt": [
        count(r"^  stage 0 on placement", 1),
        fell(r"^step \d+/10 .* loss ([\d.]+) ", at_least=3),
        gpt_learned,
        # The pipelined first step against the unpipelined one: loss and gradients.
        count(r"^  loss [\d.]+ vs [\d.]+, relative difference \S+ \(ok\)$", 1),
        count(r"^  gradients: largest difference \S+ of the largest gradient \(ok\)$", 1),
    ],
}


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in CHECKS:
        sys.exit(f"usage: check_example.py NAME COMMAND..., NAME one of {', '.join(CHECKS)}")
    name, command = sys.argv[1], sys.argv[2:]
    run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    print(run.stdout, end="")
    lines = re.split(r"[\r\n]", run.stdout)  # progress lines end in \r
    problems = [] if run.returncode == 0 else [f"exit status {run.returncode}"]
    for check in CHECKS[name]:
        problems += check(lines)
    for p in problems:
        print(f"check_example {name}: FAILED: {p}")
    if not problems:
        print(f"check_example {name}: the output holds all {len(CHECKS[name])} checks")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
