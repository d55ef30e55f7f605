# SPDX-License-Identifier: MIT OR Apache-2.0
"""Loading models: dicts, JSON model files, ONNX files."""

import json

import pytest

import nhbm
from conftest import tiny_model


def test_json_file_and_dict_give_the_same_model(example_path, example_dict, examples_dir):
    from_file = nhbm.load_model(example_path)
    from_dict = nhbm.load_model(example_dict, base_dir=examples_dir)
    assert isinstance(from_file, nhbm.Model)
    assert from_file.name == example_dict["name"]
    assert from_file.tensors == [t["id"] for t in example_dict["tensors"]]
    assert from_file.operators == [o["name"] for o in example_dict["operators"]]
    assert from_dict.tensors == from_file.tensors
    assert from_dict.liveness_lower_bound == from_file.liveness_lower_bound > 0
    # The same description plans to the same bytes, however it was given.
    a = nhbm.plan(from_file, "greedy_by_size")
    b = nhbm.plan(from_dict, "greedy_by_size")
    assert a.blobs == b.blobs


def test_model_round_trips_through_to_dict(example_path, examples_dir):
    m = nhbm.Model.from_json(str(example_path))
    again = nhbm.Model.from_dict(m.to_dict(), base_dir=str(examples_dir))
    assert again.to_dict() == m.to_dict()
    assert json.loads(json.dumps(m.to_dict()))["name"] == m.name


def test_model_properties():
    m = nhbm.load_model(tiny_model(["hbm0", "hbm1"]))
    assert m.name == "tiny"
    assert m.planner == "greedy"
    assert m.target == "v2"
    assert m.memories == ["hbm0", "hbm1"]
    # a (ops 0..3), b (1..2) and c (2..3) are all live at op2.
    assert m.liveness_lower_bound == 65536 + 32768 + 65536
    assert "tiny" in repr(m)
    assert m.for_arch("v4").target == "v4"
    # hbm2 is a channel of V3 and V4, not of V2.
    v3_only = tiny_model(["hbm2"])
    assert nhbm.load_model(v3_only, arch="v3").memories == ["hbm2"]
    with pytest.raises(nhbm.ModelError, match="hbm2"):
        nhbm.load_model(v3_only)


def test_bad_descriptions_raise_model_error():
    bad = tiny_model(["hbm0"])
    bad["operators"][1]["uses"] = ["nope"]
    with pytest.raises(nhbm.ModelError, match="unknown tensor \"nope\""):
        nhbm.load_model(bad)
    unknown_field = tiny_model(["hbm0"])
    unknown_field["tensors"][2]["colour"] = "red"
    with pytest.raises(nhbm.ModelError, match="colour"):
        nhbm.load_model(unknown_field)
    with pytest.raises(nhbm.ModelError):
        nhbm.load_model({"name": "x"})
    # ModelError is a ValueError too.
    with pytest.raises(ValueError):
        nhbm.load_model(bad)
    # Not JSON-serializable at all: json's own TypeError.
    with pytest.raises(TypeError):
        nhbm.load_model({"name": object()})


def test_missing_files_raise_os_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        nhbm.load_model(tmp_path / "absent.json")
    with pytest.raises(FileNotFoundError):
        nhbm.load_model(tmp_path / "absent.onnx")
    with pytest.raises(TypeError):
        nhbm.load_model(42)


def test_onnx_with_fixed_shapes(onnx_fixed):
    m = nhbm.load_model(onnx_fixed)
    assert m.name == "mlp_fixed"
    assert {"x", "w1", "w2", "y"} <= set(m.tensors)
    assert len(m.operators) >= 4
    r = nhbm.plan(m, "exact")
    x = r.placement["x"]
    assert (x.role, x.size) == ("input", 2 * 16 * 4)
    assert r.placement["w1"].role == "constant"
    assert r.placement["y"].size == 2 * 8 * 4
    for blob in r.blobs.values():
        nhbm.validate(blob)


def test_onnx_symbolic_dimension_needs_input_shapes(onnx_symbolic):
    with pytest.raises(nhbm.ModelError, match="input_shapes"):
        nhbm.load_model(onnx_symbolic)
    m = nhbm.load_model(onnx_symbolic, input_shapes={"x": [4, 16]})
    r = nhbm.plan(m, "greedy")
    assert r.placement["x"].size == 4 * 16 * 4
    assert r.placement["y"].size == 4 * 8 * 4
    # Every intermediate value is batch-sized now: none is smaller than a
    # row of the narrowest layer.
    scratch = [p for p in r.placement.values() if p.arena == "scratch"]
    assert scratch and all(p.size >= 4 * 8 * 4 for p in scratch)
    assert m.liveness_lower_bound > nhbm.load_model(onnx_symbolic, input_shapes={"x": [1, 16]}).liveness_lower_bound
    m5 = nhbm.Model.from_onnx(str(onnx_symbolic), {"x": [5, 16]})
    assert nhbm.plan(m5).placement["x"].size == 5 * 16 * 4


def test_onnx_input_shapes_are_checked(onnx_symbolic, onnx_fixed):
    with pytest.raises(ValueError, match="no such graph input"):
        nhbm.load_model(onnx_symbolic, input_shapes={"z": [1, 16]})
    with pytest.raises(ValueError, match="dimensions"):
        nhbm.load_model(onnx_symbolic, input_shapes={"x": [1, 16, 1]})
    with pytest.raises(ValueError, match="not positive"):
        nhbm.load_model(onnx_symbolic, input_shapes={"x": [0, 16]})
    # A fixed dimension cannot be changed.
    with pytest.raises(ValueError, match="dimension 0 is 2"):
        nhbm.load_model(onnx_fixed, input_shapes={"x": [3, 16]})
    assert nhbm.load_model(onnx_fixed, input_shapes={"x": [2, 16]}).tensors
    with pytest.raises(ValueError, match="ONNX files only"):
        nhbm.load_model(tiny_model(["hbm0"]), input_shapes={"x": [1]})


def test_not_an_onnx_file(tmp_path):
    p = tmp_path / "junk.onnx"
    p.write_bytes(b"\xff\xff\xff\xff not protobuf")
    with pytest.raises(nhbm.ModelError):
        nhbm.load_model(p)
    with pytest.raises(nhbm.ModelError):
        nhbm.load_model(p, input_shapes={"x": [1]})
