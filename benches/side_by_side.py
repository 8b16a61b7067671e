#!/usr/bin/env python3
"""grad beside its peers, and beside another revision of itself, in one run.

Builds grad's figures binary (benches/figures.rs) in release, finds the installed peers
(benches/peers/), then runs N rounds; in each round every contender runs each workload once,
in its own process, one after the other (the order rotates by round), after the machine's
FMA peak and memcpy bandwidth are measured. Prints the machine and one markdown table per
workload: the median across rounds, grad's speed-up over the best peer and, with
--baseline-rev, over that revision. Every figure is also written to a raw file as it comes
(re-tabulate it with --tabulate). See benches/README.md.

    benches/side_by_side.py --rounds 3
    benches/side_by_side.py --workloads w1,w2 --peers torch --baseline-rev HEAD~1
    benches/side_by_side.py --tabulate target/side-by-side/run-20261130-170000.tsv

Python 3 standard library only.
"""
import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in benches/harness/
from harness import build, contenders, machine, report  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PEERS_DIR = REPO / "benches" / "peers"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="rounds; each contender runs each workload once a round")
    p.add_argument("--workloads", default=",".join(contenders.ALL_WORKLOADS), help="comma-separated, e.g. w1,w2")
    p.add_argument("--peers", default=",".join(contenders.ALL_PEERS),
                   help="comma-separated, from: " + ",".join(contenders.ALL_PEERS) + "; 'none' for grad only")
    p.add_argument("--baseline-rev", metavar="REV", help="also build and run grad at this git revision")
    p.add_argument("--baseline-target-dir", type=Path,
                   help="cargo target dir for the baseline (default: <target>/side-by-side-baseline)")
    p.add_argument("--raw", type=Path, help="raw output file (default: <target>/side-by-side/run-<date>.tsv)")
    p.add_argument("--timeout", type=int, default=600, help="seconds one program may take for one workload")
    p.add_argument("--tabulate", type=Path, metavar="RAW", help="only print the report of an earlier raw file")
    args = p.parse_args()
    args.workloads = [w.strip().lower() for w in args.workloads.split(",") if w.strip()]
    for w in args.workloads:
        if w not in contenders.ALL_WORKLOADS:
            p.error(f"unknown workload {w!r} (known: {','.join(contenders.ALL_WORKLOADS)})")
    args.peers = [] if args.peers == "none" else [x.strip() for x in args.peers.split(",") if x.strip()]
    for x in args.peers:
        if x not in contenders.ALL_PEERS:
            p.error(f"unknown peer {x!r} (known: {','.join(contenders.ALL_PEERS)})")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    return args


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_output(stdout):
    """([(figure, value, unit)], [comment lines]) of a program's `name value unit` output."""
    figs, notes = [], []
    for line in stdout.splitlines():
        parts = line.split()
        if not parts:
            continue
        try:
            # extra words after the unit (fma_peak.c's "(512-bit vectors)") are a note
            figs.append((parts[0], float(parts[1]), parts[2]))
            if len(parts) > 3:
                notes.append(line)
        except (IndexError, ValueError):
            notes.append(line)
    return figs, notes


