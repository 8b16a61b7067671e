#!/usr/bin/env python3
"""PyTorch (CPU, float32) of examples/char_gpt: the same model, data, split,
optimizer, schedule and evaluation, for the validation loss and tokens/s
the example reports.

The model is gpt_bench_torch.py's, nanoGPT's GPT (GELU tanh, dropout 0,
tied head, nanoGPT's init, SDPA attention); the text is examples/data/rust_book.txt, the first
90% trains and the last 10% validates; a step is a batch of 16 random
windows of 64+1 characters, cross-entropy, backward, clip_grad_norm_(1.0),
AdamW(lr 1e-3 with 100 warm-up steps then cosine to 0, betas (0.9, 0.95),
eps 1e-8, decay 0.1 on the 2-D weights). The validation loss is the mean
over 20 fixed batches of the validation part, every 100 steps. The random
streams differ from grad's (PyTorch's generator), so the curves agree in
distribution, not bit for bit.

Usage: python char_gpt_torch.py [steps=2000] [seed=0] [threads=N]
Prints `step N: train loss X, validation loss Y` lines and
`char_gpt_validation_loss X`, `char_gpt_tokens_per_s X`.
"""
import math
import pathlib
import statistics
import sys
import time

import torch

from gpt_bench_torch import GPT  # nanoGPT's model, the W7 peer's

ROOT = pathlib.Path(__file__).resolve().parents[2]
CFG = dict(block=64, n_layer=4, n_head=4, n_embd=128, batch=16, steps=2000, seed=0, threads=0)


def warmup_cosine(base, step, warmup, total):
    """grad_runtime::schedule::warmup_cosine."""
    if step < warmup:
        return base * (step + 1) / warmup
    if step >= total:
        return 0.0
    return base * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))


def main():
    c = dict(CFG)
    for arg in sys.argv[1:]:
        key, value = arg.split("=")
        assert key in c, f"unknown key {key}"
        c[key] = int(value)
    if c["threads"]:
        torch.set_num_threads(c["threads"])
    text = (ROOT / "examples/data/rust_book.txt").read_text()
    chars = sorted(set(text))
    c["vocab"] = len(chars)
    ids = torch.tensor([chars.index(ch) for ch in text], dtype=torch.long)
    split = len(ids) * 9 // 10
    train, validation = ids[:split], ids[split:]
    torch.manual_seed(c["seed"])
    model = GPT(c)
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(c["seed"] + 1)

    def batch(data, g):
        starts = torch.randint(len(data) - c["block"], (c["batch"],), generator=g)
        x = torch.stack([data[s:s + c["block"]] for s in starts])
        y = torch.stack([data[s + 1:s + c["block"] + 1] for s in starts])
        return x, y

    held = torch.Generator().manual_seed(12345)
    held_out = [batch(validation, held) for _ in range(20)]

    def validation_loss():
        with torch.no_grad():
            return statistics.fmean(model(x, y).item() for x, y in held_out)

    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, {c}", flush=True)
    total, started = 0.0, time.perf_counter()
    for step in range(c["steps"]):
        for group in opt.param_groups:
            group["lr"] = warmup_cosine(1e-3, step, 100, c["steps"])
        x, y = batch(train, gen)
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        total += loss.item()
        if (step + 1) % 100 == 0:
            print(f"step {step + 1}: train loss {total / 100:.4f}, validation loss {validation_loss():.4f}", flush=True)
            total = 0.0
    elapsed = time.perf_counter() - started
    print(f"char_gpt_validation_loss {validation_loss():.4f}")
    print(f"char_gpt_tokens_per_s {c['steps'] * c['batch'] * c['block'] / elapsed:.0f} tok/s")


if __name__ == "__main__":
    main()
