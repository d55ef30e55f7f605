# SPDX-License-Identifier: MIT OR Apache-2.0
"""validate(): the kernel's PLAN_LOAD rules, with the errno it answers."""

import errno
import struct

import pytest

import nhbm
from conftest import tiny_model

HEADER = 24  # struct nhbm_plan_header
RECORD = 152  # struct nhbm_mem_ref
FLAGS, ALIGNMENT, VAR_ID = 0x04, 0x18, 0x20


@pytest.fixture(scope="module")
def blob() -> bytes:
    return nhbm.plan(tiny_model(["hbm0"]), "greedy").blobs["hbm0"]


def var_id(b: bytes, i: int) -> int:
    return struct.unpack_from("<I", b, HEADER + i * RECORD + VAR_ID)[0]


def patched(b: bytes, off: int, fmt: str, value: int) -> bytes:
    out = bytearray(b)
    struct.pack_into(fmt, out, off, value)
    return bytes(out)


def test_a_planned_blob_is_valid(blob):
    s = nhbm.validate(blob)
    assert s.records == 6
    assert s.var_ids == [1, 2, 3, 4, 5, 6]
    assert s.kinds[0] == "MR_INPUT" and s.kinds[-1] == "MR_OUTPUT"
    assert nhbm.validate(bytearray(blob), arch=None).records == 6
    assert nhbm.validate(memoryview(blob), arch="v4").records == 6
    assert "6 records" in repr(s)


def test_short_blob_is_einval():
    with pytest.raises(nhbm.PlanError) as e:
        nhbm.validate(b"\0" * 10)
    assert e.value.errno == errno.EINVAL
    assert e.value.errno_name == "EINVAL"
    assert e.value.record is None and e.value.var_id is None
    assert "header" in e.value.rule
    assert "EINVAL" in str(e.value)
    assert isinstance(e.value, nhbm.NhbmError) and isinstance(e.value, ValueError)


def test_header_rules(blob):
    with pytest.raises(nhbm.PlanError, match="rsvd") as e:
        nhbm.validate(patched(blob, 20, "<I", 1))
    assert e.value.errno == errno.EINVAL
    with pytest.raises(nhbm.PlanError, match="nmem is 0") as e:
        nhbm.validate(patched(blob, 16, "<I", 0))
    assert e.value.errno == errno.EINVAL
    with pytest.raises(nhbm.PlanError) as e:
        nhbm.validate(patched(blob, 16, "<I", (1 << 20) + 1))
    assert e.value.errno == errno.E2BIG
    # More records than the blob holds.
    with pytest.raises(nhbm.PlanError) as e:
        nhbm.validate(patched(blob, 16, "<I", 1000))
    assert e.value.errno == errno.EINVAL


def test_record_rules_name_the_record(blob):
    with pytest.raises(nhbm.PlanError, match="flags") as e:
        nhbm.validate(patched(blob, HEADER + RECORD + FLAGS, "<I", 1))
    assert (e.value.errno, e.value.record, e.value.var_id) == (errno.EINVAL, 1, var_id(blob, 1))
    with pytest.raises(nhbm.PlanError, match="power of two") as e:
        nhbm.validate(patched(blob, HEADER + 2 * RECORD + ALIGNMENT, "<Q", 3))
    assert (e.value.errno, e.value.record) == (errno.EINVAL, 2)
    with pytest.raises(nhbm.PlanError) as e:
        nhbm.validate(patched(blob, HEADER + 2 * RECORD + ALIGNMENT, "<Q", 1 << 31))
    assert (e.value.errno, e.value.errno_name) == (errno.E2BIG, "E2BIG")
    with pytest.raises(nhbm.PlanError, match="duplicate var_id") as e:
        nhbm.validate(patched(blob, HEADER + 3 * RECORD + VAR_ID, "<I", var_id(blob, 0)))
    assert (e.value.errno, e.value.record) == (errno.EINVAL, 3)


def test_scratch_outside_the_scratchpad_is_einval(blob):
    # A local scratchpad of 0 bytes: no MR_VIRTUAL_TMP_BUF fits.
    with pytest.raises(nhbm.PlanError, match="scratchpad") as e:
        nhbm.validate(patched(blob, 0, "<Q", 0))
    assert e.value.errno == errno.EINVAL
    assert nhbm.validate(blob).kinds[e.value.record] == "MR_VIRTUAL_TMP_BUF"


def test_not_bytes():
    with pytest.raises(TypeError):
        nhbm.validate("plan")
