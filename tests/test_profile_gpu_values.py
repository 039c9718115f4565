"""profile/gpu.py in this process: every class row, top-kernel row, fact and metric of `summarize_sqlite`, worked
out by hand from the rows of a cut copy of the real nvprof file tf_mnist_deep_out.nvvp (../shared/reference/
profiles; the rows kept and the few values changed are said in `mini`), with and without a window; the exact
nvprof and Nsight Systems facts of the real files; each fallback (serialized kernel table, no Version, no memcpy
or memset table, demangledName) and each refusal with its whole line, on copies of real files changed in tmp_path.

The cut copy's rows (ns since 1970; duration = end - start), as the real file holds them unless said:
  memset  S    start 1510947069544784255 end ...544787762 (3507)  dev 0
  memcpy  M1   start 1510947069569814130 end ...569817874 (3744)  dev 0, 4 B, copyKind 1 (h2d)
  memcpy  M2   start 1510947069569986835 end ...569989043 (2208)  dev 0, 4 B, copyKind 1 -> 2 (d2h: changed)
  memcpy  M13  start 1510947069584522663 end ...586182829 (1660166) dev 0 -> 1, 12845056 B, copyKind 1 -> 10 (p2p:
               changed)
  memcpy  M17  start 1510947070044119851 end ...044120619 (768)   dev 0, 128 B, copyKind 8 (d2d)
  memcpy  M18  start 1510947070044166252 end ...044167020 (768)   dev 0, 256 B, copyKind 8 -> 3 (other: changed)
  kernel  K5   start 1510947070045104911 end ...045107439 (2528)  dev 0, stream 13, Eigen ... scalar_product_op ...
  kernel  K7   start 1510947070045115151 end ...045216815 (101664) dev 0, stream 13, the same name as K5
  kernel  K9   start 1510947070045224399 end ...045226831 (2432)  dev 0, stream 13, Eigen ... scalar_sum_op ...
  kernel  K17  start 1510947072041757757 end ...041802238 (44481) dev 0 -> 1, stream 13, maxwell_scudnn_128x32_small_nn
               renamed ncclAllReduceRingLLKernel_sum_f32 (changed: an NCCL kernel on a second device)
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from helpers import REPO, shared_reference

from scalestudy.profile import ProfileError
from scalestudy.profile.gpu import _check_header, kernel_class, short_name, summarize_sqlite

PROFILES = (shared_reference("profiles") or REPO / "absent") / "profiles"
NVPROF_TF = PROFILES / "nvprof_sqlite" / "tf_mnist_deep_out.nvvp"
NVPROF_NCCL = PROFILES / "nvprof_sqlite" / "blinkplus_nccl_demo_output.nvvp"
NSYS_OLD = PROFILES / "nsys_sqlite" / "dlprof_dummy_network_nsys_profile.sqlite"
pytestmark = [pytest.mark.may_skip, pytest.mark.skipif(not NVPROF_TF.is_file(), reason=f"{PROFILES} is not here")]
K, M = "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"
EIGEN_PRODUCT = (
    "_ZN5Eigen8internal15EigenMetaKernelINS_15TensorEvaluatorIKNS_14TensorAssignOpINS_9TensorMapINS_6TensorIfLi1ELi1EiEE"
    "Li16ENS_11MakePointerEEEKNS_18TensorCwiseUnaryOpINS0_12scalar_rightIffNS0_17scalar_product_opIffEEEEKNS4_INS5_IKf"
    "Li1ELi1EiEELi16ES7_EEEEEENS_9GpuDeviceEEEiEEvT_T0_"
)
EIGEN_SUM = EIGEN_PRODUCT.replace("17scalar_product_op", "13scalar_sum_op")
NCCL = "ncclAllReduceRingLLKernel_sum_f32"
CLASS_MEMSET = 7  # the memset row's index in CLASS_ORDER


def copy_of(real: Path, tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    shutil.copyfile(real, out)
    out.chmod(0o644)
    return out


def edit(path: Path, *statements: str) -> Path:
    con = sqlite3.connect(path)
    for sql in statements:
        con.execute(sql)
    con.commit()
    con.close()
    return path


@pytest.fixture()
def mini(tmp_path) -> Path:
    """The cut copy of tf_mnist_deep_out.nvvp the module docstring lists (memcpy rows by their order of start: 1, 2,
    13, 17, 18 of 48 are kept; their _id_ is that order in the real file)."""
    return edit(
        copy_of(NVPROF_TF, tmp_path, "mini.nvvp"),
        f"DELETE FROM {K} WHERE _id_ NOT IN (5, 7, 9, 17)",
        f"DELETE FROM {M} WHERE _id_ NOT IN (1, 2, 13, 17, 18)",
        f"UPDATE {M} SET copyKind = 2 WHERE _id_ = 2",
        f"UPDATE {M} SET copyKind = 10, deviceId = 1 WHERE _id_ = 13",
        f"UPDATE {M} SET copyKind = 3 WHERE _id_ = 18",
        f"UPDATE StringTable SET value = '{NCCL}' WHERE _id_ = 10",
        f"UPDATE {K} SET deviceId = 1 WHERE _id_ = 17",
    )


def test_cut_copy_every_class_row(mini):
    s = summarize_sqlite(mini)
    kernel = 2528 + 101664 + 2432 + 44481  # 151105 ns, K5 + K7 + K9 + K17
    assert s.kind == "nvprof" and s.path == str(mini)
    assert s.classes == [
        # K5, K7, K9: 106624 ns; share 106624 / 151105
        {"class": "compute", "count": 3, "ms": pytest.approx(0.106624, rel=1e-12),
         "share_of_kernel_time": pytest.approx(106624 / kernel, rel=1e-12)},
        {"class": "nccl", "count": 1, "ms": pytest.approx(0.044481, rel=1e-12),  # K17
         "share_of_kernel_time": pytest.approx(44481 / kernel, rel=1e-12)},
        {"class": "memcpy_h2d", "count": 1, "ms": pytest.approx(0.003744, rel=1e-12), "bytes": 4.0,
         "share_of_kernel_time": None},  # M1
        {"class": "memcpy_d2h", "count": 1, "ms": pytest.approx(0.002208, rel=1e-12), "bytes": 4.0,
         "share_of_kernel_time": None},  # M2
        {"class": "memcpy_d2d", "count": 1, "ms": pytest.approx(0.000768, rel=1e-12), "bytes": 128.0,
         "share_of_kernel_time": None},  # M17
        {"class": "memcpy_p2p", "count": 1, "ms": pytest.approx(1.660166, rel=1e-12), "bytes": 12845056.0,
         "share_of_kernel_time": None},  # M13
        {"class": "memcpy_other", "count": 1, "ms": pytest.approx(0.000768, rel=1e-12), "bytes": 256.0,
         "share_of_kernel_time": None},  # M18
        {"class": "memset", "count": 1, "ms": pytest.approx(0.003507, rel=1e-12), "share_of_kernel_time": None},
        # dev 0: S start ...544784255 to K9 end ...045226831 = 500442576 ns, busy (no overlaps) 3507 + 3744 + 2208
        # + 768 + 768 + 2528 + 101664 + 2432 = 117619: idle 500324957; dev 1: M13 start ...584522663 to K17 end
        # ...041802238 = 2457279575, busy 1660166 + 44481 = 1704647: idle 2455574928; together 2955899885 ns
        {"class": "idle", "count": 2, "ms": pytest.approx(2955.899885, rel=1e-12), "share_of_kernel_time": None},
    ]  # fmt: skip


def test_cut_copy_top_facts_and_metrics(mini):
    s = summarize_sqlite(mini)
    kernel = 151105
    # by name: EIGEN_PRODUCT K5 + K7 = 104192 ns, NCCL K17 44481, EIGEN_SUM K9 2432; both Eigen names read alike
    assert s.top == [
        {"name": "Eigen::internal::EigenMetaKernel (variant 1)", "full_name": EIGEN_PRODUCT, "class": "compute",
         "count": 2, "ms": pytest.approx(0.104192, rel=1e-12), "share": pytest.approx(104192 / kernel, rel=1e-12)},
        {"name": NCCL, "full_name": NCCL, "class": "nccl", "count": 1, "ms": pytest.approx(0.044481, rel=1e-12),
         "share": pytest.approx(44481 / kernel, rel=1e-12)},
        {"name": "Eigen::internal::EigenMetaKernel (variant 2)", "full_name": EIGEN_SUM, "class": "compute",
         "count": 1, "ms": pytest.approx(0.002432, rel=1e-12), "share": pytest.approx(2432 / kernel, rel=1e-12)},
    ]  # fmt: skip
    assert s.facts == {
        "tool": "nvprof",
        "version": "(export format 8)",  # the Version table's one row
        "export_schema": None,
        "kernels": 4,
        "distinct_kernels": 3,
        "devices": [0, 1],
        "streams": 2,  # (0, 13) and (1, 13)
        "kernels_per_device": {0: 3, 1: 1},
        "kernel_ms_per_device": {0: pytest.approx(0.106624, rel=1e-12), 1: pytest.approx(0.044481, rel=1e-12)},
        "nccl_ms_per_device": {0: 0.0, 1: pytest.approx(0.044481, rel=1e-12)},
        # K17 end ...072041802238 - K5 start ...070045104911 = 1996697327 ns
        "kernel_span_ms": pytest.approx(1996.697327, rel=1e-12),
        "window_s": None,
    }
    assert s.metrics == {
        "profile_kernels": 4.0,
        "profile_kernel_ms": pytest.approx(0.151105, rel=1e-12),
        "profile_span_ms": pytest.approx(1996.697327, rel=1e-12),
        "profile_compute_ms": pytest.approx(0.106624, rel=1e-12),
        "profile_nccl_ms": pytest.approx(0.044481, rel=1e-12),
        "profile_idle_ms": pytest.approx(2955.899885, rel=1e-12),
        "profile_memcpy_h2d_ms": pytest.approx(0.003744, rel=1e-12),
        "profile_memcpy_d2h_ms": pytest.approx(0.002208, rel=1e-12),
        "profile_memcpy_d2d_ms": pytest.approx(0.000768, rel=1e-12),
        "profile_memcpy_p2p_ms": pytest.approx(1.660166, rel=1e-12),
        "profile_nccl_share": pytest.approx(44481 / kernel, rel=1e-12),
    }
    # top 2: one Eigen name left among them, so no variant number
    assert [t["name"] for t in summarize_sqlite(mini, top=2).top] == ["Eigen::internal::EigenMetaKernel", NCCL]


def test_cut_copy_in_a_window(mini):
    # seconds from the first activity, S's start ...544784255 (relative ns): M17 499335596-499336364, M18
    # 499381997-499382765, K5 500320656-500323184, K7 500330896-500432560 (cut at 500400000: 69104), K9 from
    # 500440144 (out); S, M1, M2, M13 end before 41400000 (out)
    s = summarize_sqlite(mini, window=(0.4993, 0.5004))
    assert s.facts["window_s"] == [0.4993, 0.5004]
    assert (s.facts["kernels"], s.facts["devices"], s.facts["streams"], s.facts["distinct_kernels"]) == (2, [0], 1, 1)
    assert s.metrics["profile_kernel_ms"] == pytest.approx(0.071632, rel=1e-9)  # 2528 + 69104
    assert s.facts["kernel_span_ms"] == pytest.approx(0.079344, rel=1e-9)  # 500400000 - 500320656
    got = {c["class"]: (c["count"], c.get("bytes")) for c in s.classes if c["count"]}
    assert got == {"compute": (2, None), "memcpy_d2d": (1, 128.0), "memcpy_other": (1, 256.0), "idle": (1, None)}
    # dev 0 from M17's start to the window's end: 500400000 - 499335596 = 1064404 ns, busy 768 + 768 + 2528 + 69104
    # = 73168: idle 991236 ns
    assert s.metrics["profile_idle_ms"] == pytest.approx(0.991236, rel=1e-9)
    assert [(t["name"], t["count"]) for t in s.top] == [("Eigen::internal::EigenMetaKernel", 2)]  # K5 and K7 alike
    assert s.facts["nccl_ms_per_device"] == {0: 0.0} and s.metrics["profile_nccl_share"] == 0.0


def test_cut_copy_in_windows_without_memcpy_or_kernels(mini):
    """The windows that crashed before the fix (a class array of no rows compared as one scalar under numpy 1.x)."""
    # K7 alone (500330896-500432560 ns after the first activity, cut at 500400000: 69104 ns), no memcpy
    s = summarize_sqlite(mini, window=(0.50033, 0.5004))
    assert (s.facts["kernels"], s.facts["devices"], s.facts["streams"]) == (1, [0], 1)
    assert s.metrics["profile_kernel_ms"] == pytest.approx(0.069104, rel=1e-9)
    assert [(c["class"], c["count"]) for c in s.classes if c["count"]] == [("compute", 1), ("idle", 1)]
    assert s.metrics["profile_idle_ms"] == 0.0
    # from 0.5 s on: the four kernels, no memcpy or memset; dev 0 from K5 start to K9 end 121920 ns, busy 106624
    late = summarize_sqlite(mini, window=(0.5, None))
    assert (late.facts["kernels"], late.facts["devices"], late.facts["window_s"]) == (4, [0, 1], [0.5, None])
    assert late.metrics["profile_idle_ms"] == pytest.approx(0.015296, rel=1e-9)
    assert late.classes[CLASS_MEMSET]["count"] == 0 and late.metrics["profile_memcpy_p2p_ms"] == 0.0
    # up to 0.04 s: S, M1, M2 and M13 (cut at 40000000: 40000000 - 39738408 = 261592 ns); no kernel
    early = summarize_sqlite(mini, window=(None, 0.04))
    assert (early.facts["kernels"], early.facts["streams"], early.facts["kernel_span_ms"]) == (0, 0, 0.0)
    assert early.top == [] and "profile_nccl_share" not in early.metrics
    assert early.metrics["profile_memcpy_p2p_ms"] == pytest.approx(0.261592, rel=1e-9)
    assert [c["share_of_kernel_time"] for c in early.classes] == [None] * 9
    assert early.facts["devices"] == [0, 1] and early.metrics["profile_idle_ms"] == pytest.approx(
        (25204788 - 3507 - 3744 - 2208) / 1e6, rel=1e-9
    )  # dev 0: S start to M2 end ...569989043 - ...544784255 = 25204788 ns; dev 1: M13 alone, no idle


def test_serialized_kernels_no_version_no_memcpy_no_memset(tmp_path):
    """nvprof --concurrent-kernels off: the kernels in CUPTI_ACTIVITY_KIND_KERNEL (copy of tf_mnist_deep_out.nvvp
    with K5 and K7 moved there, the concurrent table emptied, the Version, memcpy and memset tables dropped)."""
    path = edit(
        copy_of(NVPROF_TF, tmp_path, "serial.nvvp"),
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM {K} WHERE _id_ IN (5, 7)",
        f"DELETE FROM {K}",
        "DROP TABLE Version",
        f"DROP TABLE {M}",
        "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET",
    )
    s = summarize_sqlite(path)
    assert (s.kind, s.facts["version"], s.facts["kernels"], s.facts["distinct_kernels"]) == ("nvprof", None, 2, 1)
    # K5 2528 + K7 101664 ns; span K7 end ...045216815 - K5 start ...045104911 = 111904; idle 111904 - 104192
    assert s.metrics["profile_kernel_ms"] == pytest.approx(0.104192, rel=1e-12)
    assert s.metrics["profile_span_ms"] == pytest.approx(0.111904, rel=1e-12)
    assert s.metrics["profile_idle_ms"] == pytest.approx(0.007712, rel=1e-12)
    assert [c["count"] for c in s.classes] == [2, 0, 0, 0, 0, 0, 0, 0, 1]
    assert s.classes[2]["bytes"] == 0.0 and s.metrics["profile_nccl_share"] == 0.0


def test_nvprof_nccl_file_exactly():
    s = summarize_sqlite(NVPROF_NCCL)
    # SELECT SUM(end - start) GROUP BY name: ncclAllReduceTree 468245089 ns, ncclBroadcastRing 154531364 ns
    assert s.metrics["profile_kernel_ms"] == pytest.approx(622.776453, rel=1e-12)
    assert s.metrics["profile_nccl_ms"] == s.metrics["profile_kernel_ms"] and s.metrics["profile_compute_ms"] == 0
    assert s.facts["devices"] == [0, 1, 2, 3] and s.facts["version"] == "(export format 16)"
    assert [(t["name"], t["class"], t["count"]) for t in s.top] == [
        ("ncclAllReduceTreeLLKernel_sum_i32", "nccl", 12),
        ("ncclBroadcastRingLLKernel_copy_i8", "nccl", 12),
    ]
    assert s.top[0]["share"] == pytest.approx(468245089 / 622776453, rel=1e-12)


def test_nsys_demangled_names_and_old_meta(tmp_path):
    """A copy of the DLProf nsys file without its shortName column: the kernels are named by demangledName."""
    path = edit(copy_of(NSYS_OLD, tmp_path, "demangled.sqlite"),
                "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN shortName")  # fmt: skip
    s = summarize_sqlite(path)
    assert (s.kind, s.facts["version"], s.facts["export_schema"]) == ("nsys", "2022.1.3.3", "2.9.1")
    assert s.facts["kernels"] == 46 and "note" not in s.facts
    assert all("(" in t["full_name"] for t in s.top[:1])  # demangled names carry their argument lists
    edit(path, "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN demangledName")
    with pytest.raises(ProfileError) as err:
        summarize_sqlite(path)
    assert str(err.value) == f"{path}: Nsight Systems kernel table without shortName or demangledName columns"


def test_refusals_as_whole_lines(tmp_path):
    other = edit(copy_of(NVPROF_TF, tmp_path, "other.sqlite"), "DROP TABLE StringTable")
    with pytest.raises(ProfileError) as err:
        summarize_sqlite(other)
    assert str(err.value) == (
        f"{other}: an SQLite database, but not an Nsight Systems or nvprof export (no kernel table with StringIds"
        " or StringTable)"
    )
    real = NVPROF_TF.read_bytes()  # 145408 B: its header counts 142 pages of 1024 B
    assert int.from_bytes(real[16:18], "big") == 1024 and int.from_bytes(real[28:32], "big") == 142
    short = tmp_path / "short.nvvp"
    short.write_bytes(real[:99])
    with pytest.raises(ProfileError) as err:
        _check_header(short)
    assert str(err.value) == f"{short}: truncated SQLite database (the 100-byte header is incomplete)"
    short.write_bytes(b"x" + real[1:200])
    with pytest.raises(ProfileError, match=r"the 100-byte header is incomplete\)$"):
        _check_header(short)
    cut = tmp_path / "cut.nvvp"
    cut.write_bytes(real[: 141 * 1024 + 1023])
    with pytest.raises(ProfileError) as err:
        summarize_sqlite(cut)
    assert str(err.value) == (
        f"{cut}: truncated SQLite database: its header counts 142 pages of 1024 B (145,408 B), the file has 145,407 B"
    )
    cut.write_bytes(real[: 142 * 1024])
    _check_header(cut)  # whole: no error
    # the page count is not valid when the change counters (bytes 24-28 and 92-96) differ: not checked
    stale = bytearray(real[: 100 * 1024])
    stale[92:96] = (int.from_bytes(stale[24:28], "big") + 1).to_bytes(4, "big")
    cut.write_bytes(bytes(stale))
    _check_header(cut)
    # page size 1 in the header means 65536
    big = bytearray(real[:100])
    big[16:18] = (1).to_bytes(2, "big")
    big[28:32] = (3).to_bytes(4, "big")
    cut.write_bytes(bytes(big) + b"\0" * (2 * 65536))
    with pytest.raises(ProfileError, match=r"counts 3 pages of 65536 B \(196,608 B\), the file has 131,172 B$"):
        _check_header(cut)
    # a header that counts no pages: nothing to check; then SQLite itself refuses the garbage
    none = bytearray(real[:100])
    none[28:32] = bytes(4)
    cut.write_bytes(bytes(none) + b"\x07" * 1000)
    with pytest.raises(ProfileError, match=rf"^{cut}: damaged or truncated SQLite database \(.+\)$"):
        summarize_sqlite(cut)


def test_short_names_and_classes():
    assert short_name("_ZNK5Eigen3fooEv") == "Eigen::foo"  # a const member function: K skipped
    assert short_name("_ZNSt6vectorIiE9push_backEv") == "std::vector"  # stops at the template arguments
    assert short_name("_Z3fooi") == "foo"  # not nested: the first name only
    assert short_name("_ZN3foo") == "foo" and short_name("_Zx") == "_Zx"  # no name at all: as it is
    assert short_name("_ZN12ab") == "ab"  # a length past the end: what there is
    assert short_name("_ZNr3fooEv") == "foo" and short_name("_ZNVK3fooEv") == "foo"  # restrict, volatile const
    assert short_name("_ZN") == "_ZN" and short_name("_ZNK") == "_ZNK"  # cut after the qualifiers: as it is
    assert short_name("_ZNX3foo") == "_ZNX3foo"  # X is no qualifier: no name read
    assert kernel_class("NCCLKernel") == "nccl" and kernel_class("nc_cl") == "compute"


NSYS_NEW = PROFILES / "nsys_sqlite" / "nsysai_mfu_2gpu_before.sqlite"


@pytest.mark.parametrize(
    ("path", "meta", "kernels", "memset", "memcpy"),
    [
        # META_DATA_EXPORT: EXPORT_PRODUCT_VERSION 2026.2.1.210, EXPORT_SCHEMA_VERSION 3.25.0, DERIVED_WINDOW_NS
        # 60111418026-60411418026; SELECT COUNT(*), SUM(end - start), MAX(end) - MIN(start) FROM ..._KERNEL:
        # 4010, 535200650, 299877006; ..._MEMSET: 269 rows, 213408 ns; ..._MEMCPY by copyKind: 1: 34 rows 26656 ns
        # 272 B, 8: 986 rows 5665431 ns 8046134272 B
        (NSYS_NEW, ("2026.2.1.210", "3.25.0", "60111418026-60411418026"), (4010, 535.200650, 299.877006),
         (269, 0.213408), [(34, 0.026656, 272.0), (0, 0.0, 0.0), (986, 5.665431, 8046134272.0)]),
        # EXPORT_META_DATA (the old name): 2022.1.3.3, 2.9.1, no window; kernels 46, 346684 ns, span 1994746;
        # memset 4 rows, 12032 ns; memcpy copyKind 1: 12 rows, 26241 ns, 259272 B
        (NSYS_OLD, ("2022.1.3.3", "2.9.1", None), (46, 0.346684, 1.994746), (4, 0.012032),
         [(12, 0.026241, 259272.0), (0, 0.0, 0.0), (0, 0.0, 0.0)]),
    ],
)  # fmt: skip
def test_nsys_files_exactly(path, meta, kernels, memset, memcpy):
    s = summarize_sqlite(path)
    version, schema, window = meta
    assert (s.kind, s.facts["tool"], s.facts["version"], s.facts["export_schema"]) == ("nsys", "nsys", version, schema)
    if window:
        assert s.facts["note"] == f"the file was cut to the window {window} ns before export"
    else:
        assert "note" not in s.facts
    assert s.facts["kernels"] == kernels[0] and s.metrics["profile_kernels"] == float(kernels[0])
    assert s.metrics["profile_kernel_ms"] == pytest.approx(kernels[1], rel=1e-12)
    assert s.metrics["profile_span_ms"] == pytest.approx(kernels[2], rel=1e-12)
    by_class = {c["class"]: c for c in s.classes}
    assert (by_class["memset"]["count"], by_class["memset"]["ms"]) == (memset[0], pytest.approx(memset[1], rel=1e-9))
    for name, (count, ms, size) in zip(("memcpy_h2d", "memcpy_d2h", "memcpy_d2d"), memcpy):
        assert (by_class[name]["count"], by_class[name]["bytes"]) == (count, size)
        assert by_class[name]["ms"] == pytest.approx(ms, rel=1e-9)
        assert s.metrics[f"profile_{name}_ms"] == pytest.approx(ms, rel=1e-9)


def test_the_top_kernels_are_ten_by_default():
    s = summarize_sqlite(NVPROF_TF)
    assert s.facts["distinct_kernels"] == 13 and len(s.top) == 10  # 13 kernel names in the file


def test_a_window_starting_at_a_kernels_start_keeps_all_of_it(mini):
    # K5 starts 500320656 ns after the first activity: from there on, the same kernels as from 0.5 s, uncut
    late, at = summarize_sqlite(mini, window=(0.5, None)), summarize_sqlite(mini, window=(0.500320656, None))
    assert at.metrics["profile_kernel_ms"] == pytest.approx(late.metrics["profile_kernel_ms"], rel=1e-9)
    # up to 1 us: the memset S (3507 ns from the first activity on) cut to its first 1000 ns
    assert summarize_sqlite(mini, window=(None, 1e-6)).classes[CLASS_MEMSET]["ms"] == pytest.approx(0.001, rel=1e-9)


def test_a_kernel_without_a_name_and_kernels_of_no_duration(mini):
    # K5's name id points at no string: "(unnamed)"; every kernel 0 ns long: shares 0, not a division by 0
    s = summarize_sqlite(edit(mini, f"UPDATE {K} SET name = 999999 WHERE _id_ = 5", f"UPDATE {K} SET end = start"))
    assert "(unnamed)" in [t["full_name"] for t in s.top]
    assert s.metrics["profile_kernel_ms"] == 0.0 and [t["share"] for t in s.top] == [0.0] * len(s.top)


def test_an_export_without_any_activity(mini):
    s = summarize_sqlite(edit(mini, f"DELETE FROM {K}", f"DELETE FROM {M}", "DELETE FROM CUPTI_ACTIVITY_KIND_MEMSET"))
    assert (s.facts["kernels"], s.facts["devices"], s.top) == (0, [], [])
    assert [c["count"] for c in s.classes] == [0] * 9


def test_a_header_counting_more_than_16_million_pages_is_truncated(mini):
    data = bytearray(mini.read_bytes())
    data[28:32] = (2**24 + 1).to_bytes(4, "big")  # the page count's high byte set (the counters at 24 and 92 agree)
    mini.write_bytes(bytes(data))
    with pytest.raises(ProfileError, match=r"its header counts 16777217 pages of "):
        summarize_sqlite(mini)


def test_summarize_passes_the_top_count_on_to_either_format_and_reads_a_timeline_after_blank_lines(tmp_path):
    from test_profile import TIMELINE

    from scalestudy.profile import summarize

    assert (len(summarize(NVPROF_TF).top), len(summarize(NVPROF_TF, top=2).top)) == (10, 2)  # 13 kernel names
    timeline = tmp_path / "timeline.json"
    timeline.write_text("\n  " + (PROFILES / TIMELINE).read_text())  # blank lines before the '['
    assert len(summarize(timeline, top=3).top) == 3 and len(summarize(timeline).top) > 3
    with pytest.raises(ProfileError, match=rf"^{tmp_path}: cannot read \(Is a directory\)$"):
        summarize(tmp_path)


def test_summarize_names_a_damaged_sqlite_header_and_a_file_of_neither_format(tmp_path):
    from scalestudy.profile import summarize

    damaged = tmp_path / "damaged.sqlite"
    damaged.write_bytes(b"SQLite format 2\x00" + bytes(100))  # not the magic of SQLite 3
    with pytest.raises(ProfileError, match=rf"^{damaged}: damaged SQLite header$"):
        summarize(damaged)
    report = tmp_path / "report.nsys-rep"
    report.write_bytes(b"\x00\x01 a binary report")
    with pytest.raises(ProfileError) as err:
        summarize(report)
    assert str(err.value) == (
        f"{report}: neither an SQLite database (Nsight Systems or nvprof export) nor a JSON Horovod timeline (an "
        ".nsys-rep report must be exported first: nsys export --type sqlite FILE.nsys-rep)"
    )
