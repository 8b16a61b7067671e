"""The raw record of a run (one tab-separated line per fact, written as the run goes) and
the markdown report made from it, so a run can be re-tabulated later (`--tabulate FILE`).

Raw lines, first field the kind:
  meta  KEY  VALUE...                      the machine, the command, the tree, the date
  who   NAME  ROLE  WHAT                   a contender; ROLE is grad, baseline, peer or floor
  skip  NAME  REASON                       a requested peer that is not installed
  fig   ROUND  NAME  WORKLOAD  FIGURE  VALUE  UNIT
  fail  ROUND  NAME  WORKLOAD  MESSAGE
  note  NAME  TEXT                         a comment line a program printed (versions, threads)
"""
import statistics

# (workload, figure, which way is better). Growth has no ratio: it is ~0 when all is well.
FIGURES = [
    ("w1", "w1_mlp_step_us", "lower"),
    ("w2", "w2_small_op_ns_per_node", "lower"),
    ("w2", "w2_small_op_iter_ms", "lower"),
    ("w2", "w2_grad_macro_iter_ms", "lower"),
    ("w3", "w3_matmul_gflops", "higher"),
    ("w3", "w3_matmul_iter_ms", "lower"),
    ("w3_bf16", "w3_bf16_matmul_gflops", "higher"),
    ("w3_bf16", "w3_bf16_matmul_iter_ms", "lower"),
    ("w4", "w4_attention_fwd_bwd_us", "lower"),
    ("w5", "w5_bandwidth_gbs", "higher"),
    ("w5", "w5_bandwidth_ms", "lower"),
    ("w5", "w5_grad_macro_gbs", "higher"),
    ("w5", "w5_grad_macro_ms", "lower"),
    ("w6", "w6_peak_rss_mib", "lower"),
    ("w6", "w6_rss_growth_mib", None),
    ("w7", "w7_gpt_step_ms", "lower"),
    ("w7", "w7_gpt_tokens_per_s", "higher"),
    ("w8", "w8_conv_step_ms", "lower"),
    ("w8", "w8_conv_gflops", "higher"),
    ("w9", "w9_hvp_us", "lower"),
    ("w9", "w9_hvp_grad_graph_us", "lower"),
    ("w10", "w10_gpt_bf16_step_ms", "lower"),
    ("w10", "w10_gpt_bf16_tokens_per_s", "higher"),
    ("w10", "w10_loss_gap_max_pct", "lower"),
    ("w10", "w10_loss_gap_max_after_50_pct", "lower"),
    ("w10", "w10_loss_gap_mean_pct", "lower"),
    ("w10", "w10_loss_gap_final_pct", "lower"),
    ("w10", "w10_f32_drift_max_after_50_pct", "lower"),
    ("w10", "w10_f32_drift_mean_pct", "lower"),
]

# grad's figures for the same workload written in a `grad!` block (where elementwise chains
# fuse) against the peers' figure for that workload: the peers print one way of running it.
PEER_FIGURE = {
    "w2_grad_macro_iter_ms": "w2_small_op_iter_ms",
    "w5_grad_macro_gbs": "w5_bandwidth_gbs",
    "w5_grad_macro_ms": "w5_bandwidth_ms",
    "w9_hvp_grad_graph_us": "w9_hvp_us",
}

TITLES = {
    "w1": "W1 MLP 784-256-10 train step: forward, mse, backward, Adam",
    "w2": "W2 small-op overhead: 1000 x tanh(x*0.9+0.1) on x[16], sum, backward (3001 nodes)",
    "w3": "W3 matmul bound: sum(a@b), backward, a and b [1024,1024] (6*1024^3 flop)",
    "w3_bf16": "W3 with bf16 products (W10): f32 values and gradients, products from bf16 operands",
    "w4": "W4 attention forward + backward: x[8,64,64], four [64,64] projections, softmax",
    "w5": "W5 bandwidth bound: sum(sigmoid(x)*x), backward, x[16M] (GB/s of 4 B*16M*3)",
    "w6": "W6 steady state: W1 for 2000 steps, tape reset each step, fresh process",
    "w7": "W7 GPT training step (nanoGPT's architecture: 4 layers, 4 heads, 128 wide, context 64, batch 16, AdamW, clipping)",
    "w8": "W8 convolution step: sum(conv2d(x[32,16,32,32], w[32,16,3,3], b)), backward to x, w, b",
    "w9": "W9 Hessian-vector product: the W1 MLP with tanh, mse, H·v in all four parameters (Tape::hvp; hvp_grad_graph: grad_graph, then backward of Σ⟨g, v⟩)",
    "w10": "W10 W7 with bf16 products: step time, and the loss curve's relative gap from f32 over 200 steps",
}

