"""Writes oracle_second_order.json: PyTorch (float64) double backward.

Each case is a scalar program f of its inputs (named; the same program is
written in the library's ops in tests/gradients/second_order.rs, by the
case's name), a direction v (one array per input) and the Hessian-vector
product H v = d/dx <grad f(x), v>, computed with
torch.autograd.grad(..., create_graph=True) and a second grad. Every op is
composed with a nonlinearity (s(x) = tanh(x) * x), so that the rules of
linear ops meet a curvature. Run with any PyTorch 2.x:
`python3 tests/data/make_oracle_second_order.py`; fixed seed.
"""

import json

import torch
import torch.nn.functional as F

torch.manual_seed(3)
DT = torch.float64


def randn(*shape):
    return torch.randn(*shape, dtype=DT)


def s(x):
    return torch.tanh(x) * x


def arr(t):
    return {"shape": list(t.shape), "data": [float(v) for v in t.detach().reshape(-1).tolist()]}


cases = []


def case(name, inputs, fn):
    leaves = [t.clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    grads = torch.autograd.grad(out, leaves, create_graph=True)
    vs = [randn(*t.shape) for t in inputs]
    inner = sum((g * v).sum() for g, v in zip(grads, vs))
    hvps = torch.autograd.grad(inner, leaves, allow_unused=True)
    hvps = [torch.zeros_like(t) if h is None else h for t, h in zip(inputs, hvps)]
    cases.append({
        "name": name,
        "inputs": [arr(t) for t in inputs],
        "value": float(out.detach()),
        "grads": [arr(g) for g in grads],
        "v": [arr(v) for v in vs],
        "hvp": [arr(h) for h in hvps],
    })


def away(t, points, gap=0.1):
    for p in points:
        near = (t - p).abs() < gap
        t = torch.where(near, p + torch.sign(t - p + 1e-300) * gap * 2, t)
    return t


case("arithmetic", [randn(3, 4), randn(4), torch.rand(3, 1, dtype=DT) + 1],
     lambda a, b, c: s((a * b + b) / c - a).sum())
x = randn(2, 5)
pos = torch.rand(2, 5, dtype=DT) * 1.5 + 0.5
for name, f in [("sigmoid", torch.sigmoid), ("tanh", torch.tanh), ("exp", torch.exp),
                ("gelu", lambda x: F.gelu(x, approximate="tanh")), ("silu", F.silu), ("softplus", F.softplus),
                ("pow3", lambda x: x ** 3.0)]:
    case(f"unary_{name}", [x], lambda x, f=f: s(f(x)).sum())
for name, f in [("log", torch.log), ("sqrt", torch.sqrt), ("pow2p5", lambda x: x ** 2.5)]:
    case(f"unary_{name}", [pos], lambda x, f=f: s(f(x)).sum())
kinked = away(away(x, [0.0]), [-0.5, 0.7], 0.05)
for name, f in [("relu", F.relu), ("abs", torch.abs), ("leaky_relu", lambda x: F.leaky_relu(x, 0.1)),
                ("clamp", lambda x: torch.clamp(x, -0.5, 0.7))]:
    case(f"unary_{name}", [kinked], lambda x, f=f: s(f(x) * f(x)).sum())
x = randn(3, 4)
case("sum_axis", [x], lambda x: s(s(x).sum(1)).sum())
case("mean_axis", [x], lambda x: s(s(x).mean(-1, keepdim=True)).sum())
case("max_axis", [x], lambda x: s(s(x).amax(1)).sum())
case("cumsum", [x], lambda x: s(torch.cumsum(s(x), 1)).sum())
case("matmul", [randn(3, 4), randn(4, 2)], lambda a, b: s(a @ b).sum())
case("matmul_broadcast", [randn(2, 3, 4), randn(4, 2)], lambda a, b: s(a @ b).sum())
case("bmm", [randn(2, 3, 4), randn(2, 4, 2)], lambda a, b: s(torch.bmm(a, b)).sum())
x3 = randn(2, 3, 4)
case("transpose", [x3], lambda x: s(s(x).transpose(-1, -2)).sum())
case("reshape", [x3], lambda x: s(s(x).reshape(6, 4)).sum())
case("slice", [x3], lambda x: s(s(x)[0:2, 1:3, 1:3]).sum())
case("concat", [x3], lambda x: s(torch.cat([s(x), torch.tanh(s(x))], 1)).sum())
case("softmax", [x], lambda x: s(torch.softmax(x, -1)).sum())
case("log_softmax", [x], lambda x: s(torch.log_softmax(x, 0)).sum())
case("mse", [x, randn(3, 4)], lambda x, t: F.mse_loss(s(x), t))
case("cross_entropy", [x], lambda x: F.cross_entropy(s(x), torch.tensor([1, 0, 3])))
case("embedding", [randn(3, 4)], lambda t: s(F.embedding(torch.tensor([2, 0, 2, 1]), t)).sum())
case("layer_norm", [randn(2, 3, 4), randn(4), randn(4)], lambda x, g, b: s(F.layer_norm(x, (4,), g, b, 1e-5)).sum())
mask = torch.tensor([[True, False, True, False], [False, False, True, True], [True, True, False, False]])
case("where", [x, randn(4)], lambda a, b: s(torch.where(mask, a, b)).sum())
# Cases added later go below, so the random draws above stay the same.
case("index_select", [randn(3, 4)], lambda x: s(torch.index_select(s(x), 1, torch.tensor([3, 0, 3, 2]))).sum())
gather_index = torch.tensor([[2, 0, 1, 2], [0, 0, 2, 1]])
case("gather", [randn(3, 4)], lambda x: s(torch.gather(s(x), 0, gather_index)).sum())
image = randn(1, 2, 5, 5)
case("max_pool2d", [image], lambda x: s(F.max_pool2d(s(x), 2, 2, 1)).sum())
case("avg_pool2d", [image], lambda x: s(F.avg_pool2d(s(x), 3, 2, 1)).sum())
case("conv2d", [randn(2, 2, 5, 4), randn(3, 2, 3, 2), randn(3)],
     lambda x, w, b: s(F.conv2d(x, w, b, stride=(2, 1), padding=(1, 1))).sum())
stats = (torch.tensor([0.1, -0.2, 0.3], dtype=DT), torch.tensor([1.5, 0.5, 1.0], dtype=DT))
case("batch_norm", [randn(4, 3, 2, 2), randn(3), randn(3)],
     lambda x, g, b: s(F.batch_norm(x, stats[0].clone(), stats[1].clone(), g, b, training=True, eps=1e-5)).sum())
case("batch_norm_eval", [randn(4, 3, 2, 2), randn(3), randn(3)],
     lambda x, g, b: s(F.batch_norm(x, stats[0], stats[1], g, b, training=False, eps=1e-5)).sum())
case("group_norm", [randn(2, 4, 3), randn(4), randn(4)], lambda x, g, b: s(F.group_norm(x, 2, g, b, 1e-5)).sum())
case("conv2d_groups", [randn(2, 4, 4, 3), randn(6, 2, 2, 2), randn(6)],
     lambda x, w, b: s(F.conv2d(x, w, b, padding=(1, 0), groups=2)).sum())
case("permute", [randn(2, 3, 4)], lambda x: s(s(x).permute(2, 0, 1)).sum())
case("conv2d_dilated", [randn(1, 2, 5, 4), randn(2, 2, 2, 2)],
     lambda x, w: s(F.conv2d(s(x), w, None, padding=(0, 1), dilation=(2, 1))).sum())

# Third order: a physics-informed loss on u'' (two nested gradients in the
# constant input x) differentiated in the network's parameters.
w1, b1, w2, b2 = randn(1, 4), randn(4), randn(4, 1), randn(1)
x = torch.linspace(0.1, 0.9, 5, dtype=DT).reshape(5, 1)
f = torch.sin(torch.pi * x) * torch.pi ** 2
params = [t.clone().requires_grad_(True) for t in (w1, b1, w2, b2)]
xs = x.clone().requires_grad_(True)
u = torch.tanh(xs @ params[0] + params[1]) @ params[2] + params[3]
du = torch.autograd.grad(u.sum(), xs, create_graph=True)[0]
ddu = torch.autograd.grad(du.sum(), xs, create_graph=True)[0]
pinn_loss = ((ddu + f) ** 2).mean()
pinn_grads = torch.autograd.grad(pinn_loss, params, allow_unused=True)
pinn_grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, pinn_grads)]
pinn = {"params": [arr(t) for t in (w1, b1, w2, b2)], "x": arr(x), "f": arr(f),
        "loss": float(pinn_loss.detach()), "grads": [arr(g) for g in pinn_grads]}

