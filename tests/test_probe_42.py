"""Issue 42, items 4 and 5: a figure-set journal checked before it is used, and the one-line errors that were
missing (a full disk under a figure, a garbage lock file, a profile's null ts, model arguments out of range, a
cache folder that cannot be made). Replayed as the issue writes them: tests/integration/test_probe_42_integration.py."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest
from helpers import run_here
from test_atomic_writes import SET_WRITER, tiny_figure
from test_reliability import one_line_error

from scalestudy import files
from scalestudy.paper.sidecars import set_files

DEAD_PID = 2**22 + 12345  # above pid_max's default range: never alive


def _dead_pid() -> int:
    pid = DEAD_PID
    while files._alive(pid):
        pid += 1
    return pid


# ----------------------------------------------------------------------------------------------
# item 4: a figure-set journal is checked before it is used


def _figure_set(folder, stem="figure-3", pid=None):
    """A set of four new temporaries, the four old files, and a valid journal of a dead writer: [(tmp, target)]."""
    pid = pid or _dead_pid()
    pairs = []
    for ext in ("pdf", "png", "json", "caption.tex"):
        target = folder / f"{stem}.{ext}"
        target.write_text(f"old {ext}")
        tmp = folder / f".{target.name}.{pid}.tmp"
        tmp.write_text(f"new {ext}")
        pairs.append((tmp, target))
    return pairs, pid


def _write_journal(folder, first, pid, content) -> os.PathLike:
    journal = folder / f".{first}.{pid}.set"
    journal.write_text(content if isinstance(content, str) else json.dumps(content))
    return journal


MALFORMED = {
    "list-of-numbers": [1, 2],  # once: TypeError (a bug), every build blocked
    "an-object": {"a": 1},
    "not-json": "garbage\x00",
    "one-pair": [["a", "b"]],
    "pairs-of-three": [["a", "b", "c"], ["d", "e", "f"]],
    "empty": "",
}


@pytest.mark.parametrize("content", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_journal_is_set_aside_in_one_line_and_blocks_nothing(tmp_path, capsys, content):
    pid = _dead_pid()
    journal = _write_journal(tmp_path, "figure-3.pdf", pid, content)
    (tmp_path / "figure-3.pdf").write_text("old pdf")
    assert files.remove_stale_temporaries(tmp_path, set_files) == []
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: {journal}: not a journal of a set"), err
    assert f"set aside as .figure-3.pdf.{pid}.set.rejected" in err[0] and "(a bug)" not in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".figure-3.pdf.{pid}.set.rejected", "figure-3.pdf"]
    assert (tmp_path / "figure-3.pdf").read_text() == "old pdf"
    files.remove_stale_temporaries(tmp_path, set_files)  # set aside once: the next build says nothing
    assert capsys.readouterr().err == ""


def test_a_journal_naming_files_outside_its_folder_renames_nothing(tmp_path, capsys):
    """The issue's journal: `../a` and `../b`, each with a file of the writer's temporary name there."""
    figures_dir = tmp_path / "paper" / "figures"
    figures_dir.mkdir(parents=True)
    outside = tmp_path / "paper"
    pid = _dead_pid()
    for name in ("a", "b"):
        (outside / name).write_text(f"precious {name}")
        (outside / f".{name}.{pid}.tmp").write_text("attacker's")
    pairs = [[str(figures_dir / ".." / f".{n}.{pid}.tmp"), str(figures_dir / ".." / n)] for n in ("a", "b")]
    journal = _write_journal(figures_dir, "a", pid, pairs)
    files.remove_stale_temporaries(figures_dir, set_files)
    assert [(outside / n).read_text() for n in ("a", "b")] == ["precious a", "precious b"]
    assert (outside / f".a.{pid}.tmp").exists()  # nothing outside the folder touched, not even removed
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"warning: {journal}:") and "is not a file of" in err and len(err.splitlines()) == 1


def test_a_journal_of_resolved_paths_outside_or_of_another_set_is_refused(tmp_path, capsys):
    pid = _dead_pid()
    cases = {
        "absolute elsewhere": [[f"/tmp/.x.{pid}.tmp", "/tmp/x"], [f"/tmp/.y.{pid}.tmp", "/tmp/y"]],
        "another figure's file": [[str(tmp_path / f".figure-3.pdf.{pid}.tmp"), str(tmp_path / "figure-3.pdf")],
                                  [str(tmp_path / f".figure-4.png.{pid}.tmp"), str(tmp_path / "figure-4.png")]],
        "a temporary of another pid": [[str(tmp_path / ".figure-3.pdf.1.tmp"), str(tmp_path / "figure-3.pdf")],
                                       [str(tmp_path / ".figure-3.png.1.tmp"), str(tmp_path / "figure-3.png")]],
    }  # fmt: skip
    for pairs in cases.values():
        journal = _write_journal(tmp_path, "figure-3.pdf", pid, pairs)
        with pytest.raises(ValueError):
            files.journal_pairs(journal, set_files)
        journal.unlink()
    (tmp_path / "figure-4.png").write_text("figure 4")
    (tmp_path / f".figure-4.png.{pid}.tmp").write_text("forged")
    _write_journal(tmp_path, "figure-3.pdf", pid, cases["another figure's file"])
    files.remove_stale_temporaries(tmp_path, set_files)
    assert (tmp_path / "figure-4.png").read_text() == "figure 4"
    assert "is not one of the files of figure-3.pdf's set" in capsys.readouterr().err


def test_a_valid_journal_of_the_builder_is_still_completed(tmp_path, capsys):
    pairs, pid = _figure_set(tmp_path)
    _write_journal(tmp_path, "figure-3.pdf", pid, [[str(t.resolve()), str(g.resolve())] for t, g in pairs])
    done = files.complete_interrupted_sets(tmp_path, set_files)
    assert sorted(p.name for p in done) == sorted(g.name for _, g in pairs)
    assert [g.read_text() for _, g in pairs] == ["new pdf", "new png", "new json", "new caption.tex"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(g.name for _, g in pairs)


def test_a_journal_a_killed_builder_leaves_passes_the_check(tmp_path):
    """What atomic_files writes is what journal_pairs accepts (a real writer, SIGKILLed between two renames)."""
    for name in ("f.pdf", "f.png", "f.json", "f.caption.tex"):
        (tmp_path / name).write_text("old")
    env = dict(os.environ, SCALESTUDY_KILL_AT_RENAME="2")
    proc = subprocess.run([sys.executable, "-c", SET_WRITER, str(tmp_path)], env=env, capture_output=True)
    assert proc.returncode == -9
    (journal,) = [p for p in tmp_path.iterdir() if files.JOURNAL.match(p.name)]
    assert len(files.journal_pairs(journal, set_files)) == 4


def test_the_builder_sets_aside_a_bad_journal_and_builds(tmp_path, published_store, monkeypatch, capsys):
    figures_dir = tmp_path / "figures"
    figures_dir.mkdir()
    journal = _write_journal(figures_dir, "figure-3.pdf", _dead_pid(), [1, 2])
    proc = run_here("scalestudy.paper", "figure-3", f"out_dir={tmp_path}", uri=published_store,
                    monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"warning: {journal}: not a journal" in proc.stderr and "(a bug)" not in proc.stderr
    assert (figures_dir / "figure-3.pdf").is_file()


# ----------------------------------------------------------------------------------------------
# item 5: a full disk while a figure is written


def _full_disk_in_pdf(monkeypatch):
    """A write of the PDF fails as on a full disk; matplotlib then fails again while handling it (its 'Stream' has
    no 'pos'), so the error raised is an AttributeError whose context is the ENOSPC."""
    from matplotlib.figure import Figure

    real = Figure.savefig

    def savefig(self, fname, *args, **kwargs):
        if kwargs.get("format") != "pdf":
            return real(self, fname, *args, **kwargs)
        open(fname, "wb").write(b"%PDF-1.4 half")  # noqa: SIM115 - half a file, as a full disk leaves it
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise AttributeError("'Stream' object has no attribute 'pos'")  # noqa: B904 - as matplotlib does

    monkeypatch.setattr(Figure, "savefig", savefig)


def test_a_full_disk_while_a_figure_is_written_is_one_line_naming_the_file(tmp_path, monkeypatch, capsys):
    from scalestudy.cli import run
    from scalestudy.paper import figures

    spec, runs = tiny_figure("first")
    paths = figures.build_figure(spec, runs, source="published", out_dir=tmp_path, commit="c1")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    _full_disk_in_pdf(monkeypatch)
    status = run(lambda argv: figures.build_figure(spec, runs, source="published", out_dir=tmp_path, commit="c2"), [])
    err = capsys.readouterr().err
    proc = subprocess.CompletedProcess([], status, "", err)
    line = one_line_error(proc, f"error: {paths[0]} could not be written: no space left on the device")
    assert "(a bug)" not in line and "Stream" not in line and "[Errno" not in line
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # old files, no temporary left


FAILED_WRITES = [(errno.ENOSPC, "no space left on the device"), (errno.EACCES, "permission denied: make"),
                 (errno.EIO, "input/output")]  # fmt: skip


@pytest.mark.parametrize("errno_, said", FAILED_WRITES)
def test_a_failed_write_of_a_set_names_the_file_and_what_to_do(tmp_path, errno_, said):
    target = tmp_path / "table-1.tex"
    with pytest.raises(files.WriteError) as failed, files.atomic_files(target, tmp_path / "table-1.json") as tmps:
        tmps[0].write_text("half")
        raise OSError(errno_, os.strerror(errno_))
    assert str(failed.value).startswith(f"{target} (and 1 other file(s) of its set) could not be written: {said}")
    assert failed.value.errno == errno_ and list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------------------------
# item 5: a garbage lock file; a profile's null ts; model arguments; a cache folder that cannot be made


def test_garbage_in_the_store_lock_is_one_line_naming_it_and_the_remedy(store_copy, tmp_path):
    from helpers import run_module

    store = store_copy[len("sqlite:///") :]
    lock = f"{store}.lock"
    with open(lock, "w") as handle:
        handle.write("garbage\n" * 100)
    for module, args in (
        ("scalestudy.paper", ["table-1", f"out_dir={tmp_path}"]),
        ("scalestudy.ingest", ["malik-2018"]),
    ):
        proc = run_module(module, *args, uri=store_copy, check=False)
        line = one_line_error(proc, f"its lock file {lock} is not a lock", f"remove it (rm {lock})")
        assert "(a bug)" not in line and "DatabaseError" not in line
    assert not (tmp_path / "tables").exists() or list((tmp_path / "tables").iterdir()) == []


def test_a_profile_event_with_a_null_ts_is_refused_naming_it(tmp_path, monkeypatch, capsys):
    timeline = tmp_path / "timeline.json"
    events = [{"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "allreduce.x"}},
              {"ph": "i", "pid": 0, "name": "CYCLE_START", "ts": None, "s": "g"},
              {"ph": "B", "pid": 0, "name": "ALLREDUCE", "ts": 5}, {"ph": "E", "pid": 0, "ts": 9}]  # fmt: skip
    timeline.write_text(json.dumps(events))
    proc = run_here("scalestudy.profile", "summarize", str(timeline), uri="sqlite:///unused.db",
                    monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    one_line_error(proc, f"error: {timeline}: event 2 ('i' 'CYCLE_START'): ts null is not a finite number")


MODEL_ARGUMENTS = [
    ("workers=99999999999999999999999", "argument workers is 99999999999999999999999, more than 10,000,000"),
    ("batch_per_worker=1e30", "argument batch_per_worker is 1e+30, more than 10,000,000"),
    ("fp16=maybe", "argument fp16 is 'maybe': write fp16=true or fp16=false"),
    ("fp16=1", "argument fp16 is 1: write fp16=true or fp16=false"),
    ("envelope.level=abc", "argument envelope.level is 'abc', not a number between 0 and 1"),
    ("envelope.level=2", "argument envelope.level is 2, not a number between 0 and 1"),
    ("envelope.level=0", "argument envelope.level is 0, not a number between 0 and 1"),
    ("envelope.overlaps=1", "argument envelope.overlaps is 1, not a whole number >= 2"),
    ("fit_max_workers=x", "argument fit_max_workers is 'x', not a whole number"),
    ("seed=abc", "unknown key 'seed' (known: model, workers,"),
    ("bootstrap=-1", "unknown key 'bootstrap' (known: model, workers,"),
]


@pytest.mark.parametrize("argument, expected", MODEL_ARGUMENTS, ids=[a for a, _ in MODEL_ARGUMENTS])
def test_model_predict_refuses_an_argument_out_of_range_naming_it(tmp_path, monkeypatch, capsys, argument, expected):
    """Checked before the store is read (this store does not exist)."""
    proc = run_here("scalestudy.scaling", "predict", argument, uri=f"sqlite:///{tmp_path / 'none.db'}",
                    monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    line = one_line_error(proc, f"error: {expected}")
    assert "(a bug)" not in line and proc.stdout == ""


def test_the_model_takes_fp16_true_and_false_only_as_booleans():
    from scalestudy.scaling.command_line import load_settings

    assert load_settings(["fp16=true"])["predict"]["fp16"] is True
    assert load_settings(["fp16=false", "envelope.level=0.9"])["predict"]["fp16"] is False


def test_a_cache_folder_that_cannot_be_made_is_one_line_naming_it_and_the_remedy(tmp_path, monkeypatch):
    from scalestudy.ingest import fetch
    from scalestudy.schema import SchemaError

    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(a_file / "cache"))
    monkeypatch.delenv("SCALESTUDY_DATA_MIRROR", raising=False)
    raw = fetch.RawFile("logs/1.err", "http://127.0.0.1:9/1.err", "0" * 64, "source.yaml:3")
    with pytest.raises(SchemaError) as refused:
        fetch.fetch_raw_files("hacksa-2019", [raw])
    said = str(refused.value)
    assert said.startswith(f"cache folder {a_file / 'cache' / 'hacksa-2019' / 'logs'} cannot be made (Not a directory)")
    assert f"set SCALESTUDY_DATA_CACHE to a folder this user can write (now {a_file / 'cache'})" in said
    assert "[Errno" not in said and a_file.read_text() == "not a folder"


# ----------------------------------------------------------------------------------------------
# item 6: a web server answering `{}` to everything is not MLflow; MLflow's "View run" lines are silenced


@pytest.fixture
def answers_empty_json():
    """A real HTTP server on loopback answering 200 `{}` to every GET and POST, as the issue's probe did."""
    import http.server
    import threading

    class Empty(http.server.BaseHTTPRequestHandler):
        def _answer(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        do_GET = do_POST = _answer

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Empty)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_server_answering_empty_json_to_everything_is_refused_by_what_it_answers(answers_empty_json, monkeypatch):
    from scalestudy.store.address import StoreError, check_server

    with pytest.raises(StoreError) as refused:
        check_server(answers_empty_json)
    said = str(refused.value)
    assert said.startswith(f"tracking URI {answers_empty_json} answers, but not as an MLflow server")
    assert "not 404 RESOURCE_DOES_NOT_EXIST" in said and "HTTP 200 '{}'" in said


