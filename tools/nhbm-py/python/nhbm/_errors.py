# SPDX-License-Identifier: MIT OR Apache-2.0
"""The exceptions of the nhbm package."""

from typing import Optional


class NhbmError(Exception):
    """Base class of every error the nhbm package raises (an internal error
    of the Rust libraries is raised as this class itself)."""


class ModelError(NhbmError, ValueError):
    """A model description that does not make sense (the tensor or operator
    at fault is named), or an ONNX model that does not import."""


class PlannerError(NhbmError):
    """No plan fits the model's constraints (a memory's max_size, the
    regions of the target)."""


class PlanError(NhbmError, ValueError):
    """A plan blob the kernel would refuse, with the errno NHBM_IOC_PLAN_LOAD
    would answer.

    Attributes:
        errno: the errno value (``errno.EINVAL``, ...).
        errno_name: its name ("EINVAL", ...).
        record: index of the offending record, None for the plan as a whole.
        var_id: var_id of the offending record, None for the plan as a whole.
        rule: the rule broken, in words.
    """

    def __init__(
        self,
        message: str,
        *,
        errno: int,
        errno_name: str,
        record: Optional[int] = None,
        var_id: Optional[int] = None,
        rule: str = "",
    ) -> None:
        super().__init__(message)
        self.errno = errno
        self.errno_name = errno_name
        self.record = record
        self.var_id = var_id
        self.rule = rule
