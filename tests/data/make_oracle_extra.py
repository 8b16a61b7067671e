"""Writes oracle_extra.json: PyTorch (float64) values and vector-Jacobian
products for the ops the shared oracle (oracle_cases.json) does not cover.

Same format as oracle_cases.json (see ORACLE_FORMAT.md). Run with any
PyTorch 2.x: `python3 tests/data/make_oracle_extra.py`; it writes the same
bytes for the same torch version (fixed seed).
"""

import json
import math

import torch
import torch.nn.functional as F

torch.manual_seed(2)
DT = torch.float64


def arr(t, name=None, requires_grad=None):
    t = t.detach()
    out = {}
    if name is not None:
        out["name"] = name
    out["shape"] = list(t.shape)
    if t.dtype == torch.int64:
        out["dtype"] = "i64"
        out["data"] = [int(v) for v in t.reshape(-1).tolist()]
    else:
        out["dtype"] = "f64"
        out["data"] = [float(v) for v in t.reshape(-1).tolist()]
    if requires_grad is not None:
        out["requires_grad"] = requires_grad
    return out


def away_from(t, points, gap):
    """Moves every element at least `gap` away from each kink in `points`."""
    for p in points:
        near = (t - p).abs() < gap
        t = torch.where(near, p + torch.sign(t - p + 1e-300) * gap * 2, t)
    return t


cases = []


def case(name, op, args, inputs, fn):
    """inputs: list of (name, tensor, requires_grad)."""
    leaves = []
    for _, t, rg in inputs:
        leaf = t.clone()
        if rg:
            leaf.requires_grad_(True)
        leaves.append(leaf)
    out = fn(*leaves)
    cot = torch.randn(out.shape, dtype=DT)
    diff = [l for (_, _, rg), l in zip(inputs, leaves) if rg]
    grads = torch.autograd.grad(out, diff, grad_outputs=cot)
    grad_names = [n for n, _, rg in inputs if rg]
    cases.append(
        {
            "name": name,
            "kind": "grad",
            "op": op,
            "args": args,
            "inputs": [arr(t, n, rg) for n, t, rg in inputs],
            "output": arr(out),
            "cotangent": arr(cot),
            "grads": [arr(g, n) for n, g in zip(grad_names, grads)],
        }
    )


def randn(*shape):
    return torch.randn(*shape, dtype=DT)


for axis in (0, 1, -1):
    for keepdim in (False, True):
        # Distinct values: the arg-max is unique, as the gradient needs.
        x = randn(3, 4)
        case(f"max_2d_axis{axis}_{'keep' if keepdim else 'nokeep'}", "max", {"axis": axis, "keepdim": keepdim},
             [("x", x, True)], lambda x, a=axis, k=keepdim: torch.amax(x, dim=a, keepdim=k))
case("max_3d_axis1", "max", {"axis": 1, "keepdim": False}, [("x", randn(2, 3, 4), True)],
     lambda x: torch.amax(x, dim=1))

x = away_from(randn(3, 4), [0.0], 0.1)
pos = torch.rand(3, 4, dtype=DT) * 2.5 + 0.5
case("pow_2p5", "pow", {"p": 2.5}, [("x", pos, True)], lambda x: x ** 2.5)
case("pow_neg1p5", "pow", {"p": -1.5}, [("x", pos, True)], lambda x: x ** -1.5)
case("pow_3", "pow", {"p": 3.0}, [("x", randn(3, 4), True)], lambda x: x ** 3.0)
case("abs", "abs", {}, [("x", x, True)], torch.abs)
case("leaky_relu", "leaky_relu", {"slope": 0.01}, [("x", x, True)], lambda x: F.leaky_relu(x, 0.01))
case("gelu_tanh", "gelu", {}, [("x", randn(3, 4) * 2, True)], lambda x: F.gelu(x, approximate="tanh"))
case("silu", "silu", {}, [("x", randn(3, 4) * 2, True)], F.silu)
case("softplus", "softplus", {}, [("x", randn(3, 4) * 3, True)], F.softplus)
clamp_x = away_from(randn(3, 4), [-0.5, 0.5], 0.05)
case("clamp", "clamp", {"lo": -0.5, "hi": 0.5}, [("x", clamp_x, True)], lambda x: torch.clamp(x, -0.5, 0.5))

