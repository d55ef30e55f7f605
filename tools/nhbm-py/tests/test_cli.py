# SPDX-License-Identifier: MIT OR Apache-2.0
"""The blobs are the bytes `nhbm plan` writes, by default and with each
planner and arch. The `nhbm` command is the one `make userspace` builds from
this tree (build/userspace/nhbm), or the one NHBM_CLI names; without either
the tests fail: a command from another tree may plan differently."""

import os
import pathlib
import subprocess

import pytest

import nhbm

REPO = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def cli() -> str:
    path = os.environ.get("NHBM_CLI") or str(REPO / "build" / "userspace" / "nhbm")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no nhbm command at {path}: run `make userspace` (or set NHBM_CLI)")
    return path


def cli_blobs(cli, tmp_path, model, *args):
    """The blobs `nhbm plan MODEL ARGS` writes, by memory."""
    prefix = tmp_path / "cli"
    subprocess.run(
        [cli, "plan", str(model), *args, "-o", str(prefix)], check=True, capture_output=True
    )
    return {p.name.split(".")[1]: p.read_bytes() for p in tmp_path.glob("cli.*.plan")}


@pytest.mark.parametrize("planner", ["greedy", "greedy_by_size", "hill_climb", "exact"])
@pytest.mark.parametrize("arch", ["v2", "v3"])
def test_blobs_are_what_nhbm_plan_writes(cli, tmp_path, example_path, planner, arch):
    written = cli_blobs(cli, tmp_path, example_path, "--planner", planner, "--arch", arch)
    r = nhbm.plan(example_path, planner, arch=arch)
    assert written == dict(r.blobs)


def test_the_defaults_write_the_same_blobs(cli, tmp_path, example_path):
    written = cli_blobs(cli, tmp_path, example_path)
    r = nhbm.plan(example_path)
    assert r.planner == "exact"
    assert written == dict(r.blobs)


def test_a_models_arch_is_planned_for(cli, tmp_path, example_path):
    written = cli_blobs(cli, tmp_path, example_path, "--arch", "v3")
    r = nhbm.plan(nhbm.load_model(example_path, arch="v3"))
    assert r.target == "v3"
    assert written == dict(r.blobs)
