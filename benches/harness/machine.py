"""The machine: what /proc says it is, and its two physical limits measured (f32 FMA peak,
memcpy bandwidth) by the small C programs in benches/peers/."""
import os
import platform
import shutil
import subprocess
from pathlib import Path


def describe():
    """{'cpu', 'cpus', 'memory', 'simd', 'kernel'} from /proc (Linux), '?' where unknown."""
    info = {"cpu": "?", "cpus": str(len(os.sched_getaffinity(0))), "memory": "?", "simd": "?",
            "kernel": platform.release()}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        fields = dict(line.split(":", 1) for line in cpuinfo.splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        info["cpu"] = fields.get("model name", "?")
        flags = set(fields.get("flags", "").split())
        wanted = ["fma", "avx2", "avx512f", "avx512_bf16", "amx_tile"]
        info["simd"] = " ".join(f for f in wanted if f in flags) or "none of " + " ".join(wanted)
        meminfo = Path("/proc/meminfo").read_text().split()
        info["memory"] = f"{int(meminfo[meminfo.index('MemTotal:') + 1]) / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return info


def build_limit_programs(peers_dir, out_dir):
    """Compiles fma_peak.c and memcpy_bw.c into out_dir when their source is newer.
    Returns ({name: path}, [problems])."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return {}, ["no C compiler (cc): the FMA peak and memcpy bandwidth are not measured"]
    out_dir.mkdir(parents=True, exist_ok=True)
    programs, problems = {}, []
    for name in ("fma_peak", "memcpy_bw"):
        src, exe = peers_dir / f"{name}.c", out_dir / name
        if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
            r = subprocess.run([cc, "-O2", "-march=native", "-fopenmp", str(src), "-o", str(exe)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                problems.append(f"{name}.c did not compile: {r.stderr.strip()[-400:]}")
                continue
        programs[name] = exe
    return programs, problems
