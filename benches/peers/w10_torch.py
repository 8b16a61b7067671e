#!/usr/bin/env python3
"""PyTorch's side of W10's second half (../README.md): W7's GPT (gpt_bench_torch.py) with
the forward and loss under torch.autocast("cpu", dtype=torch.bfloat16), its step time, and
how far its loss curve over 200 steps strays from the float32 run from the same start on
the same batches (the largest and the final relative gap, in percent), and the floor of
those gaps (two float32 runs one ulp apart at the start): the figures of grad's `w10` in
benches/figures.rs.

Usage: python w10_torch.py [steps=200]
"""
import statistics
import sys
import time

import torch

from gpt_bench_torch import CFG, GPT, optimizer


def trainer(c, bf16, nudge=False):
    """One training step at a time; with `nudge`, every initial parameter is moved up by
    one ulp (the floor of the gaps: how far two float32 runs drift on their own)."""
    torch.manual_seed(c["seed"])
    model = GPT(c)
    if nudge:
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.nextafter(p, torch.full_like(p, float("inf"))))
    opt = optimizer(model)
    gen = torch.Generator().manual_seed(c["seed"] + 1)
    shape = (c["batch"], c["block"])
    batches = [(torch.randint(c["vocab"], shape, generator=gen), torch.randint(c["vocab"], shape, generator=gen))
               for _ in range(8)]
    k = 0

    def step():
        nonlocal k
        x, y = batches[k % len(batches)]
        k += 1
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()
    return step


def gaps_pct(reference, other, steps):
    """Each step's relative gap between two runs' losses, in percent of the first's."""
    gaps = []
    for _ in range(steps):
        a, b = reference(), other()
        gaps.append(abs(b - a) / a * 100)
    return gaps


def max_after_50(gaps):
    """The largest gap from step 50 on (the last, on a shorter run)."""
    return max(gaps[50:] or gaps[-1:])


def figures(steps=200):
    """Prints W10's figures for W7 (`name value unit` lines)."""
    c = dict(CFG)
    step = trainer(c, bf16=True)
    for _ in range(3):
        step()
    times = []
    start = time.perf_counter()
    while len(times) < 200 and (len(times) < 10 or time.perf_counter() - start < 10):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(f"w10_gpt_bf16_step_ms {med * 1e3:.3f} ms", flush=True)
    print(f"w10_gpt_bf16_tokens_per_s {c['batch'] * c['block'] / med:.1f} tok/s", flush=True)
    gaps = gaps_pct(trainer(c, bf16=False), trainer(c, bf16=True), steps)
    print(f"w10_loss_gap_max_pct {max(gaps):.6f} %", flush=True)
    print(f"w10_loss_gap_max_after_50_pct {max_after_50(gaps):.6f} %", flush=True)
    print(f"w10_loss_gap_mean_pct {statistics.fmean(gaps):.6f} %", flush=True)
    print(f"w10_loss_gap_final_pct {gaps[-1]:.6f} %", flush=True)
    drift = gaps_pct(trainer(c, bf16=False), trainer(c, bf16=False, nudge=True), steps)
    print(f"w10_f32_drift_max_after_50_pct {max_after_50(drift):.6f} %", flush=True)
    print(f"w10_f32_drift_mean_pct {statistics.fmean(drift):.6f} %", flush=True)


def main():
    steps = 200
    for arg in sys.argv[1:]:
        key, value = arg.split("=")
        assert key == "steps", f"unknown key {key}"
        steps = int(value)
    print(f"# torch {torch.__version__} autocast bf16, {CFG}, {torch.get_num_threads()} threads", flush=True)
    figures(steps)


if __name__ == "__main__":
    main()
