# SPDX-License-Identifier: MIT OR Apache-2.0
"""The installed package: its constants, its docstrings and its type stubs."""

import ast
import inspect
import pathlib

import nhbm


def test_constants():
    assert nhbm.PLANNERS == ("greedy", "greedy_by_size", "hill_climb", "exact")
    assert nhbm.ARCHES == ("v2", "v3", "v4")
    assert nhbm.__version__.count(".") == 2


def test_the_wheel_carries_typed_stubs():
    pkg = pathlib.Path(nhbm.__file__).parent
    assert (pkg / "py.typed").exists()
    stub = ast.parse((pkg / "__init__.pyi").read_text())
    defined = set()
    for node in stub.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            defined.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            defined.add(node.target.id)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets)
    assert set(nhbm.__all__) <= defined, set(nhbm.__all__) - defined


def test_everything_public_has_a_docstring():
    for name in nhbm.__all__:
        obj = getattr(nhbm, name)
        if inspect.isclass(obj) or callable(obj):
            assert inspect.getdoc(obj), name
    for cls in (nhbm.Model, nhbm.PlanResult, nhbm.MemoryResult):
        for attr, value in vars(cls).items():
            if not attr.startswith("_"):
                assert inspect.getdoc(value), f"{cls.__name__}.{attr}"
