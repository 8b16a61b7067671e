"""Builds grad's figures binary (benches/figures.rs, release profile): for the work tree as
it is, and for another git revision in a temporary `git worktree` with its own target dir.

The other revision is built from ITS library with THIS tree's benches/figures.rs and
benches/common/ copied in, so both binaries run the same measurement code and only the
library differs (older revisions may not have figures.rs at all). A revision whose public
API lacks what figures.rs calls does not build; that is reported with cargo's error."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = "figures"


class BuildError(Exception):
    pass


def git(repo, *args):
    r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildError(f"git {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout.strip()


def describe_tree(repo):
    """`<short hash>` of HEAD, with `+changes` when the work tree differs from it."""
    head = git(repo, "rev-parse", "--short", "HEAD")
    dirty = git(repo, "status", "--porcelain", "--untracked-files=no")
    return head + ("+changes" if dirty else "")


def cargo_figures(root, target_dir):
    """`cargo bench --no-run` of the figures binary in `root`; returns the executable.
    Cargo's progress and errors go to our stderr."""
    env = dict(os.environ, CARGO_TARGET_DIR=str(target_dir))
    cmd = ["cargo", "bench", "--bench", BENCH, "--no-run", "--message-format=json-render-diagnostics"]
    print(f"# building {BENCH} in {root} (target {target_dir})", file=sys.stderr, flush=True)
    r = subprocess.run(cmd, cwd=root, env=env, stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise BuildError(f"`{' '.join(cmd)}` failed in {root} (cargo's error is above)")
    for line in r.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == BENCH and msg.get("executable"):
            return Path(msg["executable"])
    raise BuildError(f"cargo built no {BENCH} executable in {root}")


def default_target_dir(repo):
    return Path(os.environ.get("CARGO_TARGET_DIR") or repo / "target")


def build_current(repo):
    return cargo_figures(repo, default_target_dir(repo))


def build_revision(repo, rev, target_dir):
    """Builds the figures binary of `rev` (see the module doc) and returns (executable,
    short hash). The worktree is removed once built; the target dir is kept so that the
    next run with the same dependencies builds incrementally."""
    try:
        commit = git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except BuildError:
        raise BuildError(f"--baseline-rev {rev}: not a commit of {repo}") from None
    short = git(repo, "rev-parse", "--short", commit)
    tmp = Path(tempfile.mkdtemp(prefix=f"grad-baseline-{short}-"))
    tree = tmp / "tree"
    git(repo, "worktree", "add", "--detach", str(tree), commit)
    try:
        shutil.copy2(repo / "benches" / f"{BENCH}.rs", tree / "benches" / f"{BENCH}.rs")
        shutil.rmtree(tree / "benches" / "common", ignore_errors=True)
        shutil.copytree(repo / "benches" / "common", tree / "benches" / "common")
        manifest = tree / "Cargo.toml"
        text = manifest.read_text()
        if f'name = "{BENCH}"' not in text:
            # Without `harness = false` cargo would wrap main in libtest's bench harness.
            manifest.write_text(text + f'\n[[bench]]\nname = "{BENCH}"\nharness = false\n')
        exe = cargo_figures(tree, target_dir)
    finally:
        r = subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"!! could not remove the worktree {tree}: {r.stderr.strip()}", file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    return exe, short