UNIT_WORDS = {"tok/s": "tokens/s", "us": "µs", "ns": "ns", "ms": "ms", "GFLOP/s": "GFLOP/s", "GB/s": "GB/s", "MiB": "MiB"}


class Raw:
    """Appends raw lines to a file, flushing each, so an interrupted run keeps its figures."""

    def __init__(self, path):
        self.file = open(path, "w", encoding="utf-8")

    def write(self, *fields):
        self.file.write("\t".join(str(f).replace("\t", " ").replace("\n", " ") for f in fields) + "\n")
        self.file.flush()

    def close(self):
        self.file.close()


def read(path):
    """The raw lines of `path` as a dict of lists, by kind."""
    run = {"meta": {}, "who": [], "skip": [], "fig": [], "fail": [], "note": []}
    for line in open(path, encoding="utf-8"):
        kind, *rest = line.rstrip("\n").split("\t")
        if kind == "meta":
            run["meta"][rest[0]] = "\t".join(rest[1:])
        elif kind in run:
            run[kind].append(rest)
    return run


def fmt(v):
    if v != v:  # NaN
        return "?"
    a = abs(v)
    return f"{v:.0f}" if a >= 100 else f"{v:.1f}" if a >= 10 else f"{v:.2f}" if a >= 0.995 else f"{v:.3g}"


def speedup(ours, theirs, better):
    """How many times better `ours` is than `theirs`: >= 1.0 means ours is ahead."""
    if better is None or ours is None or theirs is None or ours <= 0 or theirs <= 0:
        return None
    return theirs / ours if better == "lower" else ours / theirs


def medians(run):
    """({(name, figure): median across rounds}, {(name, figure): {round: value}}, units)."""
    per_round, units = {}, {}
    for rnd, name, _workload, figure, value, unit in run["fig"]:
        per_round.setdefault((name, figure), {})[rnd] = float(value)
        units[figure] = unit
    return {k: statistics.median(v.values()) for k, v in per_round.items()}, per_round, units


def render(run):
    """The markdown report: the machine and the run, then one table per workload."""
    roles = {name: role for name, role, _what in run["who"]}
    med, per_round, units = medians(run)
    out = header(run, med, units)
    for w in dict.fromkeys(w for w, _, _ in FIGURES):
        if any((n, f) in med for n in roles for ww, f, _ in FIGURES if ww == w):
            out += [""] + table(run, w, roles, med, per_round, units)
    if run["fail"]:
        out += ["", "Failures:"] + [f"- round {r}, {name} {w}: {msg}" for r, name, w, msg in run["fail"]]
    return "\n".join(out)


def header(run, med, units):
    meta = run["meta"]
    out = [f"Machine: {meta.get('cpu', '?')}, {meta.get('cpus', '?')} logical CPUs, {meta.get('memory', '?')}, "
           f"SIMD flags: {meta.get('simd', '?')}; Linux {meta.get('kernel', '?')}."]
    limits = [(f, med[("machine", f)], units[f]) for (n, f) in sorted(med) if n == "machine"]
    if limits:
        # fma_peak.c says its vector width after the unit: "(512-bit vectors)"
        widths = sorted({text[text.index("("):] for name, text in run["note"] if name == "machine" and "(" in text})
        out.append("Measured limits: " + ", ".join(f"`{f}` {fmt(v)} {u}" for f, v, u in limits)
                   + " (f32 FMA throughput by fma_peak.c" + "".join(" " + w for w in widths)
                   + "; bytes copied per second by memcpy, memcpy_bw.c).")
    out.append(f"Run: {meta.get('date', '?')}, rounds: {meta.get('rounds', '?')}, {meta.get('seconds', '?')} s; "
               "every contender ran each workload once per round, interleaved; a cell is the median across "
               "rounds of each run's own median. Load average (1, 5, 15 min) before: "
               f"{meta.get('load_before', '?')}, after: {meta.get('load_after', '?')}.")
    busy = busy_warning(meta)
    if busy:
        out.append(busy)
    out += [f"Command: `{meta.get('command', '?')}`", ""]
    notes = {}
    for name, text in run["note"]:
        notes.setdefault(name, []).append(text.lstrip("# "))
    for name, _role, what in run["who"]:
        out.append(f"- **{name}**: {what}" + "".join(f"; `{n}`" for n in notes.get(name, [])))
    out += [f"- {text}" for text in notes.get("harness", [])]
    out += [f"- **{name}: SKIPPED**, {reason}" for name, reason in run["skip"]]
    out += ["", "Ratios are speed-ups, >= 1.00 means grad (this tree) is ahead: for times and memory the "
            "other's value ÷ grad's, for GFLOP/s and GB/s grad's ÷ the other's. \"best peer\" is the best of "
            "the autodiff peers that ran (ndarray, without autodiff, is a floor, not a peer)."]
    base = next((name for name, role, _what in run["who"] if role == "baseline"), None)
    if base:
        out.append(f"`grad vs {base}` is grad's speed-up over {base}, the median of the per-round ratios "
                   "(each pair ran back to back) with their range across rounds.")
    return out


