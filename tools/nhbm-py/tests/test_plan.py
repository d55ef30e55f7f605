# SPDX-License-Identifier: MIT OR Apache-2.0
"""Planning: bounds, placements that never collide, blobs the kernel takes,
determinism, arches."""

import itertools

import pytest

import nhbm
from conftest import tiny_model

PLANNERS = ["greedy", "greedy_by_size", "hill_climb", "exact"]
# The exact planner's node budget: its work, the same on every machine.
BUDGET = 50_000


def check_placement(result):
    """No two scratch tensors live at a common operator share a byte of one
    memory; every slot is aligned and inside its arena."""
    for name, mem in result.memories.items():
        scratch = [
            p
            for p in mem.placement.values()
            if p.arena == "scratch" and p.alias_of is None
        ]
        for p in mem.placement.values():
            assert p.memory == name
            assert p.offset % p.alignment == 0, p
        for p in scratch:
            assert p.offset + p.size <= mem.high_water_mark, p
            assert p.lifetime is not None
        for a, b in itertools.combinations(scratch, 2):
            live = a.lifetime[0] <= b.lifetime[1] and b.lifetime[0] <= a.lifetime[1]
            space = a.offset < b.offset + b.size and b.offset < a.offset + a.size
            assert not (live and space), (a, b)
        # A view lies inside its base's slot.
        for p in mem.placement.values():
            if p.alias_of is not None:
                base = result.placement[p.alias_of]
                assert base.offset <= p.offset
                assert p.offset + p.size <= base.offset + base.size


@pytest.mark.parametrize("planner", PLANNERS)
def test_plans_respect_bounds_and_never_collide(example_path, planner):
    r = nhbm.plan(example_path, planner, budget=BUDGET)
    assert r.planner == planner
    assert r.target == "v2"
    assert r.memories, "a plan per memory used"
    assert r.scratch_high_water_mark >= r.liveness_lower_bound > 0
    assert r.scratch_high_water_mark == sum(m.high_water_mark for m in r.memories.values())
    for mem in r.memories.values():
        assert mem.high_water_mark >= mem.lower_bound
        if mem.high_water_mark == mem.lower_bound:
            assert mem.optimal
        assert mem.device_bytes is not None and mem.device_bytes > 0
        has_scratch = any(p.arena == "scratch" for p in mem.placement.values())
        assert (mem.search_nodes is not None) == (planner == "exact" and has_scratch)
        if mem.search_nodes is not None:
            assert mem.search_nodes <= BUDGET + 1
            assert mem.stopped in (None, "node_budget")
            if mem.stopped is None:
                assert mem.optimal
        else:
            assert mem.stopped is None
    check_placement(r)
    # Every tensor is placed once, with the var_id of its position.
    model = nhbm.load_model(example_path)
    assert sorted(r.placement) == sorted(model.tensors)
    assert r.var_ids == {t: i + 1 for i, t in enumerate(model.tensors)}
    assert sum(len(m.placement) for m in r.memories.values()) == len(model.tensors)


@pytest.mark.parametrize("planner", PLANNERS)
def test_blobs_validate(example_path, planner):
    r = nhbm.plan(example_path, planner, budget=BUDGET)
    assert set(r.blobs) == set(r.memories)
    for name, mem in r.memories.items():
        assert r.blobs[name] == mem.blob
        assert isinstance(mem.blob, bytes)
        s = nhbm.validate(mem.blob)
        assert s.records == mem.records == len(mem.placement)
        assert s.blob_bytes == len(mem.blob)
        assert s.local_scratchpad_size == mem.high_water_mark
        assert s.shared_scratchpad_size == 0
        assert sorted(s.var_ids) == sorted(p.var_id for p in mem.placement.values())
        assert set(s.names) == set(mem.placement)
        for p in mem.placement.values():
            kind = s.kinds[s.var_ids.index(p.var_id)]
            if p.role == "input":
                assert kind == "MR_INPUT"
            elif p.role == "output":
                assert kind == "MR_OUTPUT"
            elif p.arena == "scratch":
                assert kind == "MR_VIRTUAL_TMP_BUF"
            else:
                assert kind in ("MR_BUFFER", "MR_BUFFER_STAGED")


@pytest.mark.parametrize("budget", [1, 300, BUDGET])
def test_exact_is_deterministic_and_no_worse_than_greedy_by_size(example_path, budget):
    # The node budget, not the clock, ends the search: a generous time
    # limit never cuts it.
    a = nhbm.plan(example_path, "exact", budget=budget, time_limit_ms=600_000)
    b = nhbm.plan(example_path, "exact", budget=budget, time_limit_ms=600_000)
    assert a.blobs == b.blobs
    for name, mem in a.memories.items():
        assert mem.search_nodes == b.memories[name].search_nodes
        assert mem.stopped == b.memories[name].stopped
        assert mem.stopped != "time_limit"
    # A search may pass its budget by the node that exhausts it.
    nodes = [m.search_nodes for m in a.memories.values() if m.search_nodes is not None]
    assert nodes and sum(nodes) <= budget + len(nodes)
    assert {t: (p.memory, p.offset) for t, p in a.placement.items()} == {
        t: (p.memory, p.offset) for t, p in b.placement.items()
    }
    g = nhbm.plan(example_path, "greedy_by_size")
    for name, mem in a.memories.items():
        assert mem.high_water_mark <= g.memories[name].high_water_mark
        assert mem.optimal == b.memories[name].optimal


