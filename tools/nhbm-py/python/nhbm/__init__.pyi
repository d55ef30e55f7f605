# SPDX-License-Identifier: MIT OR Apache-2.0
"""Static memory planning for neuron_hbm (AWS Neuron HBM), from Python."""

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

__version__: str
PLANNERS: Tuple[str, str, str, str]
ARCHES: Tuple[str, str, str]

_Path = Union[str, "os.PathLike[str]"]

class NhbmError(Exception):
    """Base class of every error the nhbm package raises."""

class ModelError(NhbmError, ValueError):
    """A model description that does not make sense, or an ONNX model that
    does not import."""

class PlannerError(NhbmError):
    """No plan fits the model's constraints."""

class PlanError(NhbmError, ValueError):
    """A plan blob the kernel would refuse, with the errno PLAN_LOAD answers."""

    errno: int
    errno_name: str
    record: Optional[int]
    var_id: Optional[int]
    rule: str
    def __init__(
        self,
        message: str,
        *,
        errno: int,
        errno_name: str,
        record: Optional[int] = ...,
        var_id: Optional[int] = ...,
        rule: str = ...,
    ) -> None: ...

class Model:
    """A checked model: tensors with sizes, alignments and lifetimes."""

    @staticmethod
    def from_dict(
        desc: Mapping[str, Any], base_dir: Optional[_Path] = ..., arch: Optional[str] = ...
    ) -> Model:
        """A model from a description in the JSON model file schema."""
    @staticmethod
    def from_json(path: _Path, arch: Optional[str] = ...) -> Model:
        """A model from a JSON model file."""
    @staticmethod
    def from_onnx(
        path: _Path,
        input_shapes: Optional[Mapping[str, Sequence[int]]] = ...,
        arch: Optional[str] = ...,
    ) -> Model:
        """A model imported from an ONNX file; ``input_shapes`` fixes
        symbolic dimensions of graph inputs."""
    def for_arch(self, arch: str) -> Model:
        """The same model planned for arch ``arch`` by default."""
    @property
    def name(self) -> str:
        """The model's name."""
    @property
    def description(self) -> Optional[str]:
        """The description's line about the model."""
    @property
    def planner(self) -> str:
        """The planner the model asks for."""
    @property
    def target(self) -> str:
        """The device the model is planned for by default."""
    @property
    def tensors(self) -> List[str]:
        """The tensor ids, in description order."""
    @property
    def operators(self) -> List[str]:
        """The operator names, in execution order."""
    @property
    def memories(self) -> List[str]:
        """The memories plans may use, in spill order."""
    @property
    def liveness_lower_bound(self) -> int:
        """The most bytes of scratch live at any one operator."""
    def to_dict(self) -> Dict[str, Any]:
        """The description as a dict, in the JSON model file schema."""

class Placement:
    """Where one tensor was placed."""

    tensor: str
    var_id: int
    memory: str
    source_memory: str
    arena: str
    role: str
    alias_of: Optional[str]
    offset: int
    size: int
    alignment: int
    lifetime: Optional[Tuple[int, int]]

class MemoryResult:
    """The plan of one HBM memory."""

    @property
    def memory(self) -> str:
        """The memory ("hbm0", ...)."""
    @property
    def channel(self) -> int:
        """The HBM channel to load the blob on."""
    @property
    def high_water_mark(self) -> int:
        """Bytes of the scratch arena."""
    @property
    def lower_bound(self) -> int:
        """No arena for this memory's scratch tensors is smaller."""
    @property
    def optimal(self) -> bool:
        """Whether no smaller arena exists (proven by exact, or at the bound)."""
    @property
    def search_nodes(self) -> Optional[int]:
        """Search nodes the exact planner visited (None for the others)."""
    @property
    def stopped(self) -> Optional[str]:
        """What stopped the exact search before a proof: "node_budget",
        "time_limit", or None."""
    @property
    def device_bytes(self) -> Optional[int]:
        """Bytes PLAN_LOAD allocates for the blob on an empty channel."""
    @property
    def records(self) -> int:
        """Records in the blob."""
    @property
    def blob(self) -> bytes:
        """The plan blob, as ``nhbm plan`` writes it."""
    @property
    def placement(self) -> Dict[str, Placement]:
        """Tensor id -> placement, for the tensors in this memory."""

class PlanResult:
    """A planned model."""

    @property
    def model(self) -> str:
        """The model's name."""
    @property
    def planner(self) -> str:
        """The planner that made the plan."""
    @property
    def target(self) -> str:
        """The arch the plan is for."""
    @property
    def scratch_high_water_mark(self) -> int:
        """Bytes of the scratch arenas together."""
    @property
    def liveness_lower_bound(self) -> int:
        """The most bytes of scratch live at any one operator."""
    @property
    def planning_ms(self) -> float:
        """Milliseconds the planner took."""
    @property
    def var_ids(self) -> Dict[str, int]:
        """Tensor id -> var_id in the blobs."""
    @property
    def memories(self) -> Dict[str, MemoryResult]:
        """Memory -> its plan, for every memory with a tensor."""
    @property
    def blobs(self) -> Dict[str, bytes]:
        """Memory -> plan blob."""
    @property
    def placement(self) -> Dict[str, Placement]:
        """Tensor id -> placement, for every tensor."""
    def write(self, prefix: Optional[str] = ..., directory: Optional[_Path] = ...) -> List[str]:
        """Writes PREFIX.MEMORY.plan files as ``nhbm plan`` does."""

class BlobSummary:
    """What ``validate`` says of a blob the kernel would take."""

    records: int
    blob_bytes: int
    local_scratchpad_size: int
    shared_scratchpad_size: int
    var_ids: List[int]
    kinds: List[str]
    names: List[Optional[str]]

ModelSource = Union[Model, Mapping[str, Any], str, "os.PathLike[str]"]

def load_model(
    source: ModelSource,
    *,
    input_shapes: Optional[Mapping[str, Sequence[int]]] = ...,
    base_dir: Optional[_Path] = ...,
    arch: Optional[str] = ...,
) -> Model:
    """A checked model from a Model, a dict, or a JSON or ONNX file path."""

def plan(
    model: ModelSource,
    planner: Optional[str] = ...,
    *,
    budget: Optional[int] = ...,
    arch: Optional[str] = ...,
    seed: Optional[int] = ...,
    iterations: Optional[int] = ...,
    max_stall_iterations: Optional[int] = ...,
    time_limit_ms: Optional[int] = ...,
) -> PlanResult:
    """Plans a model and lays out one plan blob per HBM memory it uses."""

def validate(blob: Union[bytes, bytearray, memoryview], arch: Optional[str] = ...) -> BlobSummary:
    """Checks a plan blob against the rules NHBM_IOC_PLAN_LOAD applies."""