# Cases added after the third-order one draw after it, so earlier data stays.
case("attention", [randn(2, 4, 3), randn(2, 5, 3), randn(2, 5, 2)],
     lambda q, k, v: s(F.scaled_dot_product_attention(q, k, v, is_causal=True)).sum())
case("cross_entropy_3d", [randn(2, 3, 4)],
     lambda x: F.cross_entropy(s(x).reshape(-1, 4), torch.tensor([[1, 0, 3], [2, 2, 0]]).reshape(-1)))
case("embedding_2d_ids", [randn(3, 4)], lambda t: s(F.embedding(torch.tensor([[2, 0], [2, 1]]), t)).sum())


def packed_attention(qkv, heads):
    """Causal attention over qkv [B, T, 3 * heads * d], as nanoGPT splits c_attn."""
    b, t, columns = qkv.shape
    q, k, v = (x.reshape(b, t, heads, -1).transpose(1, 2) for x in qkv.split(columns // 3, dim=-1))
    # The math kernel: the CPU flash kernel has no double backward.
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return y.transpose(1, 2).reshape(b, t, columns // 3)


case("attention_packed", [randn(2, 4, 12)], lambda x: s(packed_attention(x, 2)).sum())

doc = {"format": "grad-second-order/1", "seed": 3, "dtype": "f64",
       "generator": f"make_oracle_second_order.py, torch {torch.__version__}, float64", "cases": cases}
with open(__file__.replace("make_oracle_second_order.py", "oracle_second_order.json"), "w") as f:
    f.write("{\n")
    for key in ("format", "seed", "dtype", "generator"):
        f.write(f"  {json.dumps(key)}: {json.dumps(doc[key])},\n")
    f.write(f'  "pinn_third_order": {json.dumps(pinn)},\n')
    f.write('  "cases": [\n')
    f.write(",\n".join("    " + json.dumps(c) for c in cases))
    f.write("\n  ]\n}\n")
print(f"wrote {len(cases)} cases")
