"""A private mount namespace for tests that need a read-only or a full file system, for root and
for a normal user alike: ``unshare --user --map-root-user --mount`` makes the caller root inside a
user namespace of its own, where it may bind-mount read-only and mount a small tmpfs. Nothing
outside sees the mounts; they go when the command ends.

The hosted CI job runs as a normal user on an Ubuntu that restricts unprivileged user namespaces
through AppArmor; .ci/run lifts that restriction first. Where namespaces are unavailable the test
skips with the reason — except under CI, where a skip would hide the test: there it fails.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess

import pytest

UNSHARE = ["unshare", "--user", "--map-root-user", "--mount"]


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{why}: under CI this test must run (.ci/run enables user namespaces)")
    pytest.skip(why)


def in_private_mounts(setup: str, argv: list[str], timeout: float = 120, **run: object) -> subprocess.CompletedProcess:
    """Run ``setup`` (sh, mounts) and then ``argv`` in a private user + mount namespace; ``run``
    (env, cwd) goes to subprocess.run."""
    if shutil.which("unshare") is None:
        _unavailable("no unshare(1) on this machine")
    probe = subprocess.run([*UNSHARE, "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"],
                           capture_output=True, text=True, encoding="utf-8")
    if probe.returncode != 0:
        _unavailable(f"cannot make a private mount namespace here: {probe.stderr.strip()}")
    return subprocess.run([*UNSHARE, "sh", "-c", f"{setup} && exec {shlex.join(argv)}"],
                          capture_output=True, text=True, timeout=timeout, **{"encoding": "utf-8", **run})
