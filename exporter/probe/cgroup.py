"""The engine container's CPU limit and throttling, read from its own cgroup (v2 or v1).

A compile burst can exhaust the container's CFS quota and stall decode for the rest of each period
(vLLM issue 49460: inter-token latency from 7-9 ms to 68-93 ms); the engine sizes its compile pool
from `os.cpu_count()`, which ignores the quota. Only the probe, inside the engine's container, sees
that cgroup. Located once (`locate`), read by the shipper thread once per snapshot (`read`): two
small files, never on an engine thread. Standard library only; every failure is None, not raised.

    v2: cpu.stat (nr_periods, nr_throttled, throttled_usec; present when the cpu controller is on)
        and cpu.max ("QUOTA PERIOD" or "max PERIOD")
    v1: cpu.stat (nr_periods, nr_throttled, throttled_time in ns) and cpu.cfs_quota_us (-1: none)
        with cpu.cfs_period_us
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PROC_CGROUP = "/proc/self/cgroup"
PROC_MOUNTINFO = "/proc/self/mountinfo"


@dataclass(frozen=True, slots=True)
class CpuCgroup:
    """Where this process's CPU controller is: the directory and its cgroup version."""

    path: str
    version: int


@dataclass(frozen=True, slots=True)
class CpuThrottling:
    periods: int  # CFS enforcement periods that elapsed with runnable tasks
    throttled_periods: int  # of those, periods in which the quota ran out
    throttled_seconds: float  # total time the cgroup's tasks were held back
    quota_cores: float  # the quota in cores (quota / period); 0.0 when there is none


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(4096)
    except OSError:
        return None


def _mounts(mountinfo: str) -> list[tuple[str, str, str, set[str]]]:
    """(root, mount point, fstype, super options) of each cgroup mount."""
    out = []
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(rest) < 3 or rest[0] not in ("cgroup", "cgroup2"):
            continue
        out.append((fields[3], fields[4].replace("\\040", " "), rest[0], set(rest[2].split(","))))
    return out


def _membership(proc_cgroup: str) -> tuple[str | None, str | None]:
    """This process's v1 cpu cgroup path and v2 path, from /proc/self/cgroup."""
    v1 = v2 = None
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2]
        elif "cpu" in parts[1].split(","):
            v1 = parts[2]
    return v1, v2


def _inside(mount_point: str, root: str, path: str) -> str:
    """The cgroup directory under the mount; the mount itself when the path is not visible there
    (a container with its own cgroup namespace sees its cgroup as the mount's root)."""
    relative = path[len(root) :] if root != "/" and path.startswith(root) else path
    candidate = os.path.normpath(os.path.join(mount_point, relative.lstrip("/")))
    return candidate if os.path.isdir(candidate) else mount_point


def locate(proc_cgroup: str | None = None, mountinfo: str | None = None) -> CpuCgroup | None:
    """The CPU controller of this process: v1's cpu hierarchy when mounted (hybrid hosts mount v2
    without it), else v2 when its cpu.stat reports periods (the cpu controller is enabled)."""
    proc_cgroup = _read(PROC_CGROUP) if proc_cgroup is None else proc_cgroup
    mountinfo = _read(PROC_MOUNTINFO) if mountinfo is None else mountinfo
    if not proc_cgroup or not mountinfo:
        return None
    v1_path, v2_path = _membership(proc_cgroup)
    mounts = _mounts(mountinfo)
    for root, point, fstype, options in mounts:
        if fstype == "cgroup" and "cpu" in options and v1_path is not None:
            return CpuCgroup(_inside(point, root, v1_path), 1)
    for root, point, fstype, _ in mounts:
        if fstype == "cgroup2" and v2_path is not None:
            where = _inside(point, root, v2_path)
            if "nr_periods" in (_read(os.path.join(where, "cpu.stat")) or ""):
                return CpuCgroup(where, 2)
    return None


def _stat(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def _quota_v2(text: str | None) -> float:
    parts = (text or "").split()
    if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit() and int(parts[1]) > 0:
        return int(parts[0]) / int(parts[1])
    return 0.0  # "max": no quota


def _quota_v1(quota: str | None, period: str | None) -> float:
    try:
        q, p = int((quota or "").strip()), int((period or "").strip())
    except ValueError:
        return 0.0
    return q / p if q > 0 and p > 0 else 0.0


def read(where: CpuCgroup) -> CpuThrottling | None:
    stat_text = _read(os.path.join(where.path, "cpu.stat"))
    if stat_text is None:
        return None
    stat = _stat(stat_text)
    if "nr_periods" not in stat:
        return None
    if where.version == 2:
        throttled = stat.get("throttled_usec", 0) / 1e6
        quota = _quota_v2(_read(os.path.join(where.path, "cpu.max")))
    else:
        throttled = stat.get("throttled_time", 0) / 1e9
        quota = _quota_v1(
            _read(os.path.join(where.path, "cpu.cfs_quota_us")),
            _read(os.path.join(where.path, "cpu.cfs_period_us")),
        )
    return CpuThrottling(stat["nr_periods"], stat.get("nr_throttled", 0), throttled, quota)