def test_mlflow_is_told_not_to_print_a_view_run_line_per_run(monkeypatch, answers_empty_json):
    from scalestudy.store.address import StoreError, check_server

    monkeypatch.delenv("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", raising=False)
    with pytest.raises(StoreError):
        check_server(answers_empty_json)
    assert os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] == "true"


# ----------------------------------------------------------------------------------------------
# item 6: a server that stops answering after the probes fails in one timeout, one line (was 70 s with MLflow's
# retries and the clean-up calls of a write cut short)


@pytest.fixture
def answers_probes_then_hangs(monkeypatch):
    """A real HTTP server on loopback that answers the store's probes as MLflow does, then never answers."""
    import http.server
    import threading

    release = threading.Event()
    experiments = {"experiments": [{"experiment_id": "1", "name": "x", "lifecycle_stage": "active", "tags": []}]}

    class Probed(http.server.BaseHTTPRequestHandler):
        def _send(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if "experiments/search" in self.path:
                return self._send(200, experiments)
            if "experiments/get-by-name" in self.path:
                return self._send(404, {"error_code": "RESOURCE_DOES_NOT_EXIST"})
            release.wait(30)

        def do_POST(self):
            release.wait(30)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Probed)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "1")
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    release.set()
    server.shutdown()
    server.server_close()


