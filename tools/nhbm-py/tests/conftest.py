# SPDX-License-Identifier: MIT OR Apache-2.0
"""Fixtures of the nhbm tests: the example models of tools/examples and
small ONNX files written at test time."""

import json
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples"
sys.path.insert(0, str(HERE))

import onnx_writer  # noqa: E402

EXAMPLE_NAMES = ["small_cnn", "transformer_block"]


@pytest.fixture(scope="session")
def examples_dir() -> pathlib.Path:
    return EXAMPLES


@pytest.fixture(params=EXAMPLE_NAMES)
def example_path(request) -> pathlib.Path:
    return EXAMPLES / f"{request.param}.json"


@pytest.fixture
def example_dict(example_path):
    return json.loads(example_path.read_text())


@pytest.fixture(scope="session")
def onnx_fixed(tmp_path_factory) -> pathlib.Path:
    p = tmp_path_factory.mktemp("onnx") / "mlp_fixed.onnx"
    p.write_bytes(onnx_writer.mlp(batch=2))
    return p


@pytest.fixture(scope="session")
def onnx_symbolic(tmp_path_factory) -> pathlib.Path:
    p = tmp_path_factory.mktemp("onnx") / "mlp_batch.onnx"
    p.write_bytes(onnx_writer.mlp(batch=None))
    return p


def tiny_model(memories, pins=None, max_size=None):
    """A three-operator model whose scratch tensors `a`, `b`, `c` are pinned
    to `pins` (memory names) when given."""
    pins = pins or {}
    tensors = [
        {"id": "x", "dtype": "float32", "shape": [1, 1024], "io": "input"},
        {"id": "w", "size": 8192, "role": "constant"},
        {"id": "a", "size": 65536},
        {"id": "b", "size": 32768},
        {"id": "c", "size": 65536},
        {"id": "y", "dtype": "float32", "shape": [1, 1024], "io": "output"},
    ]
    for t in tensors:
        if t["id"] in pins:
            t["memory"] = pins[t["id"]]
    mems = [{"name": m} for m in memories]
    if max_size is not None:
        for m in mems:
            m["max_size"] = max_size
    return {
        "name": "tiny",
        "memories": mems,
        "tensors": tensors,
        "operators": [
            {"name": "op0", "uses": ["x", "w"], "defines": ["a"]},
            {"name": "op1", "uses": ["a"], "defines": ["b"]},
            {"name": "op2", "uses": ["b"], "defines": ["c"]},
            {"name": "op3", "uses": ["c", "a"], "defines": ["y"]},
        ],
    }
