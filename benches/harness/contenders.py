"""Who runs: grad (this tree, and another revision when asked) and the peers of
benches/peers/ that are installed. A requested peer that is not installed is skipped
with the reason and the command that installs it; nothing is left out silently."""
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ALL_WORKLOADS = ["w1", "w2", "w3", "w3_bf16", "w4", "w5", "w6", "w7", "w8", "w9", "w10"]
# The Rust peers (rust/) implement these; W7 and W8 are PyTorch and JAX only.
RUST_PEER_WORKLOADS = ["w1", "w2", "w3", "w4", "w5", "w6", "w9"]
ALL_PEERS = ["torch", "jax", "candle", "burn", "burn-flex", "ndarray"]


@dataclass
class Contender:
    name: str  # column name in the tables, `grad`, `grad@<rev>`, or a peer
    argv: list  # the program; the workload name is appended
    what: str  # one line for the report: version, backend, threads
    role: str = "peer"  # grad, baseline (grad at another revision), peer, or floor (no autodiff)
    env: dict = field(default_factory=dict)
    workloads: list = field(default_factory=lambda: list(ALL_WORKLOADS))

    def command(self, workload):
        return self.argv + [workload]


def grad(exe, label, what, role="grad"):
    # `--bench`: the full measurement (without it, figures.rs runs a smoke test).
    return Contender(label, [str(exe), "--bench"], what, role)


def venv_python():
    venv = Path(os.environ.get("PEERS_VENV") or Path.home() / ".cache" / "grad-peers-venv")
    return venv, venv / "bin" / "python"


def rust_target():
    return Path(os.environ.get("PEERS_TARGET_DIR") or Path(__file__).resolve().parents[1] / "peers" / "rust" / "target")


def _python_peer(name, module, script):
    venv, py = venv_python()
    if not py.exists():
        return None, f"no Python venv at {venv} (install: bash benches/peers/setup.sh; or set PEERS_VENV)"
    probe = f"import {module}; print({module}.__version__)"
    try:
        r = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, JAX_PLATFORMS="cpu"))
    except subprocess.TimeoutExpired:
        return None, f"`import {module}` in {venv} did not finish in 300 s"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"`import {module}` fails in {venv}: {last} (install: bash benches/peers/setup.sh)"
    return Contender(name, [str(py), str(script)], f"{module} {r.stdout.strip()}, CPU, float32, default threads"), None


def _pinned_versions(manifest):
    """{'candle': '0.11.1', 'burn': '0.22.1'} from the peers' Cargo.toml."""
    text = manifest.read_text()
    out = {}
    for crate, key in (("candle-core", "candle"), ("burn", "burn")):
        m = re.search(rf'^{crate}\s*=\s*(?:{{\s*version\s*=\s*)?"=?([^"]+)"', text, re.M)
        out[key] = m.group(1) if m else "?"
    return out


def _rust_peer(name, binary, peers_dir, what, env=None, workloads=None, role="peer"):
    exe = rust_target() / "release" / binary
    if not exe.exists():
        build = f"(cd benches/peers/rust && cargo build --release), or set PEERS_TARGET_DIR"
        return None, f"no {exe} (build: {build}; ~25 min on 2 cores)", None
    sources = [peers_dir / "rust" / "Cargo.toml", peers_dir / "rust" / "Cargo.lock",
               *(peers_dir / "rust" / "src").rglob("*.rs")]
    stale = [s.name for s in sources if s.stat().st_mtime > exe.stat().st_mtime]
    warning = f"{exe} is older than {', '.join(stale)}: rebuild it" if stale else None
    c = Contender(name, [str(exe)], what, role, env or {}, workloads or list(RUST_PEER_WORKLOADS))
    return c, None, warning


def peers(requested, peers_dir):
    """(contenders, skipped: {name: reason}, warnings) for the requested peer names."""
    out, skipped, warnings = [], {}, []
    versions = _pinned_versions(peers_dir / "rust" / "Cargo.toml")
    for name in sorted(set(requested), key=ALL_PEERS.index):  # the same column order in every report
        warning = None
        if name == "torch":
            c, why = _python_peer("torch", "torch", peers_dir / "bench_torch.py")
        elif name == "jax":
            c, why = _python_peer("jax", "jax", peers_dir / "bench_jax.py")
            if c is not None:  # W10 (bf16 products) is PyTorch's autocast alone
                c.workloads = [w for w in c.workloads if w not in ("w3_bf16", "w10")]
        elif name == "candle":
            c, why, warning = _rust_peer("candle", "bench_candle", peers_dir,
                                         f"candle {versions['candle']} (candle-core + its backprop), CPU")
        elif name == "burn":
            c, why, warning = _rust_peer("burn", "bench_burn", peers_dir,
                                         f"burn {versions['burn']}, Autodiff<NdArray> backend",
                                         env={"PEER_BURN_BACKEND": "ndarray"})
        elif name == "burn-flex":
            c, why, warning = _rust_peer("burn-flex", "bench_burn", peers_dir,
                                         f"burn {versions['burn']}, Autodiff<Flex> backend",
                                         env={"PEER_BURN_BACKEND": "flex"})
        elif name == "ndarray":
            c, why, warning = _rust_peer("ndarray", "bench_ndarray_manual", peers_dir,
                                         "hand-written ndarray forward + backward, no autodiff: a floor, not a peer",
                                         workloads=["w1", "w3"], role="floor")
        else:
            raise AssertionError(name)  # ALL_PEERS.index above has refused unknown names
        if c is None:
            skipped[name] = why
        else:
            out.append(c)
        if warning:
            warnings.append(warning)
    return out, skipped, warnings