ids = torch.tensor([4, 0, 4, 2, 1, 4], dtype=torch.int64)
case("embedding_repeated_ids", "embedding", {}, [("table", randn(5, 3), True), ("ids", ids, False)],
     lambda t, i: F.embedding(i, t))

for name, sa, sb in [("matmul_3d_2d", (2, 3, 4), (4, 5)), ("matmul_3d_3d", (2, 3, 4), (2, 4, 5)),
                     ("matmul_2d_3d", (3, 4), (2, 4, 5)), ("matmul_broadcast_4d_3d", (2, 1, 3, 4), (5, 4, 2))]:
    case(name, "matmul", {}, [("a", randn(*sa), True), ("b", randn(*sb), True)], torch.matmul)

case("layer_norm", "layer_norm", {"eps": 1e-5},
     [("x", randn(2, 3, 5), True), ("gamma", randn(5), True), ("beta", randn(5), True)],
     lambda x, g, b: F.layer_norm(x, (5,), g, b, 1e-5))

# A pre-norm transformer block's feed-forward half, in the library's op names:
# out = sum(x + matmul(gelu(matmul(layer_norm(x, gamma, beta), w1) + b1), w2))
case("transformer_mlp_block", "composite", {"eps": 1e-5},
     [("x", randn(2, 3, 4), True), ("gamma", randn(4), True), ("beta", randn(4), True),
      ("w1", randn(4, 6) * 0.5, True), ("b1", randn(6), True), ("w2", randn(6, 4) * 0.5, True)],
     lambda x, g, b, w1, b1, w2: (x + F.gelu(F.layer_norm(x, (4,), g, b, 1e-5) @ w1 + b1, approximate="tanh") @ w2).sum())

# Cases added after the first release go below, so the random draws of the
# cases above (and the file's bytes for them) stay the same.

for axis, keepdim in ((0, False), (-1, True)):
    # Distinct values: the arg-min is unique, as the gradient needs.
    x = torch.randperm(12, dtype=DT).reshape(3, 4) / 4 - 1 + randn(3, 4) * 0.01
    case(f"min_2d_axis{axis}_{'keep' if keepdim else 'nokeep'}", "min", {"axis": axis, "keepdim": keepdim},
         [("x", x, True)], lambda x, a=axis, k=keepdim: torch.amin(x, dim=a, keepdim=k))