def run_program(argv, env, timeout):
    """(figures, notes, error or None) of one program run."""
    try:
        r = subprocess.run(argv, env=dict(os.environ, **env), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [], [], f"timed out after {timeout} s"
    except OSError as e:
        return [], [], str(e)
    figs, notes = parse_output(r.stdout)
    if r.returncode != 0:
        tail = " | ".join(r.stderr.strip().splitlines()[-3:])
        return figs, notes, f"exit status {r.returncode}: {tail}"
    if not figs:
        return figs, notes, "printed no figure"
    return figs, notes, None


def grad_threads():
    """grad's threads as the report says them: GRAD_NUM_THREADS, else one per logical CPU."""
    n = os.environ.get("GRAD_NUM_THREADS")
    return f"{n} thread(s) (GRAD_NUM_THREADS)" if n else f"{os.cpu_count()} threads (all logical CPUs)"


def setup(args, raw):
    """Builds what runs and records who runs; returns (contenders, limit programs)."""
    meta = machine.describe()
    meta.update(date=time.strftime("%Y-%m-%d %H:%M %Z"), rounds=args.rounds,
                command=" ".join(shlex.quote(a) for a in ["benches/side_by_side.py", *sys.argv[1:]]),
                load_before=" ".join(f"{x:.2f}" for x in os.getloadavg()), grad=build.describe_tree(REPO))
    for k, v in meta.items():
        raw.write("meta", k, v)

    limit_dir = build.default_target_dir(REPO) / "side-by-side"
    limits, problems = machine.build_limit_programs(PEERS_DIR, limit_dir)
    for problem in problems:
        log(f"!! {problem}")
        raw.write("fail", 0, "machine", "limits", problem)

    runners = [contenders.grad(build.build_current(REPO), "grad", f"grad {meta['grad']} (this tree), {grad_threads()}")]
    if args.baseline_rev:
        target = args.baseline_target_dir or build.default_target_dir(REPO) / "side-by-side-baseline"
        exe, short = build.build_revision(REPO, args.baseline_rev, target)
        what = f"grad at {args.baseline_rev} = {short}, built with this tree's benches/figures.rs and common/"
        runners.append(contenders.grad(exe, f"grad@{short}", what, role="baseline"))
    peers, skipped, warnings = contenders.peers(args.peers, PEERS_DIR)
    runners += peers
    for name, reason in skipped.items():
        log(f"!! SKIPPED {name}: {reason}")
        raw.write("skip", name, reason)
    for warning in warnings:
        log(f"!! WARNING {warning}")
        raw.write("note", "harness", f"WARNING {warning}")
    for c in runners:
        raw.write("who", c.name, c.role, c.what)
    return runners, limits


def run_rounds(args, raw, runners, limits):
    seen_notes = set()
    for rnd in range(1, args.rounds + 1):
        for name, exe in limits.items():
            figs, notes, err = run_program([str(exe)], {}, args.timeout)
            for figure, value, unit in figs:
                raw.write("fig", rnd, "machine", "limits", figure, value, unit)
            for note in notes:
                raw.write("note", "machine", note)
            if err:
                log(f"!! {name}: {err}")
                raw.write("fail", rnd, "machine", "limits", f"{name}: {err}")
        shift = (rnd - 1) % len(runners)
        order = runners[shift:] + runners[:shift]  # nobody always runs first
        for w in args.workloads:
            for c in order:
                if w not in c.workloads:
                    continue
                t0 = time.monotonic()
                figs, notes, err = run_program(c.command(w), c.env, args.timeout)
                for figure, value, unit in figs:
                    raw.write("fig", rnd, c.name, w, figure, value, unit)
                for note in notes:
                    if (c.name, note) not in seen_notes:
                        seen_notes.add((c.name, note))
                        raw.write("note", c.name, note)
                shown = ", ".join(f"{f} {value:.4g} {unit}" for f, value, unit in figs)
                log(f"[{rnd}/{args.rounds}] {w} {c.name:<12} {time.monotonic() - t0:5.1f} s  {shown}")
                if err:
                    log(f"!! {c.name} {w} FAILED: {err}")
                    raw.write("fail", rnd, c.name, w, err)


def main():
    args = parse_args()
    if args.tabulate:
        print(report.render(report.read(args.tabulate)))
        return
    raw_path = args.raw or build.default_target_dir(REPO) / "side-by-side" / time.strftime("run-%Y%m%d-%H%M%S.tsv")
    raw_path.parent.mkdir(parents=True, exist_ok=True)
    raw = report.Raw(raw_path)
    started = time.monotonic()
    try:
        runners, limits = setup(args, raw)
        run_rounds(args, raw, runners, limits)
        raw.write("meta", "load_after", " ".join(f"{x:.2f}" for x in os.getloadavg()))
        raw.write("meta", "seconds", f"{time.monotonic() - started:.0f}")
    except build.BuildError as e:
        log(f"!! build failed: {e}")
        sys.exit(1)
    finally:
        raw.close()
    text = report.render(report.read(raw_path))
    raw_path.with_suffix(".md").write_text(text + "\n", encoding="utf-8")
    print(text)
    log(f"# raw figures: {raw_path}; this report: {raw_path.with_suffix('.md')}; "
        f"{time.monotonic() - started:.0f} s in all")


if __name__ == "__main__":
    main()