def table(run, w, roles, med, per_round, units):
    """The markdown table of workload `w`: a row per figure, a column per contender, then the ratios."""
    names = list(roles)
    grad = next((n for n in names if roles[n] == "grad"), None)
    base = next((n for n in names if roles[n] == "baseline"), None)
    has_peers = "peer" in roles.values()
    failed = {(name, workload) for _rnd, name, workload, _msg in run["fail"]}
    head = ["figure"] + names + (["grad vs best peer"] if has_peers else []) + ([f"grad vs {base}"] if base else [])
    out = [f"### {TITLES[w]}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for ww, figure, better in FIGURES:
        if ww != w or not any((n, figure) in med for n in names):
            continue
        arrow = {"lower": " ↓", "higher": " ↑", None: ""}[better]
        row = [f"`{figure}` {UNIT_WORDS.get(units.get(figure), units.get(figure, ''))}{arrow}"]
        for n in names:
            v = med.get((n, figure))
            row.append(fmt(v) if v is not None else ("failed" if (n, w) in failed else "—"))
        if has_peers:
            theirs = PEER_FIGURE.get(figure, figure)
            peers = [(med[(n, theirs)], n) for n in names if roles[n] == "peer" and (n, theirs) in med]
            best = (min if better == "lower" else max)(peers) if peers and better else None
            s = speedup(med.get((grad, figure)), best[0], better) if best else None
            row.append(f"{s:.2f} ({best[1]})" if s is not None else "—")
        if base:
            row.append(paired(per_round.get((grad, figure), {}), per_round.get((base, figure), {}), better))
        out.append("| " + " | ".join(row) + " |")
    note = limit_note(w, med, grad)
    return out + (["", note] if note else [])


def busy_warning(meta):
    """A loud line when the 1-minute load average exceeded half the CPUs before or after."""
    try:
        cpus = int(meta["cpus"])
        loads = [float(meta[k].split()[0]) for k in ("load_before", "load_after") if k in meta]
    except (KeyError, ValueError, IndexError):
        return None
    if loads and max(loads) > cpus / 2:
        return (f"**WARNING: the machine was busy (load average up to {max(loads):.1f} on {cpus} CPUs): the "
                f"contenders were interleaved, but the absolute figures, and multi-threaded peers most, suffer.**")
    return None


def paired(ours, theirs, better):
    """Median [min–max] of the per-round speed-ups of `ours` over `theirs`."""
    ratios = [speedup(ours[r], theirs[r], better) for r in ours if r in theirs]
    ratios = [x for x in ratios if x is not None]
    if not ratios:
        return "—"
    return f"{statistics.median(ratios):.2f} [{min(ratios):.2f}–{max(ratios):.2f}]"


def limit_note(w, med, grad):
    """grad's W3 against the FMA peak and W5 against memcpy, both at the machine's most
    threads (grad's default; a run with GRAD_NUM_THREADS says so under the contenders)."""
    def most_threads(prefix):
        found = [(int("".join(c for c in f[len(prefix):] if c.isdigit()) or 1), v, f)
                 for (n, f), v in med.items() if n == "machine" and f.startswith(prefix)]
        return max(found) if found else None
    fma = most_threads("fma_f32_gflops_")
    copy = most_threads("memcpy_gbs_")
    if w == "w3" and fma and (grad, "w3_matmul_gflops") in med:
        threads, peak, _ = fma
        return (f"grad's W3 is {100 * med[(grad, 'w3_matmul_gflops')] / peak:.0f}% of the measured f32 FMA "
                f"peak on {threads} thread(s) ({fmt(peak)} GFLOP/s).")
    if w == "w5" and copy:
        threads, bw, _ = copy
        parts = [f"`{f}` {med[(grad, f)] / bw:.2f}x" for f in ("w5_bandwidth_gbs", "w5_grad_macro_gbs")
                 if (grad, f) in med]
        if parts:
            return (f"grad's W5 against the memcpy rate on {threads} thread(s) ({fmt(bw)} GB/s copied): "
                    + ", ".join(parts) + ".")
    return None
