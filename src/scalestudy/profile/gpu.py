"""Nsight Systems and nvprof SQLite exports: time per kernel class, top kernels, idle time per device.

The two tools write different schemas, and each has changed over the years:
- Nsight Systems (`nsys export --type sqlite`): kernels in CUPTI_ACTIVITY_KIND_KERNEL with `shortName` and
  `demangledName` as ids into StringIds; version in META_DATA_EXPORT (new schemas, 3.x) or
  EXPORT_META_DATA (old, 2.x).
- nvprof (`nvprof -o FILE.nvvp`, also SQLite): kernels in CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (its
  CUPTI_ACTIVITY_KIND_KERNEL is usually empty), `name` an id into StringTable, mostly a mangled C++ name.
Both: CUPTI_ACTIVITY_KIND_MEMCPY (copyKind: 1 host to device, 2 device to host, 8 device to device,
10 peer to peer) and CUPTI_ACTIVITY_KIND_MEMSET; times in ns.

Definitions (as in the reference files' README): kernel time is the sum of (end - start) over kernels, so
concurrent kernels and devices add up; a kernel is NCCL when its name contains "nccl"; the span is
max(end) - min(start) over kernels. Idle time per device is the time between its first and last activity
(kernel, memcpy, memset) when none of them ran; the summary adds it over devices.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import numpy as np

from . import SQLITE_MAGIC, ProfileError, Summary, Window
from .intervals import clip, union_length

COPY_KINDS = {1: "memcpy_h2d", 2: "memcpy_d2h", 8: "memcpy_d2d", 10: "memcpy_p2p"}  # others: memcpy_other
CLASS_ORDER = [
    "compute",
    "nccl",
    "memcpy_h2d",
    "memcpy_d2h",
    "memcpy_d2d",
    "memcpy_p2p",
    "memcpy_other",
    "memset",
    "idle",
]


def short_name(name: str) -> str:
    """A readable name for a mangled C++ kernel name: its (nested) function name without template or
    argument types, e.g. _ZN5cudnn6detail23implicit_convolve_sgemmIf... -> cudnn::detail::implicit_convolve_sgemm.
    A name that is not mangled is returned as it is."""
    if not name.startswith("_Z"):
        return name
    i = 2
    nested = name.startswith("N", i)
    if nested:
        i += 1
        while i < len(name) and name[i] in "rVK":  # cv-qualifiers of a member function
            i += 1
    parts = []
    while i < len(name):
        if name.startswith("St", i):
            parts.append("std")
            i += 2
            continue
        match = re.match(r"\d+", name[i:])
        if not match:
            break
        length = int(match.group())
        i += len(match.group())
        parts.append(name[i : i + length])
        i += length
        if not nested:
            break
    return "::".join(parts) if parts else name


def kernel_class(name: str) -> str:
    return "nccl" if "nccl" in name.lower() else "compute"


def _check_header(path: Path) -> None:
    """A file shorter than its SQLite header says is truncated (caught before SQLite reads garbage)."""
    with path.open("rb") as handle:
        header = handle.read(100)
    if len(header) < 100 or not header.startswith(SQLITE_MAGIC):
        raise ProfileError(f"{path}: truncated SQLite database (the 100-byte header is incomplete)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    valid = header[24:28] == header[92:96]  # the page count is valid when these counters agree
    size = path.stat().st_size
    if valid and pages and size < pages * page_size:
        raise ProfileError(
            f"{path}: truncated SQLite database: its header counts {pages} pages of {page_size} B "
            f"({pages * page_size:,} B), the file has {size:,} B"
        )


def _tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(con, table: str) -> set[str]:
    return {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}


def _rows(con, table: str) -> int:
    return con.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0]


def _schema(path: Path, con) -> dict:
    """Which tool wrote the file and where its kernels and names are."""
    tables = _tables(con)
    info: dict = {}
    if "StringIds" in tables and "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        info["tool"] = "nsys"
        for meta in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if meta in tables:
                values = dict(con.execute(f"SELECT name, value FROM {meta}").fetchall())
                info["version"] = values.get("EXPORT_PRODUCT_VERSION")
                info["export_schema"] = values.get("EXPORT_SCHEMA_VERSION")
                if "DERIVED_WINDOW_NS" in values:
                    info["derived_window_ns"] = values["DERIVED_WINDOW_NS"]  # cut down by its author
        columns = _columns(con, "CUPTI_ACTIVITY_KIND_KERNEL")
        name_col = "shortName" if "shortName" in columns else "demangledName" if "demangledName" in columns else None
        if name_col is None:
            raise ProfileError(f"{path}: Nsight Systems kernel table without shortName or demangledName columns")
        info["kernels"] = (
            f"SELECT k.start, k.end, k.deviceId, k.streamId, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k"
            f" LEFT JOIN StringIds s ON s.id = k.{name_col}"
        )
    elif "StringTable" in tables and ("CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL" in tables):
        info["tool"] = "nvprof"
        if "Version" in tables:
            info["version"] = f"(export format {con.execute('SELECT version FROM Version').fetchone()[0]})"
        table = "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL"
        if _rows(con, table) == 0 and "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
            table = "CUPTI_ACTIVITY_KIND_KERNEL"  # serialized kernel mode (nvprof --concurrent-kernels off)
        info["kernels"] = (
            f"SELECT k.start, k.end, k.deviceId, k.streamId, s.value FROM {table} k"
            " LEFT JOIN StringTable s ON s._id_ = k.name"
        )
    else:
        raise ProfileError(
            f"{path}: an SQLite database, but not an Nsight Systems or nvprof export (no kernel table with"
            " StringIds or StringTable)"
        )
    memcpy, memset = "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"
    info["memcpy"] = f"SELECT start, end, deviceId, bytes, copyKind FROM {memcpy}" if memcpy in tables else None
    info["memset"] = f"SELECT start, end, deviceId FROM {memset}" if memset in tables else None
    return info


def _read(con, sql: str | None) -> list[tuple]:
    return con.execute(sql).fetchall() if sql else []


def summarize_sqlite(path: str | Path, window: Window | None = None, top: int = 10) -> Summary:
    """Time per kernel class, top kernels (by name as the tool groups them) and idle time, cut to `window`
    (seconds from the first kernel, memcpy or memset)."""
    path = Path(path)
    _check_header(path)
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            info = _schema(path, con)
            kernels = _read(con, info["kernels"])
            memcpy = _read(con, info["memcpy"])
            memset = _read(con, info["memset"])
        finally:
            con.close()
    except sqlite3.DatabaseError as err:
        raise ProfileError(f"{path}: damaged or truncated SQLite database ({err})") from None

    def column(rows, i, dtype=np.int64):
        return np.array([r[i] for r in rows], dtype=dtype) if rows else np.array([], dtype=dtype)

    # Times in ns: nvprof's are since 1970 (1.6e18), beyond float64's exact integers, so they are
    # made relative to the first activity while still integers.
    origin = min((int(r[0]) for rows in (kernels, memcpy, memset) for r in rows), default=0)

    def times(rows):
        return [(column(rows, i) - origin).astype(float) for i in (0, 1)]

    (k_start, k_end), (m_start, m_end), (s_start, s_end) = times(kernels), times(memcpy), times(memset)
    k_dev, k_stream, k_name = column(kernels, 2), column(kernels, 3), column(kernels, 4, object)
    m_dev, m_bytes, m_kind = column(memcpy, 2), column(memcpy, 3, float), column(memcpy, 4)
    s_dev = column(memset, 2)
    lo = None if not window or window[0] is None else window[0] * 1e9
    hi = None if not window or window[1] is None else window[1] * 1e9

    ks, ke, kept = clip(k_start, k_end, lo, hi)
    names = [str(n) if n is not None else "(unnamed)" for n in k_name[kept]]
    k_dev_kept = k_dev[kept]
    k_classes = np.array([kernel_class(n) for n in names], dtype=object)  # object: empty, still compared per row
    k_ms = (ke - ks) / 1e6
    ms_, me_, mkept = clip(m_start, m_end, lo, hi)
    m_classes = np.array([COPY_KINDS.get(int(k), "memcpy_other") for k in m_kind[mkept]], dtype=object)
    m_ms = (me_ - ms_) / 1e6
    m_b = m_bytes[mkept]
    ss, se, skept = clip(s_start, s_end, lo, hi)

    # Idle: per device, from its first to its last activity, the time nothing of it ran.
    devices = sorted({int(d) for d in k_dev_kept} | {int(d) for d in m_dev[mkept]} | {int(d) for d in s_dev[skept]})
    idle_ns, busy_ns = {}, {}
    for dev in devices:
        starts = np.concatenate([ks[k_dev_kept == dev], ms_[m_dev[mkept] == dev], ss[s_dev[skept] == dev]])
        ends = np.concatenate([ke[k_dev_kept == dev], me_[m_dev[mkept] == dev], se[s_dev[skept] == dev]])
        busy_ns[dev] = union_length(starts, ends)
        idle_ns[dev] = float(ends.max() - starts.min()) - busy_ns[dev]

    kernel_ms = float(k_ms.sum())
    rows = []
    for name in CLASS_ORDER:
        if name in ("compute", "nccl"):
            mask = k_classes == name
            row = {"class": name, "count": int(mask.sum()), "ms": float(k_ms[mask].sum())}
        elif name == "memset":
            row = {"class": name, "count": int(ss.size), "ms": float((se - ss).sum() / 1e6)}
        elif name == "idle":
            row = {"class": name, "count": len(devices), "ms": sum(idle_ns.values()) / 1e6}
        else:
            mask = m_classes == name
            row = {"class": name, "count": int(mask.sum()), "ms": float(m_ms[mask].sum())}
            row["bytes"] = float(m_b[mask].sum()) if mask.any() else 0.0
        row["share_of_kernel_time"] = row["ms"] / kernel_ms if kernel_ms and name in ("compute", "nccl") else None
        rows.append(row)

    by_name: dict[str, list[float]] = {}
    for name, ms in zip(names, k_ms):
        by_name.setdefault(name, []).append(float(ms))
    top_rows = sorted(
        (
            {
                "name": short_name(name),
                "full_name": name,
                "class": kernel_class(name),
                "count": len(v),
                "ms": sum(v),
                "share": sum(v) / kernel_ms if kernel_ms else 0.0,
            }
            for name, v in by_name.items()
        ),
        key=lambda row: (-row["ms"], row["full_name"]),
    )[:top]
    seen: dict[str, int] = {}
    for row in top_rows:  # two instantiations of one template read alike: number them
        seen[row["name"]] = seen.get(row["name"], 0) + 1
        if seen[row["name"]] > 1 or sum(r["name"] == row["name"] for r in top_rows) > 1:
            row["name"] += f" (variant {seen[row['name']]})"

    nccl_ms = rows[CLASS_ORDER.index("nccl")]["ms"]
    facts = {
        "tool": info["tool"],
        "version": info.get("version"),
        "export_schema": info.get("export_schema"),
        "kernels": int(ks.size),
        "distinct_kernels": len(by_name),
        "devices": devices,
        "streams": len({(int(d), int(s)) for d, s in zip(k_dev[kept], k_stream[kept])}) if ks.size else 0,
        "kernels_per_device": {dev: int((k_dev_kept == dev).sum()) for dev in sorted({int(d) for d in k_dev_kept})},
        "kernel_ms_per_device": {
            dev: float(k_ms[k_dev_kept == dev].sum()) for dev in sorted({int(d) for d in k_dev_kept})
        },
        "nccl_ms_per_device": {
            dev: float(k_ms[(k_dev_kept == dev) & (k_classes == "nccl")].sum())
            for dev in sorted({int(d) for d in k_dev_kept})
        },
        "kernel_span_ms": float((ke.max() - ks.min()) / 1e6) if ks.size else 0.0,
        "window_s": list(window) if window else None,
    }
    if "derived_window_ns" in info:
        facts["note"] = f"the file was cut to the window {info['derived_window_ns']} ns before export"
    metrics = {
        "profile_kernels": float(ks.size),
        "profile_kernel_ms": kernel_ms,
        "profile_span_ms": facts["kernel_span_ms"],
        "profile_compute_ms": rows[0]["ms"],
        "profile_nccl_ms": nccl_ms,
        "profile_idle_ms": rows[CLASS_ORDER.index("idle")]["ms"],
    }
    for name in ("memcpy_h2d", "memcpy_d2h", "memcpy_d2d", "memcpy_p2p"):
        metrics[f"profile_{name}_ms"] = rows[CLASS_ORDER.index(name)]["ms"]
    if kernel_ms:
        metrics["profile_nccl_share"] = nccl_ms / kernel_ms
    return Summary(path=str(path), kind=info["tool"], facts=facts, classes=rows, top=top_rows, metrics=metrics)