# ops/conv.rs and ops/pool.rs: stride, padding, dilation and groups.
for name, xs, ws, stride, padding, dilation, groups in [
    ("conv2d_pad1", (2, 3, 5, 5), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ("conv2d_stride2_pad_rect", (2, 2, 7, 6), (3, 2, 3, 2), (2, 1), (1, 0), (1, 1), 1),
    ("conv2d_dilation2", (1, 2, 7, 7), (3, 2, 3, 3), (1, 2), (2, 1), (2, 2), 1),
    ("conv2d_groups2", (2, 4, 5, 4), (6, 2, 2, 3), (1, 1), (1, 1), (1, 1), 2),
]:
    case(name, "conv2d", {"stride": list(stride), "padding": list(padding), "dilation": list(dilation), "groups": groups},
         [("x", randn(*xs), True), ("w", randn(*ws), True), ("b", randn(ws[0]), True)],
         lambda x, w, b, s=stride, p=padding, d=dilation, g=groups: F.conv2d(x, w, b, s, p, d, g))
for name, kernel, stride, padding in [("pool_3x3_s2_p1", (3, 3), (2, 2), (1, 1)), ("pool_2x3_s1_p0", (2, 3), (1, 2), (1, 0))]:
    # Distinct values: each window's maximum is unique, as the gradient needs.
    x = torch.randperm(2 * 3 * 6 * 5, dtype=DT).reshape(2, 3, 6, 5) / 30 - 3 + randn(2, 3, 6, 5) * 0.001
    args = {"kernel": list(kernel), "stride": list(stride), "padding": list(padding)}
    case("max_" + name, "max_pool2d", args, [("x", x, True)],
         lambda x, k=kernel, s=stride, p=padding: F.max_pool2d(x, k, s, p))
    case("avg_" + name, "avg_pool2d", args, [("x", randn(2, 3, 6, 5), True)],
         lambda x, k=kernel, s=stride, p=padding: F.avg_pool2d(x, k, s, p))
# Indexing and masking (issue 13). Integer inputs carry their shape in an
# argument (`index_shape`, `mask_shape`): a mask is 0/1 integers.
gather_index = torch.tensor([[2, 0, 2, 1], [1, 1, 0, 3], [3, 2, 2, 0]], dtype=torch.int64)
case("gather_axis1_repeats", "gather", {"axis": 1, "index_shape": [3, 4]},
     [("x", randn(3, 4), True), ("indices", gather_index, False)], lambda x, i: torch.gather(x, 1, i))
gather_index = torch.tensor([[[0, 1], [1, 1]], [[1, 0], [0, 0]]], dtype=torch.int64)
case("gather_axis0_3d_smaller_index", "gather", {"axis": 0, "index_shape": [2, 2, 2]},
     [("x", randn(2, 3, 4), True), ("indices", gather_index, False)], lambda x, i: torch.gather(x, 0, i))
select_index = torch.tensor([3, 0, 3, 1, 3], dtype=torch.int64)
case("index_select_axis1_repeats", "index_select", {"axis": 1},
     [("x", randn(2, 4, 3), True), ("indices", select_index, False)], lambda x, i: torch.index_select(x, 1, i))
case("index_select_axis_neg1", "index_select", {"axis": -1},
     [("x", randn(3, 4), True), ("indices", torch.tensor([2, 2, 0], dtype=torch.int64), False)],
     lambda x, i: torch.index_select(x, -1, i))
mask = (torch.rand(3, 4) < 0.5).to(torch.int64)
case("where_same_shapes", "where", {"mask_shape": [3, 4]},
     [("mask", mask, False), ("a", randn(3, 4), True), ("b", randn(3, 4), True)],
     lambda m, a, b: torch.where(m.bool(), a, b))
mask = (torch.rand(2, 1, 4) < 0.5).to(torch.int64)
case("where_broadcast_mask_a_b", "where", {"mask_shape": [2, 1, 4]},
     [("mask", mask, False), ("a", randn(3, 1), True), ("b", randn(4), True)],
     lambda m, a, b: torch.where(m.bool(), a, b))
mask = torch.triu(torch.ones(4, 4, dtype=torch.int64), diagonal=1)
case("masked_fill_causal", "masked_fill", {"mask_shape": [4, 4], "value": -1e4},
     [("x", randn(2, 4, 4), True), ("mask", mask, False)], lambda x, m: x.masked_fill(m.bool(), -1e4))
for axis in (0, -1):
    case(f"cumsum_axis{axis}", "cumsum", {"axis": axis}, [("x", randn(3, 4), True)],
         lambda x, a=axis: torch.cumsum(x, dim=a))
case("cumsum_3d_axis1", "cumsum", {"axis": 1}, [("x", randn(2, 3, 4), True)], lambda x: torch.cumsum(x, dim=1))


# Stop-gradient: x · stop(x) · y.
case("mul_detach", "mul_detach", {}, [("x", randn(3, 4), True), ("y", randn(3, 4), True)],
     lambda x, y: x * x.detach() * y)


def batch_norm_case(name, shape, train):
    """Batch norm with its running statistics as constant inputs; the
    statistics after the call (updated in training) are in the args."""
    c = shape[1]
    x, gamma, beta = randn(*shape), randn(c), randn(c)
    mean, var = randn(c) * 0.1, torch.rand(c, dtype=DT) + 0.5
    after_mean, after_var = mean.clone(), var.clone()
    F.batch_norm(x, after_mean, after_var, gamma, beta, training=train, momentum=0.1, eps=1e-5)
    args = {"train": train, "momentum": 0.1, "eps": 1e-5,
            "running_mean_after": after_mean.tolist(), "running_var_after": after_var.tolist()}
    case(name, "batch_norm", args,
         [("x", x, True), ("running_mean", mean, False), ("running_var", var, False), ("gamma", gamma, True),
          ("beta", beta, True)],
         lambda x, m, v, g, b: F.batch_norm(x, m.clone(), v.clone(), g, b, training=train, momentum=0.1, eps=1e-5))


batch_norm_case("batch_norm_train_4d", (4, 3, 2, 5), True)
batch_norm_case("batch_norm_eval_4d", (4, 3, 2, 5), False)
batch_norm_case("batch_norm_train_2d", (6, 4), True)
for name, shape, groups in (("group_norm_4d", (2, 6, 3, 2), 3), ("group_norm_2d", (3, 4), 2),
                            ("group_norm_one_group", (2, 4, 5), 1)):
    case(name, "group_norm", {"groups": groups, "eps": 1e-5},
         [("x", randn(*shape), True), ("gamma", randn(shape[1]), True), ("beta", randn(shape[1]), True)],
         lambda x, g, b, n=groups: F.group_norm(x, n, g, b, 1e-5))
for axes in ([1, 0], [2, 0, 1], [0, 2, 1, 3]):
    shape = [(3, 4), (2, 3, 4), (2, 3, 2, 4)][len(axes) - 2]
    case(f"permute_{''.join(map(str, axes))}", "permute", {"axes": axes}, [("x", randn(*shape), True)],
         lambda x, a=axes: x.permute(*a))

# Scaled dot-product attention: [batch, heads, T, d], causal and not,
# keys longer than queries, values of another width.
import torch.nn.functional as F
for name, (qs, ks, vs), causal in [
    ("attention_causal", ((2, 2, 5, 4), (2, 2, 5, 4), (2, 2, 5, 4)), True),
    ("attention_full", ((2, 3, 4), (2, 6, 4), (2, 6, 3)), False),
    ("attention_causal_long_keys", ((1, 3, 8), (1, 5, 8), (1, 5, 2)), True),
]:
    case(name, "attention", {"causal": causal},
         [("q", randn(*qs), True), ("k", randn(*ks), True), ("v", randn(*vs), True)],
         lambda q, k, v, c=causal: F.scaled_dot_product_attention(q, k, v, is_causal=c))
# N-D ids and a language model's loss: ids [B, T] give [B, T, D]; logits
# [B, T, V] with targets [B, T] are the mean over every position.
ids_2d = torch.tensor([[4, 0, 4], [2, 1, 1]], dtype=torch.int64)
case("embedding_2d_ids", "embedding", {}, [("table", randn(5, 3), True), ("ids", ids_2d, False)],
     lambda t, i: F.embedding(i, t))
targets_2d = torch.tensor([[1, 4, 0], [3, 3, 2]], dtype=torch.int64)
case("cross_entropy_3d", "cross_entropy", {}, [("logits", randn(2, 3, 5), True), ("targets", targets_2d, False)],
     lambda x, t: F.cross_entropy(x.reshape(-1, 5), t.reshape(-1)))
# Attention over a packed qkv [..., T, 3 * heads * d], as nanoGPT splits its
# c_attn projection: the heads moved out, SDPA, the heads moved back.
def packed_attention(qkv, heads, causal):
    *lead, t, columns = qkv.shape
    width = columns // 3

    def heads_of(x):
        return x.reshape(*lead, t, heads, width // heads).transpose(-3, -2)

    q, k, v = (heads_of(x) for x in qkv.split(width, dim=-1))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return y.transpose(-3, -2).reshape(*lead, t, width)


for name, shape, heads, causal in [
    ("attention_packed_causal", (2, 5, 18), 2, True),
    ("attention_packed_full", (3, 4, 12), 1, False),
    ("attention_packed_two_leading_dims", (2, 2, 6, 24), 4, True),
]:
    case(name, "attention_packed", {"heads": heads, "causal": causal}, [("qkv", randn(*shape), True)],
         lambda x, h=heads, c=causal: packed_attention(x, h, c))

doc = {
    "format": "autodiff-oracle/1",
    "set": "extra",
    "seed": 2,
    "dtype": "f64",
    "generator": f"make_oracle_extra.py, torch {torch.__version__}, float64",
    "cases": cases,
}
with open(__file__.replace("make_oracle_extra.py", "oracle_extra.json"), "w") as f:
    f.write("{\n")
    for key in ("format", "set", "seed", "dtype", "generator"):
        f.write(f"  {json.dumps(key)}: {json.dumps(doc[key])},\n")
    f.write('  "cases": [\n')
    f.write(",\n".join("    " + json.dumps(c) for c in cases))
    f.write("\n  ]\n}\n")
print(f"wrote {len(cases)} cases")
