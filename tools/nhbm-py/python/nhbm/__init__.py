# SPDX-License-Identifier: MIT OR Apache-2.0
"""Static memory planning for neuron_hbm (AWS Neuron HBM), from Python.

A model (a dict or JSON file in the schema of ``nhbm plan``'s model files,
or an ONNX file) is planned by one of the planners, lowered to one mem_ref
plan per HBM memory, and laid out as the blobs ``NHBM_IOC_PLAN_LOAD`` takes:
the same bytes ``nhbm plan`` writes. ``validate`` applies the kernel's
PLAN_LOAD rules to a blob.

    import nhbm
    result = nhbm.plan("tools/examples/small_cnn.json", planner="exact")
    for name, mem in result.memories.items():
        print(name, mem.high_water_mark, mem.lower_bound, mem.optimal)
    nhbm.validate(result.blobs["hbm0"])  # nhbm.PlanError if refused
"""

import os
from typing import Any, Mapping, Optional, Sequence, Union

from . import _nhbm
from ._errors import ModelError, NhbmError, PlanError, PlannerError
from ._nhbm import (
    ARCHES,
    PLANNERS,
    BlobSummary,
    MemoryResult,
    Model,
    Placement,
    PlanResult,
    __version__,
)

__all__ = [
    "ARCHES",
    "PLANNERS",
    "BlobSummary",
    "MemoryResult",
    "Model",
    "ModelError",
    "NhbmError",
    "Placement",
    "PlanError",
    "PlanResult",
    "PlannerError",
    "__version__",
    "load_model",
    "plan",
    "validate",
]

ModelSource = Union[Model, Mapping[str, Any], str, "os.PathLike[str]"]


def load_model(
    source: ModelSource,
    *,
    input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    base_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    arch: Optional[str] = None,
) -> Model:
    """A checked model from ``source``.

    Args:
        source: a ``Model`` (returned as is), a dict in the schema of the
            JSON model files (``tools/examples/*.json``), or the path of a
            JSON model file or of an ONNX file (``*.onnx``).
        input_shapes: for an ONNX file, fixed dimensions of graph inputs
            whose dimensions are symbolic: ``{"x": [1, 3, 224, 224]}``.
        base_dir: for a dict, the directory its ``data_file`` paths are
            relative to (default: the current directory).
        arch: the device the model is checked and planned for by default,
            "v2", "v3" or "v4" (default: V2); a model whose memories name
            channels V2 lacks (hbm2, hbm3) needs "v3" or "v4". A ``Model``
            is returned for its own arch.

    Raises:
        ModelError: the description does not make sense, or the ONNX model
            does not import (a symbolic dimension left, an unsupported
            operator or element type).
        OSError: the file cannot be read.
        ValueError: ``input_shapes`` names no graph input or contradicts it.
    """
    if isinstance(source, Model):
        return source
    if isinstance(source, Mapping):
        if input_shapes is not None:
            raise ValueError("input_shapes applies to ONNX files only")
        base = None if base_dir is None else os.fspath(base_dir)
        return Model.from_dict(dict(source), base, arch)
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if path.lower().endswith(".onnx"):
            shapes = None
            if input_shapes is not None:
                shapes = {str(k): [int(d) for d in v] for k, v in input_shapes.items()}
            return Model.from_onnx(path, shapes, arch)
        if input_shapes is not None:
            raise ValueError("input_shapes applies to ONNX files only")
        return Model.from_json(path, arch)
    raise TypeError(
        f"a model is an nhbm.Model, a dict or a path, not {type(source).__name__}"
    )


def plan(
    model: ModelSource,
    planner: Optional[str] = None,
    *,
    budget: Optional[int] = None,
    arch: Optional[str] = None,
    seed: Optional[int] = None,
    iterations: Optional[int] = None,
    max_stall_iterations: Optional[int] = None,
    time_limit_ms: Optional[int] = None,
) -> PlanResult:
    """Plans ``model`` and lays out one plan blob per HBM memory it uses.

    Args:
        model: a ``Model``, or anything ``load_model`` takes.
        planner: "exact", "hill_climb", "greedy" or "greedy_by_size"
            (default: "exact", as ``nhbm plan``, whatever the model names).
        budget: the exact planner's node budget, the search nodes it may
            visit over every memory (``planner_options.node_budget``; the
            model's when None). It bounds the work the same way on every
            machine, so the same model, options and budget give the same
            plan; the search stops earlier at a proven optimum.
        arch: the device plans are for, "v2", "v3" or "v4" (their HBM
            channels and sizes with the module's default parameters); None
            (the default) keeps the model's: the arch ``load_model`` was
            given, V2 for a model loaded without one, as ``nhbm plan``
            without ``--arch``.
        seed: the seed of hill_climb's moves (the model's when None).
        iterations: hill_climb's moves per 100 tensors (the model's when None).
        max_stall_iterations: hill_climb's moves without gain that end a
            round, per 100 tensors (the model's when None).
        time_limit_ms: the planner's wall-clock cap in milliseconds, over
            hill_climb and exact (``planner_options.time_budget_ms``; the
            model's when None), a
            safety net: a search it cuts short depends on the machine's
            speed (``MemoryResult.stopped`` says "time_limit").

    Returns:
        A ``PlanResult``: per memory the scratch high-water mark, its lower
        bound, whether it is proven optimal, the placement and the blob.

    Raises:
        ModelError: the model does not load or does not fit the arch.
        PlannerError: no plan fits the model's constraints.
        PlanError: a lowered plan breaks a PLAN_LOAD rule.
        ValueError: an unknown planner or arch.
    """
    m = load_model(model, arch=arch)
    return _nhbm.plan(
        m,
        planner,
        budget=budget,
        arch=arch,
        seed=seed,
        iterations=iterations,
        max_stall_iterations=max_stall_iterations,
        time_limit_ms=time_limit_ms,
    )


def validate(blob: Union[bytes, bytearray, memoryview], arch: Optional[str] = "v2") -> BlobSummary:
    """Checks a plan blob against every rule NHBM_IOC_PLAN_LOAD applies
    before it allocates anything.

    Args:
        blob: the plan blob.
        arch: "v2", "v3" or "v4" also checks the rules that depend on the
            device (an MR_SB record's core and State Buffer range); None
            checks only the rules every device shares.

    Returns:
        A ``BlobSummary`` of the plan.

    Raises:
        PlanError: the kernel would refuse the blob; its ``errno``,
            ``errno_name``, ``record``, ``var_id`` and ``rule`` say why.
        ValueError: an unknown arch.
    """
    if isinstance(blob, str):
        raise TypeError("a plan blob is bytes, not str")
    return _nhbm.validate(bytes(blob), arch)
