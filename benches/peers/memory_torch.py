#!/usr/bin/env python3
"""PyTorch (CPU, float32) memory of a GPT training step, to put beside grad's own figures.

The model is gpt_bench_torch.py's, nanoGPT's GPT (GELU tanh, dropout 0, tied lm_head, nanoGPT's
init, SDPA attention); a training step is zero_grad, forward + cross-entropy, backward,
clip_grad_norm_(1.0), AdamW(lr 1e-3, betas (0.9, 0.95), eps 1e-8, decay 0.1 on the 2-D weights,
0 on the rest), on one seeded batch of random int64 tokens.

Configurations: `w7` is W7 of ../WORKLOADS.md (vocab 65, block 64, 4 layers, 4 heads, n_embd 128,
batch 16; 10 timed steps); `deep` is the same with 12 layers and block 256 (3 timed steps).
Modes:
  plain       the training step as above;
  checkpoint  the same with every transformer block wrapped in
              torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False);
  inference   model.eval(), forward only (the loss) of the same batch under torch.inference_mode(),
              20 timed passes.
Each (configuration, mode) runs in a fresh subprocess (this script re-invoked with --child), so its
peak RSS is that case's alone. A case does 3 warm-up steps (or passes), then the timed ones.

Prints, per case, `mem_<config>_<mode>_<figure> value unit` lines:
  params_mib                 bytes of the parameters
  rss_before_steps_mib       VmRSS after building model, optimizer and batch, before any step
                             (AdamW's state is created lazily, by the first step, so it is not in it)
  peak_rss_mib               ru_maxrss of the child at the end
  peak_rss_minus_before_mib  the two above subtracted
  saved_for_backward_mib     bytes of the storages autograd saves for backward in one training step
                             (torch.autograd.graph.saved_tensors_hooks around the forward, each
                             storage counted once, by data_ptr); 0 for inference. Parameters saved
                             by matmuls (weights) are counted too; saved_for_backward_non_param_mib
                             leaves them out. With checkpointing, what a block saves inside the
                             checkpoint is not seen: only what stays saved (block inputs, the head).
  step_ms / forward_ms       median ms per training step / per forward pass
  tokens_per_s               batch * block / median
RSS is the process's, so it holds more than tensors: rss_before_steps is ~690 MiB here, ~530 of it
`import torch` (PyPI's CUDA build) and ~150 the modules (torch._dynamo, sympy, triton) that building
the first torch.optim optimizer imports. Freed tensors go back to glibc's malloc, whose dynamic mmap
threshold keeps much of them in the heap: with MALLOC_MMAP_THRESHOLD_=131072 in the environment (the
children inherit it) the peaks follow the live tensors more closely (deep checkpoint: +106 MiB
over rss_before instead of +374).

Usage: $PEERS_VENV/bin/python memory_torch.py [--configs w7,deep] [--modes plain,checkpoint,inference]
                                              [--threads N]     (default: torch's default threads)
"""
import argparse
import resource
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from gpt_bench_torch import GPT, optimizer  # nanoGPT's model and AdamW groups, the W7 peer's

W7 = dict(vocab=65, block=64, n_layer=4, n_head=4, n_embd=128, batch=16, steps=10, seed=0)
CONFIGS = {"w7": W7, "deep": dict(W7, n_layer=12, block=256, steps=3)}
MODES = ["plain", "checkpoint", "inference"]
WARMUP, INFERENCE_STEPS = 3, 20
MIB = 2 ** 20


class Checkpointed(nn.Module):
    """A transformer block whose activations are recomputed in backward instead of kept."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)


def vm_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024  # kB
    raise RuntimeError("no VmRSS in /proc/self/status")


def emit(name, value, unit):
    print(f"{name} {value:.6g} {unit}", flush=True)


def child(config, mode):
    c = CONFIGS[config]
    torch.manual_seed(c["seed"])
    model = GPT(c)
    if mode == "checkpoint":  # same parameters, same order; only the forward changes
        model.h = nn.ModuleList(Checkpointed(block) for block in model.h)
    opt = optimizer(model)
    gen = torch.Generator().manual_seed(c["seed"] + 1)
    shape = (c["batch"], c["block"])
    x, y = torch.randint(c["vocab"], shape, generator=gen), torch.randint(c["vocab"], shape, generator=gen)
    params_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    before = vm_rss_mib()

    def train_step(forward_hooks=None):
        opt.zero_grad(set_to_none=True)
        if forward_hooks is None:
            loss = model(x, y)
        else:
            with torch.autograd.graph.saved_tensors_hooks(*forward_hooks):
                loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    def forward_only():
        with torch.inference_mode():
            return model(x, y).item()

    if mode == "inference":
        model.eval()
        step, steps = forward_only, INFERENCE_STEPS
    else:
        step, steps = train_step, c["steps"]
    for _ in range(WARMUP):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
    median = statistics.median(times)

    saved, saved_non_param = 0, 0
    if mode != "inference":  # one more training step, with the saved tensors recorded
        storages = {}  # data_ptr -> nbytes

        def pack(t):
            s = t.untyped_storage()
            storages[s.data_ptr()] = s.nbytes()
            return t

        train_step((pack, lambda t: t))
        param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
        saved = sum(storages.values())
        saved_non_param = sum(n for ptr, n in storages.items() if ptr not in param_ptrs)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

    name = f"mem_{config}_{mode}"
    print(f"# {config} {mode}: {sum(p.numel() for p in model.parameters())} parameters, "
          f"{ {k: v for k, v in c.items() if k != 'steps'} }, last loss {loss:.4f}, {len(times)} timed {'passes' if mode == 'inference' else 'steps'}",
          flush=True)
    emit(f"{name}_params_mib", params_bytes / MIB, "MiB")
    emit(f"{name}_rss_before_steps_mib", before, "MiB")
    emit(f"{name}_peak_rss_mib", peak, "MiB")
    emit(f"{name}_peak_rss_minus_before_mib", peak - before, "MiB")
    emit(f"{name}_saved_for_backward_mib", saved / MIB, "MiB")
    emit(f"{name}_saved_for_backward_non_param_mib", saved_non_param / MIB, "MiB")
    emit(f"{name}_{'forward' if mode == 'inference' else 'step'}_ms", median * 1e3, "ms")
    emit(f"{name}_tokens_per_s", c["batch"] * c["block"] / median, "tok/s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="w7,deep")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (default: torch's)")
    ap.add_argument("--child", nargs=2, metavar=("CONFIG", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        child(*args.child)
        return
    configs, modes = args.configs.split(","), args.modes.split(",")
    for name in configs:
        assert name in CONFIGS, f"unknown config {name}"
    for mode in modes:
        assert mode in MODES, f"unknown mode {mode}"
    print(f"# torch {torch.__version__} f32 CPU, threads={torch.get_num_threads()}", flush=True)
    for config in configs:
        for mode in modes:
            cmd = [sys.executable, __file__, "--child", config, mode]
            if args.threads:
                cmd += ["--threads", str(args.threads)]
            subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
