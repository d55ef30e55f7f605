# SPDX-License-Identifier: MIT OR Apache-2.0
"""The blobs are the bytes `nhbm plan` writes. Runs where NHBM_CLI names an
`nhbm` command built from the same tree (`make userspace` leaves one in
build/userspace/nhbm); skipped otherwise, as a command from another tree may
plan differently."""

import os
import subprocess

import pytest

import nhbm

CLI = os.environ.get("NHBM_CLI")

pytestmark = pytest.mark.skipif(
    not (CLI and os.access(CLI, os.X_OK)), reason="NHBM_CLI names no nhbm command"
)


@pytest.mark.parametrize("planner", ["greedy", "greedy_by_size", "hill_climb", "exact"])
@pytest.mark.parametrize("arch", ["v2", "v3"])
def test_blobs_are_what_nhbm_plan_writes(tmp_path, example_path, planner, arch):
    prefix = tmp_path / "cli"
    subprocess.run(
        [CLI, "plan", str(example_path), "--planner", planner, "--arch", arch, "-o", str(prefix)],
        check=True,
        capture_output=True,
    )
    r = nhbm.plan(example_path, planner, arch=arch)
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(f"cli.{m}.plan" for m in r.memories)
    for m, blob in r.blobs.items():
        assert (tmp_path / f"cli.{m}.plan").read_bytes() == blob
