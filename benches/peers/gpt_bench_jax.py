#!/usr/bin/env python3
"""JAX (CPU, float32) W7 of ../WORKLOADS.md: one nanoGPT training step, jit-compiled.

The model is nanoGPT's GPT (GELU tanh, dropout 0, lm_head tied to wte,
LayerNorm eps 1e-5 with weight and bias), nanoGPT's init, random token batches. One jax.jit'd step:
value_and_grad of the mean cross-entropy, clipping by global norm as torch.nn.utils.clip_grad_norm_(1.0)
(scale min(1, 1 / (norm + 1e-6))), then AdamW written by hand as torch.optim.AdamW (lr 1e-3, betas
(0.9, 0.95), eps 1e-8, decay 0.1 on every parameter of dim >= 2, none on the rest); no optax.
Parameters and moments are donated to the step. Threads: XLA's CPU default (all cores).
3 warm-up steps (the first compiles; its time is printed as gpt_compile_s), then the median of
`steps` (default 20) steps, each timed to block_until_ready.

Prints `gpt_step_ms X ms`, `gpt_tokens_per_s X tok/s`, `gpt_compile_s X s`.
Usage: python gpt_bench_jax.py [vocab=65 block=64 n_layer=4 n_head=4 n_embd=128 batch=16 warmup=3 steps=20 seed=0]
"""
import math
import os
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

CFG = dict(vocab=65, block=64, n_layer=4, n_head=4, n_embd=128, batch=16, warmup=3, steps=20, seed=0)
LR, B1, B2, EPS, WD, CLIP = 1e-3, 0.9, 0.95, 1e-8, 0.1, 1.0


def init_params(key, c):
    d, n = c["n_embd"], c["n_layer"]
    keys = iter(jax.random.split(key, 2 + 4 * n))
    normal = lambda shape, std: jax.random.normal(next(keys), shape, jnp.float32) * std  # noqa: E731
    zeros, ones = (lambda k: jnp.zeros((k,), jnp.float32)), (lambda k: jnp.ones((k,), jnp.float32))
    proj = 0.02 / math.sqrt(2 * n)
    blocks = [dict(
        ln_1_w=ones(d), ln_1_b=zeros(d),
        c_attn_w=normal((d, 3 * d), 0.02), c_attn_b=zeros(3 * d),
        attn_proj_w=normal((d, d), proj), attn_proj_b=zeros(d),
        ln_2_w=ones(d), ln_2_b=zeros(d),
        c_fc_w=normal((d, 4 * d), 0.02), c_fc_b=zeros(4 * d),
        mlp_proj_w=normal((4 * d, d), proj), mlp_proj_b=zeros(d),
    ) for _ in range(n)]
    return dict(wte=normal((c["vocab"], d), 0.02), wpe=normal((c["block"], d), 0.02), h=blocks,
                ln_f_w=ones(d), ln_f_b=zeros(d))


def layer_norm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * w + b


def make_loss(c):
    nh = c["n_head"]

    def loss_fn(p, idx, tgt):
        b, t = idx.shape
        d = p["wte"].shape[1]
        hs = d // nh
        x = p["wte"][idx] + p["wpe"][:t]
        causal = jnp.tril(jnp.ones((t, t), bool))
        for blk in p["h"]:
            qkv = layer_norm(x, blk["ln_1_w"], blk["ln_1_b"]) @ blk["c_attn_w"] + blk["c_attn_b"]
            q, k, v = (a.reshape(b, t, nh, hs).transpose(0, 2, 1, 3) for a in jnp.split(qkv, 3, axis=-1))
            att = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(hs))
            att = jax.nn.softmax(jnp.where(causal, att, -jnp.inf), axis=-1)
            y = (att @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
            x = x + y @ blk["attn_proj_w"] + blk["attn_proj_b"]
            h = layer_norm(x, blk["ln_2_w"], blk["ln_2_b"]) @ blk["c_fc_w"] + blk["c_fc_b"]
            x = x + jax.nn.gelu(h, approximate=True) @ blk["mlp_proj_w"] + blk["mlp_proj_b"]
        logits = layer_norm(x, p["ln_f_w"], p["ln_f_b"]) @ p["wte"].T
        logp = jax.nn.log_softmax(logits.reshape(b * t, -1), axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, tgt.reshape(-1, 1), axis=1))

    return loss_fn


def make_step(c, decay):
    loss_fn = make_loss(c)
    tm = jax.tree_util.tree_map

    def step(p, m, v, count, idx, tgt):
        loss, g = jax.value_and_grad(loss_fn)(p, idx, tgt)
        norm = jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree_util.tree_leaves(g)))
        scale = jnp.minimum(1.0, CLIP / (norm + 1e-6))
        g = tm(lambda x: x * scale, g)
        count = count + 1
        m = tm(lambda m_, g_: B1 * m_ + (1 - B1) * g_, m, g)
        v = tm(lambda v_, g_: B2 * v_ + (1 - B2) * g_ * g_, v, g)
        c1, c2 = 1 - B1 ** count, 1 - B2 ** count
        p = tm(lambda p_, m_, v_, wd: p_ * (1 - LR * wd) - LR * (m_ / c1) / (jnp.sqrt(v_ / c2) + EPS), p, m, v, decay)
        return p, m, v, count, loss

    return jax.jit(step, donate_argnums=(0, 1, 2))


def run(c):
    """The median step time and the first step's (compile included), in seconds, and the last loss."""
    key = jax.random.PRNGKey(c["seed"])
    p = init_params(key, c)
    decay = jax.tree_util.tree_map(lambda a: WD if a.ndim >= 2 else 0.0, p)
    m = jax.tree_util.tree_map(jnp.zeros_like, p)
    v = jax.tree_util.tree_map(jnp.zeros_like, p)
    count = jnp.zeros((), jnp.float32)
    step = make_step(c, decay)
    keys = jax.random.split(jax.random.PRNGKey(c["seed"] + 1), 16)
    shape = (c["batch"], c["block"])
    batches = [(jax.random.randint(keys[2 * i], shape, 0, c["vocab"]),
                jax.random.randint(keys[2 * i + 1], shape, 0, c["vocab"])) for i in range(8)]
    first = None
    for k in range(c["warmup"]):
        t0 = time.perf_counter()
        p, m, v, count, loss = step(p, m, v, count, *batches[k % 8])
        loss.block_until_ready()
        if first is None:
            first = time.perf_counter() - t0
    times = []
    for k in range(c["steps"]):
        idx, tgt = batches[(c["warmup"] + k) % 8]
        t0 = time.perf_counter()
        p, m, v, count, loss = step(p, m, v, count, idx, tgt)
        jax.block_until_ready((p, loss))
        times.append(time.perf_counter() - t0)
    return statistics.median(times), first, float(loss)


def main():
    c = dict(CFG)
    for arg in sys.argv[1:]:
        key, value = arg.split("=")
        assert key in c, f"unknown key {key}"
        c[key] = int(value)
    print(f"# jax {jax.__version__} f32, {c}, devices {jax.devices()}, {os.cpu_count()} cpus", flush=True)
    med, first, loss = run(c)
    print(f"# last loss {loss:.4f}")
    print(f"gpt_compile_s {first:.2f} s")
    print(f"gpt_step_ms {med * 1e3:.3f} ms", flush=True)
    print(f"gpt_tokens_per_s {c['batch'] * c['block'] / med:.1f} tok/s", flush=True)


if __name__ == "__main__":
    main()