def test_a_server_that_stops_answering_a_read_is_one_line_within_the_timeout(answers_probes_then_hangs):
    import time

    from scalestudy.store import ServerGone, load_runs

    started = time.monotonic()
    with pytest.raises(ServerGone) as refused:
        load_runs(answers_probes_then_hangs)
    assert time.monotonic() - started < 5  # one wait of 1 s, no retries (MLflow's default 2 waited three times)
    assert str(refused.value) == (
        f"tracking server {answers_probes_then_hangs} stopped answering (no answer within 1 s, "
        "SCALESTUDY_HTTP_TIMEOUT): start it again and run the command again; nothing was written"
    )


def test_a_server_that_stops_answering_a_write_is_one_line_without_clean_up_calls(answers_probes_then_hangs):
    import time

    from test_store_write_values import rec

    from scalestudy.store import ServerGone, sync_experiment

    started = time.monotonic()
    with pytest.raises(ServerGone) as refused:
        sync_experiment("x", [rec("a", 1, 100.0, experiment="x")], answers_probes_then_hangs)
    assert time.monotonic() - started < 5
    assert str(refused.value).startswith(
        f"tracking server {answers_probes_then_hangs} stopped answering while being written (no answer within 1 s"
    )
    assert "an import cut short is completed by the next one" in str(refused.value)


def test_a_server_gone_is_told_from_other_failures_through_mlflows_wrapping():
    import requests
    from mlflow.exceptions import MlflowException

    from scalestudy.store.address import server_gone

    try:
        try:
            raise requests.exceptions.ReadTimeout("read timed out")
        except requests.exceptions.ReadTimeout:
            raise MlflowException("API request failed with exception ...")  # noqa: B904 (MLflow raises it so)
    except MlflowException as wrapped:
        assert server_gone(wrapped)
    assert server_gone(requests.exceptions.ConnectionError("refused"))
    assert not server_gone(MlflowException("RESOURCE_DOES_NOT_EXIST"))
    assert not server_gone(ValueError("x"))
