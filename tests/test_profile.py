"""Profile summaries on the real profiler files of ../shared/reference/profiles/ (never on imitations).

The expected numbers are the facts of that folder's README, worked out there from the files by hand
(kernel time = sum of end - start; NCCL = name contains 'nccl'; span = max end - min start)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

from scalestudy.profile import ProfileError, parse_window, summarize
from scalestudy.profile.gpu import short_name
from scalestudy.profile.intervals import overlap_length, overlapping_groups, union_length
from scalestudy.profile.timeline import Span, fused_count, tensor_bytes


def _reference_profiles() -> Path | None:
    """../shared/reference/profiles from the main checkout (REPO/..) or a worktree (REPO/../..)."""
    for parent in REPO.parents:
        candidate = parent / "shared" / "reference" / "profiles"
        if candidate.is_dir():
            return candidate
    return None


PROFILES = _reference_profiles()
# Third-party files that are not in the repository and that make test cannot fetch: a skip allowed under make test.
_no_profiles = pytest.mark.skipif(PROFILES is None, reason="../shared/reference/profiles is not here")


def needs_profiles(test):
    """Both marks on `test` (pytest.mark.may_skip(mark) would make the skipif an argument of may_skip, not a mark)."""
    return pytest.mark.may_skip(_no_profiles(test))


NSYS_NEW = "nsys_sqlite/nsysai_mfu_2gpu_before.sqlite"
NSYS_OLD = "nsys_sqlite/dlprof_dummy_network_nsys_profile.sqlite"
NVPROF_NCCL = "nvprof_sqlite/blinkplus_nccl_demo_output.nvvp"
NVPROF_TF = "nvprof_sqlite/tf_mnist_deep_out.nvvp"
TIMELINE = "horovod_timeline/tflogs_e2205b9_horovod_timeline.json"


def row(summary, name):
    return next(c for c in summary.classes if c["class"] == name)


# ----------------------------------------------------------------------------------------------
# Pure parts


def test_union_of_intervals_by_hand():
    # [0,2] and [1,3] overlap -> [0,3]; [5,6] apart: 3 + 1
    assert union_length([0, 1, 5], [2, 3, 6]) == 4.0
    assert overlapping_groups([0, 1, 5], [2, 3, 6]) == 2
    assert overlap_length([0, 1, 5], [2, 3, 6], 1.5, 5.5) == 1.5 + 0.5


def test_short_names_of_mangled_kernels():
    assert short_name("_Z33ncclAllReduceTreeLLKernel_sum_i328ncclColl") == "ncclAllReduceTreeLLKernel_sum_i32"
    assert (
        short_name("_ZN5cudnn6detail23implicit_convolve_sgemmIfLi1024ELi5ELi5ELi3ELi3ELi3ELi1ELb1ELb0EEEviiiPKT_")
        == "cudnn::detail::implicit_convolve_sgemm"
    )
    assert short_name("flash_fwd_kernel") == "flash_fwd_kernel"


def test_tensor_bytes_from_timeline_args():
    assert tensor_bytes({"dtype": "float32", "shape": "[4096, 1001]"}) == 4096 * 1001 * 4
    assert tensor_bytes({"dtype": "float16", "shape": "[10]"}) == 20
    assert tensor_bytes({"dtype": "float32", "shape": "[]"}) == 4
    assert tensor_bytes({}) is None


def test_fused_allreduces_are_groups_of_overlapping_collectives():
    def span(pid, name, start, end):
        return Span(pid, name, start, end, {})

    # a fused allreduce of tensors 1-3, then one of tensors 4-5: two groups
    flat = [span(p, "MPI_ALLREDUCE", s, e) for p, s, e in [(1, 0, 10), (2, 0, 10), (3, 1, 9), (4, 20, 30), (5, 21, 29)]]
    assert fused_count(flat) == 2
    # one hierarchical allreduce of two tensors: three collectives one after the other, still one allreduce
    hierarchical = [
        span(p, name, s, e)
        for p in (1, 2)
        for name, s, e in [("NCCL_REDUCESCATTER", 0, 5), ("MPI_ALLREDUCE", 5, 10), ("NCCL_ALLGATHER", 10, 15)]
    ]
    assert fused_count(hierarchical) == 1


def test_window_syntax():
    assert parse_window("1.5:3") == (1.5, 3.0)
    assert parse_window("2:") == (2.0, None)
    assert parse_window(":4") == (None, 4.0)
    assert parse_window(" 1 : 2 ") == (1.0, 2.0)
    assert parse_window(None) is None
    errors = {
        "3": "--window '3': write START:END in seconds, e.g. 10:12.5 or 10:",
        "a:b": "--window 'a:b': START and END must be numbers of seconds",
        "1:2:3": "--window '1:2:3': START and END must be numbers of seconds",  # one split, then '2:3' is no number
        "5:2": "--window '5:2': END must be after START",
        "2:2": "--window '2:2': END must be after START",
    }
    for bad, line in errors.items():
        with pytest.raises(ValueError) as err:
            parse_window(bad)
        assert str(err.value) == line


# ----------------------------------------------------------------------------------------------
# The README's facts, file by file


@needs_profiles
def test_nsys_new_schema_two_gpus():
    s = summarize(PROFILES / NSYS_NEW)
    f = s.facts
    assert (s.kind, f["export_schema"]) == ("nsys", "3.25.0")
    assert f["kernels"] == 4010 and f["kernels_per_device"] == {0: 1993, 1: 2017}
    assert f["streams"] == 2
    assert s.metrics["profile_kernel_ms"] == pytest.approx(535.201, abs=5e-4)
    assert f["kernel_ms_per_device"][0] == pytest.approx(270.876, abs=5e-4)
    assert f["kernel_ms_per_device"][1] == pytest.approx(264.325, abs=5e-4)
    assert f["kernel_span_ms"] == pytest.approx(299.877, abs=5e-4)
    nccl = row(s, "nccl")
    assert nccl["count"] == 66 and nccl["ms"] == pytest.approx(25.402, abs=5e-4)
    assert f["nccl_ms_per_device"][0] == pytest.approx(17.173, abs=5e-4)
    assert f["nccl_ms_per_device"][1] == pytest.approx(8.229, abs=5e-4)
    assert s.metrics["profile_nccl_share"] == pytest.approx(0.0475, abs=5e-5)
    assert [(t["name"], t["count"], round(t["ms"], 3)) for t in s.top[:3]] == [
        ("flash_fwd_kernel", 68, 272.317),
        ("elementwise_kernel", 871, 86.870),
        ("vectorized_elementwise_kernel", 1861, 43.724),
    ]
    h2d, d2d = row(s, "memcpy_h2d"), row(s, "memcpy_d2d")
    assert (h2d["count"], h2d["bytes"]) == (34, 272)
    assert (d2d["count"], d2d["bytes"]) == (986, 8_046_134_272)
    assert d2d["ms"] == pytest.approx(5.665, abs=5e-4)
    assert "cut to the window" in f["note"]  # the file's author cut it down; the summary says so


@needs_profiles
def test_nsys_old_schema_one_gpu():
    s = summarize(PROFILES / NSYS_OLD)
    f = s.facts
    assert (s.kind, f["export_schema"], f["version"]) == ("nsys", "2.9.1", "2022.1.3.3")
    assert (f["kernels"], f["distinct_kernels"], f["streams"]) == (46, 21, 2)
    assert s.metrics["profile_kernel_ms"] == pytest.approx(0.347, abs=5e-4)
    assert f["kernel_span_ms"] == pytest.approx(1.995, abs=5e-4)
    assert s.metrics["profile_nccl_ms"] == 0
    assert [(t["name"], t["count"], round(t["ms"], 3)) for t in s.top[:3]] == [
        ("fft2d_r2c_32x32", 8, 0.057),
        ("implicit_convolve_sgemm", 6, 0.052),
        ("volta_scudnn_128x32_relu_interior_nn_v1", 2, 0.033),
    ]
    assert (row(s, "memcpy_h2d")["count"], row(s, "memcpy_h2d")["bytes"]) == (12, 259_272)


@needs_profiles
def test_nvprof_nccl_kernels_from_the_concurrent_kernel_table():
    s = summarize(PROFILES / NVPROF_NCCL)
    f = s.facts
    assert s.kind == "nvprof"
    assert (f["kernels"], len(f["devices"]), f["streams"]) == (24, 4, 12)
    # The README rounds the total to 622.777; its two kernels' sums (468.245089 + 154.531364 ms, exact in
    # the file's integer ns) give 622.776453.
    assert s.metrics["profile_kernel_ms"] == pytest.approx(622.777, abs=1e-3)
    assert s.metrics["profile_kernel_ms"] == pytest.approx(622.776453, abs=1e-9)
    assert s.metrics["profile_nccl_share"] == 1.0
    assert [(t["full_name"], t["count"], round(t["ms"], 3)) for t in s.top] == [
        ("_Z33ncclAllReduceTreeLLKernel_sum_i328ncclColl", 12, 468.245),
        ("_Z33ncclBroadcastRingLLKernel_copy_i88ncclColl", 12, 154.531),
    ]
    assert f["kernel_span_ms"] == pytest.approx(158.052, abs=5e-4)
    h2d = row(s, "memcpy_h2d")
    assert (h2d["count"], h2d["bytes"]) == (124, 22_192) and h2d["ms"] == pytest.approx(0.202, abs=5e-4)


@needs_profiles
def test_nvprof_tensorflow_mangled_names():
    s = summarize(PROFILES / NVPROF_TF)
    f = s.facts
    assert (f["kernels"], f["distinct_kernels"], f["streams"]) == (25, 13, 4)
    assert s.metrics["profile_kernel_ms"] == pytest.approx(1.231, abs=5e-4)
    assert f["kernel_span_ms"] == pytest.approx(2000.699, abs=5e-4)
    first, second, third = s.top[:3]
    assert first["full_name"].startswith("_ZN10tensorflow7functor28FillPhiloxRandomKernelLaunch")
    assert "TruncatedNormal" in first["full_name"]
    assert first["name"] == "tensorflow::functor::FillPhiloxRandomKernelLaunch"
    assert (first["count"], round(first["ms"], 3)) == (4, 0.666)
    for t in (second, third):
        assert "TensorAssignOp" in t["full_name"] and t["name"].startswith("Eigen::internal::EigenMetaKernel")
        assert (t["count"], round(t["ms"], 3)) == (4, 0.110)
    assert (row(s, "memcpy_h2d")["count"], row(s, "memcpy_h2d")["bytes"]) == (22, 13_261_996)
    assert (row(s, "memcpy_d2d")["count"], row(s, "memcpy_d2d")["bytes"]) == (26, 39_295_616)


@needs_profiles
def test_horovod_mpi_timeline_without_closing_bracket():
    assert not (PROFILES / TIMELINE).read_text().rstrip().endswith("]")
    s = summarize(PROFILES / TIMELINE)
    f = s.facts
    assert f["events"] == 21627 and f["instant_events"]["CYCLE_START"] == 13999
    assert f["open_spans"] == 0 and f["unmatched_ends"] == 0
    assert f["span_s"] == pytest.approx(189.809, abs=5e-4)
    got = {c["class"]: (c["count"], round(c["ms"], 3)) for c in s.classes}
    assert got["ALLREDUCE"] == (660, 47484.826)
    assert got["MPI_ALLREDUCE"] == (660, 47169.537)
    assert got["NEGOTIATE_ALLREDUCE"] == (660, 386700.963)
    assert got["MEMCPY_IN_FUSION_BUFFER"] == (214, 135.475)
    assert got["MEMCPY_OUT_FUSION_BUFFER"] == (214, 162.570)
    assert got["BROADCAST"][0] == got["MPI_BCAST"][0] == 13
    assert got["BROADCAST"][1] == pytest.approx(969.2, abs=0.05)
    # 6 gradient tensors reduced once per step: 660 / 6 = 110 steps, each reducing the same bytes,
    # among them the [4096, 1001] float32 tensor.
    assert (f["gradient_tensors"], f["steps"]) == (6, 110)
    assert len({st["bytes"] for st in s.steps}) == 1 and s.steps[0]["bytes"] > 4096 * 1001 * 4
    m = s.metrics
    assert m["step_comm_ms"] == pytest.approx(
        sum(st["allreduce_ms"] for st in s.steps) / 110
    )  # the per-step union of 6 spans is at most their sum: 47484.826 ms / 110
    assert m["step_comm_ms"] <= 47484.826 / 110 + 1e-9
    assert 0 <= m["step_comm_exposed_ms"] <= m["step_comm_ms"]
    assert 0 < m["step_comm_share"] < 1


@needs_profiles
def test_a_window_cuts_the_profile_into_parts_that_add_up():
    whole = summarize(PROFILES / NSYS_NEW)
    first = summarize(PROFILES / NSYS_NEW, window=(None, 0.1))
    rest = summarize(PROFILES / NSYS_NEW, window=(0.1, None))
    assert 0 < first.facts["kernels"] < whole.facts["kernels"]
    total = first.metrics["profile_kernel_ms"] + rest.metrics["profile_kernel_ms"]
    assert total == pytest.approx(whole.metrics["profile_kernel_ms"], rel=1e-9)
    late = summarize(PROFILES / TIMELINE, window=(100, None))
    assert 0 < late.facts["steps_summarized"] < 110
    assert sum(c["ms"] for c in late.classes) < sum(c["ms"] for c in summarize(PROFILES / TIMELINE).classes)


# ----------------------------------------------------------------------------------------------
# The command line, and bad input


def _cli(*args, store: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, **({"MLFLOW_TRACKING_URI": store} if store else {}))
    return subprocess.run(
        [sys.executable, "-m", "scalestudy.profile", "summarize", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
    )


@needs_profiles
def test_cli_summarizes_every_real_file():
    files = sorted(str(p) for p in PROFILES.rglob("*") if p.suffix in (".sqlite", ".nvvp", ".json"))
    assert len(files) == 6  # 2 Nsight Systems, 2 nvprof, 2 Horovod timelines (the 12-rank one added to the shared data)
    proc = _cli(*files, "--top", "3")
    assert proc.returncode == 0, proc.stderr
    for text in ("47,484.826", "flash_fwd_kernel", "ncclAllReduceTreeLLKernel_sum_i32", "622.776", "25.402"):
        assert text in proc.stdout
    as_json = json.loads(_cli(PROFILES / NVPROF_NCCL, "--json").stdout)
    assert as_json[0]["metrics"]["profile_nccl_share"] == 1.0


@needs_profiles
def test_truncated_files_give_one_line_naming_them(tmp_path):
    cut_db = tmp_path / "cut.sqlite"
    cut_db.write_bytes((PROFILES / NSYS_NEW).read_bytes()[:300_000])
    cut_tl = tmp_path / "cut_timeline.json"
    cut_tl.write_text((PROFILES / TIMELINE).read_text()[:100_003])  # ends inside an event
    for path, words in ((cut_db, "truncated SQLite database"), (cut_tl, "truncated or damaged JSON trace")):
        with pytest.raises(ProfileError, match=words):
            summarize(path)
        proc = _cli(str(path))
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0] and words in lines[0]


def test_foreign_files_are_refused(tmp_path, published_store):
    store = Path(published_store[len("sqlite:///") :])  # a real SQLite file: MLflow's, not a profile
    not_trace = tmp_path / "result.json"
    not_trace.write_text(json.dumps({"ranks": []}))
    chrome = tmp_path / "chrome.json"
    chrome.write_text(json.dumps([{"ph": "X", "name": "conv2d", "ts": 1, "dur": 2, "pid": 0}]))
    cases = [
        (store, "not an Nsight Systems or nvprof export"),
        (not_trace, "not a Chrome trace"),
        (chrome, "not a Horovod timeline"),
        (REPO / "README.md", "neither an SQLite database"),
    ]
    for path, words in cases:
        proc = _cli(str(path))
        assert proc.returncode == 2, path
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ") and words in lines[0]


@needs_profiles
def test_good_files_are_summarized_beside_a_bad_one(tmp_path):
    bad = tmp_path / "empty.nvvp"
    bad.write_bytes(b"")
    proc = _cli(str(PROFILES / NVPROF_TF), str(bad))
    assert proc.returncode == 2
    assert "FillPhiloxRandomKernelLaunch" in proc.stdout
    assert f"{bad}: empty file" in proc.stderr


def test_profile_files_are_never_copied_into_the_repository():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.split()
    assert not [p for p in tracked if p.endswith((".nvvp", ".sqlite", ".nsys-rep", ".qdrep"))]