def test_hill_climb_follows_its_seed(example_path):
    a = nhbm.plan(example_path, "hill_climb", seed=7, iterations=300)
    b = nhbm.plan(example_path, "hill_climb", seed=7, iterations=300)
    assert a.blobs == b.blobs
    g = nhbm.plan(example_path, "greedy_by_size")
    assert a.scratch_high_water_mark <= g.scratch_high_water_mark


def test_default_planner_is_exact_as_the_clis(example_path, example_dict):
    r = nhbm.plan(example_path)
    assert r.planner == "exact"
    # Whatever the description names.
    assert example_dict.get("planner") != "exact"


def test_tiny_model_is_planned_at_its_lower_bound():
    r = nhbm.plan(tiny_model(["hbm0"]), "exact", budget=BUDGET)
    mem = r.memories["hbm0"]
    assert mem.high_water_mark == mem.lower_bound == 65536 + 32768 + 65536
    assert mem.optimal
    check_placement(r)
    assert r.placement["x"].arena == "persistent"
    assert r.placement["w"].arena == "constant"
    assert r.placement["a"].lifetime == (0, 3)
    assert r.placement["b"].lifetime == (1, 2)


def test_arch_v3_plans_hbm2_and_hbm3():
    desc = tiny_model(["hbm2", "hbm3"], pins={"a": "hbm2", "b": "hbm3", "c": "hbm3"})
    r = nhbm.plan(desc, "exact", arch="v3", budget=BUDGET)
    assert r.target == "v3"
    assert set(r.memories) == {"hbm2", "hbm3"}
    assert r.memories["hbm2"].channel == 2
    assert r.memories["hbm3"].channel == 3
    assert r.placement["a"].memory == "hbm2"
    assert r.placement["b"].memory == r.placement["c"].memory == "hbm3"
    # b and c are live together at op2.
    assert r.memories["hbm3"].high_water_mark == r.memories["hbm3"].lower_bound == 32768 + 65536
    assert r.memories["hbm2"].high_water_mark == 65536
    check_placement(r)
    for blob in r.blobs.values():
        assert nhbm.validate(blob, arch="v3").records > 0
    # A V2 device has two channels only.
    with pytest.raises(nhbm.ModelError, match="hbm2"):
        nhbm.plan(desc, arch="v2")
    # Unpinned tensors spill in the listed order, over v4's channels too.
    r4 = nhbm.plan(tiny_model(["hbm3", "hbm1"]), "greedy", arch="v4")
    assert r4.target == "v4"
    assert r4.placement["a"].memory == "hbm3"


def test_plan_keeps_the_models_arch():
    desc = tiny_model(["hbm2", "hbm3"], pins={"a": "hbm2", "b": "hbm3", "c": "hbm3"})
    m = nhbm.load_model(desc, arch="v3")
    r = nhbm.plan(m, "greedy")
    assert r.target == "v3"
    assert set(r.memories) == {"hbm2", "hbm3"}
    # A model loaded without an arch is planned for V2, and an explicit
    # arch still wins over the model's.
    assert nhbm.plan(tiny_model(["hbm0"]), "greedy").target == "v2"
    assert nhbm.plan(nhbm.load_model(tiny_model(["hbm0"]), arch="v3"), "greedy", arch="v4").target == "v4"


def test_bad_arguments():
    desc = tiny_model(["hbm0"])
    with pytest.raises(ValueError, match="planner"):
        nhbm.plan(desc, "best")
    with pytest.raises(ValueError, match="arch"):
        nhbm.plan(desc, arch="v9")
    with pytest.raises(OverflowError):
        nhbm.plan(desc, "exact", budget=-1)
    with pytest.raises(ValueError, match="arch"):
        nhbm.validate(b"", arch="v9")


def test_planner_error_when_nothing_fits():
    desc = tiny_model(["hbm0"], max_size=64 * 1024)
    with pytest.raises(nhbm.PlannerError):
        nhbm.plan(desc, "greedy")
    assert issubclass(nhbm.PlannerError, nhbm.NhbmError)


def test_write_writes_what_nhbm_plan_writes(tmp_path, example_path):
    r = nhbm.plan(example_path, "greedy")
    paths = r.write(directory=str(tmp_path))
    assert sorted(p.rsplit("/", 1)[1] for p in paths) == sorted(
        f"{r.model}.{m}.plan" for m in r.memories
    )
    for m, blob in r.blobs.items():
        assert (tmp_path / f"{r.model}.{m}.plan").read_bytes() == blob
    assert r.write(prefix="p", directory=str(tmp_path))[0].endswith(".plan")
    assert "PlanResult" in repr(r)
