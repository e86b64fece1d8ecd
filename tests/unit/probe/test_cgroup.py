# ruff: noqa: E501  (cgroup files read better on one line)
"""Locating and reading the engine container's CPU cgroup, v1 and v2, from /proc-like text and a
cgroup-like directory tree; and the daemon's check of what the probe sends about it."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter import wire, wire_check
from exporter.probe import cgroup

V2_MOUNT = "30 23 0:26 / {point} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
V1_MOUNTS = (
    "31 23 0:28 / {base} rw - tmpfs tmpfs rw\n"
    "32 31 0:29 {root} {base}/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
    "33 31 0:30 / {base}/memory rw - cgroup cgroup rw,memory\n"
    "41 31 0:38 / {base}/unified rw - cgroup2 cgroup2 rw\n"
)


def test_v2_container_with_a_quota(tmp_path: Path) -> None:
    pod = tmp_path / "kubepods.slice" / "pod1" / "cri-abc"
    pod.mkdir(parents=True)
    (pod / "cpu.stat").write_text(
        "usage_usec 900\nuser_usec 600\nsystem_usec 300\nnr_periods 120\nnr_throttled 30\nthrottled_usec 2500000\n"
    )
    (pod / "cpu.max").write_text("150000 100000\n")
    where = cgroup.locate("0::/kubepods.slice/pod1/cri-abc\n", V2_MOUNT.format(point=tmp_path))
    assert where == cgroup.CpuCgroup(str(pod), 2)
    assert cgroup.read(where) == cgroup.CpuThrottling(120, 30, 2.5, 1.5)
    (pod / "cpu.max").write_text("max 100000\n")
    assert cgroup.read(where) == cgroup.CpuThrottling(120, 30, 2.5, 0.0)


def test_v2_namespaced_container_sees_its_cgroup_at_the_mount(tmp_path: Path) -> None:
    (tmp_path / "cpu.stat").write_text("usage_usec 1\nnr_periods 4\nnr_throttled 1\nthrottled_usec 10\n")
    (tmp_path / "cpu.max").write_text("50000 100000\n")
    where = cgroup.locate("0::/\n", V2_MOUNT.format(point=tmp_path))
    assert where == cgroup.CpuCgroup(str(tmp_path), 2)
    assert cgroup.read(where) == cgroup.CpuThrottling(4, 1, 1e-05, 0.5)


def test_v2_without_the_cpu_controller_has_no_throttling(tmp_path: Path) -> None:
    (tmp_path / "cpu.stat").write_text("usage_usec 1\nuser_usec 1\nsystem_usec 0\n")
    assert cgroup.locate("0::/\n", V2_MOUNT.format(point=tmp_path)) is None


def test_v1_hybrid_prefers_the_cpu_hierarchy_and_strips_the_mount_root(tmp_path: Path) -> None:
    group = tmp_path / "cpu,cpuacct" / "docker" / "abc"
    group.mkdir(parents=True)
    (group / "cpu.stat").write_text("nr_periods 10\nnr_throttled 4\nthrottled_time 3000000000\n")
    (group / "cpu.cfs_quota_us").write_text("200000\n")
    (group / "cpu.cfs_period_us").write_text("100000\n")
    proc = "12:memory:/kube/docker/abc\n4:cpu,cpuacct:/kube/docker/abc\n0::/\n"
    where = cgroup.locate(proc, V1_MOUNTS.format(base=tmp_path, root="/kube"))
    assert where == cgroup.CpuCgroup(str(group), 1)
    assert cgroup.read(where) == cgroup.CpuThrottling(10, 4, 3.0, 2.0)
    (group / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup.read(where) == cgroup.CpuThrottling(10, 4, 3.0, 0.0)


@pytest.mark.parametrize(
    ("proc", "mounts"),
    [("", V2_MOUNT), ("0::/x\n", ""), ("garbage", "garbage - cgroup2"), ("4:cpu:/a\n", "")],
)
def test_nothing_found_is_none_not_an_error(proc: str, mounts: str, tmp_path: Path) -> None:
    assert cgroup.locate(proc, mounts.format(point=tmp_path) if "{point}" in mounts else mounts) is None
    assert cgroup.read(cgroup.CpuCgroup(str(tmp_path / "gone"), 2)) is None


def _snapshot(engine: object) -> dict[str, object]:
    return {"v": wire.VERSION, "kind": "snapshot", "seq": 1, "backends": {}, "engine": engine}


def test_the_daemon_checks_the_engine_section() -> None:
    good = {
        "caches": [{"backend": "xgrammar", "compiler": "full_vocab_compiler", "bytes": 5, "limit_bytes": -1}],
        "pool_workers": 8, "cpus": 16,
        "cgroup": {"version": 2, "periods": 3, "throttled_periods": 1, "throttled_seconds": 0.5, "quota_cores": 4.0},
    }  # fmt: skip
    msg = wire_check.validate(_snapshot(good))
    assert isinstance(msg, wire.Snapshot) and msg.engine is not None
    assert msg.engine.caches == (wire.CacheSize("xgrammar", "full_vocab_compiler", 5, -1),)
    assert msg.engine.cgroup == wire.CgroupCpu(2, 3, 1, 0.5, 4.0)
    older = wire_check.validate(_snapshot(None))
    assert isinstance(older, wire.Snapshot) and older.engine is None
    for bad in (
        {**good, "caches": [{"backend": "x y", "compiler": "c", "bytes": 1}]},
        {**good, "caches": [{"backend": "x", "compiler": "c", "bytes": -1}]},
        {**good, "cgroup": {**good["cgroup"], "version": 3}},  # type: ignore[dict-item]
        {**good, "cgroup": {**good["cgroup"], "throttled_seconds": float("nan")}},  # type: ignore[dict-item]
        {**good, "caches": [{"backend": "x", "compiler": "c", "bytes": 1}] * 17},
        [],
    ):
        with pytest.raises(wire_check.Invalid):
            wire_check.validate(_snapshot(bad))
