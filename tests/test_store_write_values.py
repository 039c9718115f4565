"""The store's writer (store/write.py) checked value by value in the test's own process: a half-made store made
again (and the line that says so), a moved store's artifact locations, experiment names, an import's plan and
counts (dry, additive, claimed keys), the notes of what an import repaired, the writes a run costs, and a write
that fails half-way rolled back. The integration tests run several of these through subprocesses; here each
output is compared with the value worked out by hand."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from scalestudy.schema import RunRecord, SchemaError
from scalestudy.store import StoreError, load_runs, relocate_artifacts, sync_experiment, sync_runs
from scalestudy.store import artifacts as store_artifacts
from scalestudy.store import write as store_write
from scalestudy.store.address import HALF_MADE, half_made

OLD_REVISION = "0584bdc529eb"  # an MLflow schema revision short of the head (dc11669786a5)


def rec(key: str, workers: int, value: float, experiment: str = "unit", **extra) -> RunRecord:
    params = {"model": "resnet50", "framework": "tensorflow", "workers": workers, "device": "P100",
              "data": "synthetic", "batch_per_worker": 64, "platform": "test-box"}  # fmt: skip
    return RunRecord(experiment=experiment, key=key, params=params, metrics={"throughput_total": value},
                     tags={"source": "published", "citation": "unit test"}, where=f"test:{key}", **extra)  # fmt: skip


def client(uri: str):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri)


def experiment_tags(uri: str, name: str = "unit") -> dict:
    return client(uri).get_experiment_by_name(name).tags


# --------------------------------------------------------------------------------------------
# A half-made store: what a first writer killed while MLflow made its tables leaves (made by hand here: the tables
# half_made reads, a revision short of the head, no run; the integration test kills a real import to get one)


def half_made_store(path: Path, revision: str | None = OLD_REVISION, experiments: tuple[int, ...] = (0,),
                    runs: int = 0) -> Path:  # fmt: skip
    con = sqlite3.connect(path)
    with con:
        if revision is not None:
            con.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
            con.execute("INSERT INTO alembic_version VALUES (?)", (revision,))
        con.execute("CREATE TABLE experiments (experiment_id INTEGER, name TEXT)")
        con.executemany("INSERT INTO experiments VALUES (?, ?)", [(e, f"e{e}") for e in experiments])
        if runs:
            con.execute("CREATE TABLE runs (run_uuid TEXT)")
            con.executemany("INSERT INTO runs VALUES (?)", [(str(i),) for i in range(runs)])
    con.close()
    return path


def test_what_counts_as_half_made(tmp_path):
    assert half_made(half_made_store(tmp_path / "a.db")) == f"schema revision {OLD_REVISION}, 2 tables, no run"
    assert half_made(half_made_store(tmp_path / "b.db", revision=None)) == "schema revision none, 1 tables, no run"
    assert half_made(half_made_store(tmp_path / "c.db", experiments=())) == (
        f"schema revision {OLD_REVISION}, 2 tables, no run"
    )
    # holding something: an older store, not ours to remake
    assert half_made(half_made_store(tmp_path / "d.db", experiments=(0, 1))) is None
    assert half_made(half_made_store(tmp_path / "e.db", runs=1)) is None
    assert half_made(half_made_store(tmp_path / "f.db", revision="dc11669786a5")) is None  # the head: whole
    (tmp_path / "g.db").write_bytes(b"")
    assert half_made(tmp_path / "g.db") is None  # MLflow makes an empty file's tables
    (tmp_path / "h.db").write_text("not a database, but long enough to be read as one " * 20)
    assert half_made(tmp_path / "h.db") is None  # the reader says what it is
    assert half_made(tmp_path / "missing.db") is None


def test_a_half_made_store_is_refused_by_readers_and_made_again_by_a_writer(tmp_path, capsys):
    path = half_made_store(tmp_path / "store.db")
    uri = f"sqlite:///{path}"
    with pytest.raises(StoreError) as err:
        load_runs(uri)
    why = f"schema revision {OLD_REVISION}, 2 tables, no run"
    assert str(err.value) == HALF_MADE.format(path=path, why=why)
    assert str(err.value) == (
        f"store {path} is half-made ({why}): an import was stopped while MLflow created its tables; run `make "
        "import` (python -m scalestudy.ingest), which makes it again"
    )
    for leftover in ("-journal", "-wal", "-shm"):
        (tmp_path / f"store.db{leftover}").write_bytes(b"")  # empty: not a hot journal
    capsys.readouterr()
    store_write._remake_half_made(path)  # what a writer does first (client_for); MLflow then makes the tables
    assert capsys.readouterr().err == (
        f"store {path} was half-made ({why}: an import stopped while MLflow created its tables); made again\n"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["store.db.lock"]  # the file and SQLite's leftovers removed
    whole = half_made_store(path, revision="dc11669786a5")
    store_write._remake_half_made(whole)
    assert whole.is_file() and capsys.readouterr().err == ""


def test_a_half_made_store_without_leftovers_and_one_at_the_installed_head(tmp_path, capsys, monkeypatch):
    """The usual half-made store has no journal beside it; and the head a writer compares with is the installed
    MLflow's (a newer MLflow's store is whole even where address.KNOWN_SCHEMA_REVISIONS lags behind)."""
    path = half_made_store(tmp_path / "store.db")
    store_write._remake_half_made(path)
    assert not path.exists() and "was half-made" in capsys.readouterr().err
    assert store_write._schema_head() == "dc11669786a5"
    monkeypatch.setattr(store_write, "_schema_head", lambda: "ffffffffffff")
    newer = half_made_store(tmp_path / "newer.db", revision="ffffffffffff")
    store_write._remake_half_made(newer)
    assert newer.is_file() and capsys.readouterr().err == ""
    older = half_made_store(tmp_path / "older.db", revision="dc11669786a5")  # short of that head: half-made
    store_write._remake_half_made(older)
    assert not older.exists() and "schema revision dc11669786a5, 2 tables" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# A store that moved: its experiments' artifact locations, and its runs' artifact URIs, re-pointed beside it


def test_a_moved_store_has_its_artifact_locations_re_pointed(empty_store, tmp_path):
    log = tmp_path / "job.log"
    log.write_text("log\n")
    sync_experiment("unit", [rec("a", 1, 100.0, artifacts={"logs": str(log)})], empty_store)
    sync_experiment("other", [rec("b", 2, 190.0, experiment="other")], empty_store)
    moved = tmp_path / "moved" / "copy.db"
    moved.parent.mkdir()
    moved.write_bytes(Path(empty_store[len("sqlite:///") :]).read_bytes())
    uri = f"sqlite:///{moved}"
    assert relocate_artifacts(uri) == 3  # Default (MLflow's plain path, re-pointed when made) and the two others
    con = sqlite3.connect(moved)
    locations = dict(con.execute("SELECT name, artifact_location FROM experiments"))
    uris = [u for (u,) in con.execute("SELECT artifact_uri FROM runs")]
    con.close()
    root = (moved.parent / "copy-artifacts").resolve().as_uri()
    assert locations["unit"] == f"{root}/unit" and locations["other"] == f"{root}/other"
    assert locations["Default"] == f"{root}/0"
    assert sorted(u.split("/artifacts")[0].rsplit("/", 1)[0] for u in uris) == [f"{root}/other", f"{root}/unit"]
    assert all(u.endswith("/artifacts") for u in uris)
    assert relocate_artifacts(uri) == 0  # nothing moved since
    assert relocate_artifacts(f"sqlite:///{tmp_path / 'none.db'}") == 0  # no store there


def test_a_store_of_an_mlflow_this_was_not_checked_against_is_left_alone(empty_store, tmp_path):
    sync_experiment("unit", [rec("a", 1, 100.0)], empty_store)
    moved = tmp_path / "moved.db"
    moved.write_bytes(Path(empty_store[len("sqlite:///") :]).read_bytes())
    con = sqlite3.connect(moved)
    with con:
        con.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")
    before = list(con.execute("SELECT artifact_location FROM experiments ORDER BY experiment_id"))
    assert store_artifacts._relocate(moved, "moved-artifacts", (tmp_path / "moved-artifacts").as_uri()) == 0
    assert list(con.execute("SELECT artifact_location FROM experiments ORDER BY experiment_id")) == before
    con.close()


# --------------------------------------------------------------------------------------------
# Experiment names (they name a folder beside the store)


@pytest.mark.parametrize("name", ["unit", "a b.c_d+e=f@g,h(i)-j", "9" * 200, "x.y"])
def test_an_experiment_name_that_is_a_safe_folder_name_is_kept(name):
    assert store_write.check_experiment_name(name) == name


@pytest.mark.parametrize("name", ["", "../up", "a/b", "a..b", ".hidden", "-x", "9" * 201, "tab\there", "é"])
def test_an_experiment_name_that_is_not_a_safe_folder_name_is_one_line(name):
    with pytest.raises(SchemaError) as err:
        store_write.check_experiment_name(name)
    assert str(err.value) == (
        f"experiment name {name!r}: use letters, digits, spaces and . _ + = @ , ( ) - only, starting with a letter "
        "or digit, without '/' or '..' (it names the experiment's artifact folder beside the store)"
    )


def test_a_deleted_experiment_is_restored_by_the_next_import(empty_store):
    sync_experiment("unit", [rec("a", 1, 100.0)], empty_store)
    found = client(empty_store).get_experiment_by_name("unit")
    client(empty_store).delete_experiment(found.experiment_id)
    assert sync_experiment("unit", [rec("a", 1, 100.0)], empty_store)["unchanged"] == 1
    again = client(empty_store).get_experiment_by_name("unit")
    assert (again.experiment_id, again.lifecycle_stage) == (found.experiment_id, "active")
    assert found.tags["mlflow.experimentKind"] == "custom_model_development"


# --------------------------------------------------------------------------------------------
# The checks before anything is written


def test_records_of_another_experiment_or_repeated_keys_are_refused_by_name():
    with pytest.raises(SchemaError) as err:
        store_write.check_records("unit", [rec("a", 1, 1.0), rec("b", 2, 2.0, experiment="other")])
    assert str(err.value) == "test:b: run 'b' belongs to 'other', not 'unit'"
    first, second = rec("a", 1, 1.0), rec("a", 2, 2.0)
    second.where = "test:second"
    with pytest.raises(SchemaError) as err:
        store_write.check_records("unit", [first, second])
    assert str(err.value) == "test:second: run key 'a' repeats test:a"


# --------------------------------------------------------------------------------------------
# The writes one run costs (each counted by _wrote: the kill test's points), and batches of 100 params / 1000 points


def test_a_run_with_many_params_and_points_is_written_whole_in_batches(empty_store, tmp_path, monkeypatch):
    big = rec("big", 8, 700.0, start_ms=1_000, end_ms=9_000)
    big.params.update({f"p{i:03d}": i for i in range(150)})  # 157 params: two batches of at most 100
    big.series = {"step_throughput_total": [(s, 1_000 + s, float(s + 1)) for s in range(1, 1501)]}  # 1500 points
    (tmp_path / "a.log").write_text("a\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "b.log").write_text("b\n")
    big.artifacts = {"log": str(tmp_path / "a.log"), "more": str(tmp_path / "dir")}
    monkeypatch.setattr(store_write, "_writes", 0)
    from mlflow import MlflowClient

    batches, log_batch = [], MlflowClient.log_batch

    def spy(self, run_id, metrics=(), params=(), tags=(), **kwargs):
        batches.append((len(params), len(metrics), [t.key for t in tags]))
        return log_batch(self, run_id, metrics=metrics, params=params, tags=tags, **kwargs)

    monkeypatch.setattr(MlflowClient, "log_batch", spy)
    sync_experiment("unit", [big], empty_store)
    # 157 params, 1 metric + 1500 points; the hashes in the last batch only: a run cut after the first has none
    assert batches == [(100, 1000, []), (57, 501, ["values_hash", "content_hash"])]
    # writing mark 1; create 1; artifacts 2; status 1; batches max(2 param, 2 metric chunks) = 2, the hashes in the
    # last; run count 1; complete 1; ledger 1
    assert store_write._writes == 10
    run = client(empty_store).get_run(load_runs(empty_store).run_id[0])
    numbered = {k: v for k, v in run.data.params.items() if k[0] == "p" and k[1:].isdigit()}
    assert numbered == {f"p{i:03d}": str(i) for i in range(150)}
    assert run.data.params["workers"] == "8" and len(run.data.params) == 157
    history = client(empty_store).get_metric_history(run.info.run_id, "step_throughput_total")
    assert sorted((m.step, m.timestamp, m.value) for m in history) == [(s, 1_000 + s, s + 1.0) for s in range(1, 1501)]
    assert (run.info.start_time, run.info.end_time, run.info.status) == (1_000, 9_000, "FINISHED")
    assert run.data.metrics == {"throughput_total": 700.0, "step_throughput_total": 1501.0}
    artifacts = sorted(f.path for f in client(empty_store).list_artifacts(run.info.run_id, "more"))
    assert [f.path for f in client(empty_store).list_artifacts(run.info.run_id, "log")] == ["log/a.log"]
    assert artifacts == ["more/b.log"]  # a folder keeps its layout


# --------------------------------------------------------------------------------------------
# An import's plan and counts


def test_a_dry_run_plans_without_writing(empty_store, tmp_path):
    missing = tmp_path / "new" / "store.db"
    plan = sync_runs("unit", [rec("a", 1, 1.0), rec("b", 2, 2.0)], f"sqlite:///{missing}", dry_run=True)
    assert plan.status == {"a": "created", "b": "created"} and not missing.parent.exists()
    plan = sync_runs("unit", [rec("a", 1, 1.0)], empty_store, dry_run=True)  # the store exists, the experiment not
    assert plan.status == {"a": "created"} and client(empty_store).get_experiment_by_name("unit") is None
    sync_experiment("unit", [rec("a", 1, 1.0), rec("b", 2, 2.0)], empty_store)
    before = load_runs(empty_store)
    plan = sync_runs("unit", [rec("a", 1, 1.0), rec("b", 2, 3.0), rec("c", 4, 4.0)], empty_store, dry_run=True)
    assert plan.status == {"a": "unchanged", "b": "updated", "c": "created"}
    assert plan.counts() == {"created": 1, "updated": 1, "unchanged": 1, "deleted": 0, "repaired": 0}
    assert load_runs(empty_store).run_id.tolist() == before.run_id.tolist()  # nothing written


def test_an_additive_import_keeps_the_runs_it_does_not_name(empty_store):
    sync_experiment("unit", [rec("a", 1, 1.0), rec("b", 2, 2.0)], empty_store)
    plan = sync_runs("unit", [rec("c", 4, 4.0)], empty_store, keep_others=True)
    assert plan.counts() == {"created": 1, "updated": 0, "unchanged": 0, "deleted": 0, "repaired": 0}
    assert sorted(load_runs(empty_store).import_key) == ["a", "b", "c"]
    assert experiment_tags(empty_store)["scalestudy.runs"] == "3"
    plan = sync_runs("unit", [rec("c", 4, 4.0)], empty_store)  # not additive: a and b are gone from the source
    assert sorted(tags["import_key"] for tags in plan.removed) == ["a", "b"]
    assert plan.counts() == {"created": 0, "updated": 0, "unchanged": 1, "deleted": 2, "repaired": 0}
    assert experiment_tags(empty_store)["scalestudy.runs"] == "1"
    assert experiment_tags(empty_store)["scalestudy.import"] == "complete"


def test_a_record_claims_the_run_of_its_old_key(empty_store):
    sync_experiment("unit", [rec("old-a", 1, 1.0), rec("keep", 2, 2.0)], empty_store)
    old_id = load_runs(empty_store).set_index("import_key").run_id["old-a"]
    mlflow = client(empty_store)  # a whole run without an import key (written by another program): claimed as ""
    keyless = mlflow.create_run(mlflow.get_experiment_by_name("unit").experiment_id, tags={"source": "other"})
    mlflow.log_metric(keyless.info.run_id, "throughput_total", 3.0)
    mlflow.set_terminated(keyless.info.run_id, "FINISHED")
    mlflow.set_tag(keyless.info.run_id, "content_hash", "0" * 16)
    seen = []

    def claim(key, tags, metrics):
        seen.append((key, tags["source"], metrics["throughput_total"]))
        return "a" if key == "old-a" else None

    # a dry run plans the same claim, under the readers' lock (here beside another reader of the store)
    from scalestudy.store.lock import store_lock

    with store_lock(empty_store, write=False):
        dry = sync_runs("unit", [rec("a", 1, 1.0)], empty_store, keep_others=True, claim=claim, dry_run=True)
    assert dry.status == {"a": "repaired"} and dry.removed == []
    seen.clear()
    plan = sync_runs("unit", [rec("a", 1, 1.0)], empty_store, keep_others=True, claim=claim)
    assert sorted(seen) == [("", "other", 3.0), ("keep", "published", 2.0), ("old-a", "published", 1.0)]
    # the claimed run holds the same values but its key: rewritten under the new key, the old one deleted
    assert plan.status == {"a": "repaired"} and plan.removed == []
    assert plan.notes == [f"run {old_id} (key a): tag import_key was old-a, the source says a"]
    kept = load_runs(empty_store, sealed=False).import_key  # the keyless run is not sealed: read it as it is
    assert sorted(kept.dropna()) == ["a", "keep"] and kept.isna().sum() == 1  # old-a replaced, not kept beside it


# --------------------------------------------------------------------------------------------
# What an import repairs, and the line it notes for each


def test_the_notes_of_what_an_import_repaired(empty_store):
    sync_experiment("unit", [rec("a", 1, 100.0), rec("b", 2, 190.0), rec("c", 4, 370.0)], empty_store)
    runs = load_runs(empty_store).set_index("import_key").run_id
    mlflow = client(empty_store)
    experiment_id = mlflow.get_experiment_by_name("unit").experiment_id
    mlflow.log_metric(runs["a"], "throughput_total", 9999.0)  # changed behind the import's back, twice
    mlflow.set_tag(runs["a"], "citation", "edited")
    mlflow.delete_run(runs["b"])  # deleted outside an import
    mlflow.create_run(experiment_id, tags={"import_key": "c"})  # cut short: no content hash
    notes: list[str] = []
    counts = sync_experiment("unit", [rec("a", 1, 100.0), rec("b", 2, 190.0), rec("c", 4, 370.0)], empty_store,
                             notes=notes)  # fmt: skip
    assert counts == {"created": 0, "updated": 0, "unchanged": 1, "deleted": 0, "repaired": 3}
    assert notes == [
        "1 incomplete run(s) left by an interrupted import deleted",
        f"run {runs['a']} (key a): metric throughput_total was 9999.0, the source says 100.0; tag citation was "
        "edited, the source says unit test",
        "run of key b was deleted outside an import: written again",
    ]
    table = load_runs(empty_store).set_index("import_key")
    assert table.throughput_total.to_dict() == {"a": 100.0, "b": 190.0, "c": 370.0}
    assert table.loc["c", "run_id"] == runs["c"]  # the whole one kept


# --------------------------------------------------------------------------------------------
# A write that fails half-way: the runs written so far deleted again, the experiment's mark as it was


def test_a_write_failing_half_way_is_undone(empty_store, tmp_path):
    sync_experiment("unit", [rec("a", 1, 100.0)], empty_store)
    before = load_runs(empty_store)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "gone").symlink_to(tmp_path / "nowhere")  # a dangling link: the digest skips it, the copy fails
    records = [rec("a", 1, 100.0), rec("b", 2, 190.0), rec("c", 4, 370.0, artifacts={"logs": str(broken)})]
    with pytest.raises(StoreError) as err:
        sync_experiment("unit", records, empty_store)
    assert str(err.value) == (
        f"store {empty_store}: writing failed: FileNotFoundError: [Errno 2] No such file or directory: "
        f"'{broken / 'gone'}'"
    )
    after = load_runs(empty_store)
    assert after.run_id.tolist() == before.run_id.tolist()  # b, written before c failed, deleted again
    assert experiment_tags(empty_store)["scalestudy.import"] == "complete"  # as it was before
    deleted = client(empty_store).search_runs([after.experiment_id[0]], run_view_type=2)  # ViewType.DELETED_ONLY
    assert [run.data.tags["import_key"] for run in deleted] == ["b"]
    # left "writing" by an import killed before: a failed import leaves it so, never marks it complete
    client(empty_store).set_experiment_tag(after.experiment_id[0], "scalestudy.import", "writing")
    with pytest.raises(StoreError):
        sync_experiment("unit", records, empty_store)
    assert experiment_tags(empty_store)["scalestudy.import"] == "writing"
    # a new experiment (no state yet) whose first import fails: complete with no run, the same message
    with pytest.raises(StoreError) as err:
        sync_experiment("fresh", [rec("c", 4, 370.0, experiment="fresh", artifacts={"logs": str(broken)})], empty_store)
    assert str(err.value).endswith(f"No such file or directory: '{broken / 'gone'}'")
    assert experiment_tags(empty_store, "fresh")["scalestudy.import"] == "complete"


def test_an_import_that_changes_nothing_writes_nothing(empty_store, monkeypatch):
    sync_experiment("unit", [rec("a", 1, 100.0), rec("b", 2, 190.0)], empty_store)
    monkeypatch.setattr(store_write, "_writes", 0)
    again = sync_experiment("unit", [rec("a", 1, 100.0), rec("b", 2, 190.0)], empty_store)
    assert again == {"created": 0, "updated": 0, "repaired": 0, "unchanged": 2, "deleted": 0}
    assert store_write._writes == 0
    # the experiment's run count out of date (a run deleted outside an import): written again, the runs kept
    client(empty_store).set_experiment_tag(load_runs(empty_store).experiment_id[0], "scalestudy.runs", "3")
    sync_experiment("unit", [rec("a", 1, 100.0), rec("b", 2, 190.0)], empty_store)
    # marked writing, the run count, marked complete; the ledger already right
    assert store_write._writes == 3 and experiment_tags(empty_store)["scalestudy.runs"] == "2"


# --------------------------------------------------------------------------------------------
# With the UI's --auth: an import writes only into experiments no user but the admin (or the importer) may change


def test_an_experiment_other_ui_users_may_change_is_refused(empty_store, monkeypatch):
    from mlflow.server.auth.sqlalchemy_store import SqlAlchemyStore

    from scalestudy.store.verify import other_managers

    experiment_id = client(empty_store).create_experiment("unit")
    users = SqlAlchemyStore()
    users.init_db(f"sqlite:///{Path(empty_store[len('sqlite:///') :]).with_name('store-auth.db')}")  # beside it
    for name, permission in (("reader", "MANAGE"), ("editor", "EDIT"), ("viewer", "READ"), ("admin", "MANAGE")):
        users.create_user(name, "a-long-enough-password", is_admin=name == "admin")
        users.create_experiment_permission(experiment_id, name, permission)
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    assert other_managers(empty_store, experiment_id) == ["editor", "reader"]
    assert other_managers(empty_store, "999") == []
    with pytest.raises(StoreError) as err:
        sync_experiment("unit", [rec("a", 1, 100.0)], empty_store)
    assert str(err.value) == (
        "experiment 'unit' may be changed by the UI user(s) editor, reader (EDIT or MANAGE on it), not only by this "
        "project's admin: nothing is written into it; as the UI's admin, revoke their permission on experiment "
        f"{experiment_id} (POST /api/2.0/mlflow/experiments/permissions/delete with experiment_id and username; "
        "deleting the experiment keeps its permissions and does not unblock it), then import again"
    )
    # issue 42: the remedy the line gives is one that unblocks the import; deleting the experiment is not
    client(empty_store).delete_experiment(experiment_id)
    with pytest.raises(StoreError, match="may be changed by the UI user"):
        sync_experiment("unit", [rec("a", 1, 100.0)], empty_store)
    client(empty_store).restore_experiment(experiment_id)
    for name in ("editor", "reader"):
        users.delete_experiment_permission(experiment_id, name)
    assert other_managers(empty_store, experiment_id) == []
    for name, permission in (("reader", "MANAGE"), ("editor", "EDIT")):  # as before, for what follows
        users.create_experiment_permission(experiment_id, name, permission)
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "editor")  # the importing user is not another
    assert other_managers(empty_store, experiment_id) == ["reader"]


# --------------------------------------------------------------------------------------------
# Every metric point compared, not only the latest values (verify.changed_values, verify.histories)


def test_a_metric_history_changed_behind_the_import_is_noted_and_repaired(empty_store):
    from scalestudy.store import verify

    series = {"step_throughput_total": [(10, 1_000, 50.0), (20, 2_000, 60.0)]}
    sync_experiment("unit", [rec("a", 1, 100.0, series=series), rec("b", 2, 190.0, series=series)], empty_store)
    ids = load_runs(empty_store).set_index("import_key").run_id
    points = [("step_throughput_total", 10, 50.0), ("step_throughput_total", 20, 60.0), ("throughput_total", 0, 100.0)]
    sqlite_way = verify.histories(None, empty_store, [ids["a"]])
    api_way = verify.histories(client(empty_store), "http://not-sqlite.invalid", [ids["a"]])  # through the client
    assert sqlite_way == api_way == {ids["a"]: points}
    client(empty_store).log_metric(ids["a"], "step_throughput_total", 55.0, timestamp=1_500, step=15)  # latest stays
    con = sqlite3.connect(Path(empty_store[len("sqlite:///") :]))
    with con:  # a point of b's history removed by hand
        con.execute("DELETE FROM metrics WHERE run_uuid = ? AND step = 10", (ids["b"],))
    con.close()
    notes: list[str] = []
    series = {"step_throughput_total": [(10, 1_000, 50.0), (20, 2_000, 60.0)]}
    counts = sync_experiment("unit", [rec("a", 1, 100.0, series=series), rec("b", 2, 190.0, series=series)],
                             empty_store, notes=notes)  # fmt: skip
    assert counts["repaired"] == 2
    assert notes == [
        f"run {ids['a']} (key a): metric history differs from the source (e.g. step_throughput_total at step 15 = "
        "55.0)",
        f"run {ids['b']} (key b): metric history lacks points the source has",
    ]


def test_deleted_runs_are_found_across_pages(empty_store, monkeypatch):
    from scalestudy.store import verify

    records = [rec(key, i + 1, 100.0 * (i + 1)) for i, key in enumerate("abcde")]
    sync_experiment("unit", records, empty_store)
    mlflow = client(empty_store)
    for run_id in load_runs(empty_store).run_id:
        mlflow.delete_run(run_id)
    monkeypatch.setattr(verify, "PAGE_SIZE", 2)  # three pages: 2, 2 and 1 runs
    experiment_id = mlflow.get_experiment_by_name("unit").experiment_id
    assert verify.deleted_keys(mlflow, experiment_id) == {(r.key, r.content_hash()) for r in records}


def test_a_run_cut_short_after_its_status_is_incomplete_and_a_failed_run_is_whole(empty_store):
    sync_experiment("unit", [rec("a", 1, 100.0, status="FAILED"), rec("b", 2, 190.0)], empty_store)
    again = sync_experiment("unit", [rec("a", 1, 100.0, status="FAILED"), rec("b", 2, 190.0)], empty_store)
    assert again == {"created": 0, "updated": 0, "unchanged": 2, "deleted": 0, "repaired": 0}  # FAILED is final
    mlflow = client(empty_store)
    cut = mlflow.create_run(mlflow.get_experiment_by_name("unit").experiment_id, tags={"import_key": "b"})
    mlflow.set_terminated(cut.info.run_id, "FINISHED")  # killed after its status, before its content hash
    notes: list[str] = []
    counts = sync_experiment("unit", [rec("a", 1, 100.0, status="FAILED"), rec("b", 2, 190.0)], empty_store,
                             notes=notes)  # fmt: skip
    assert counts == {"created": 0, "updated": 0, "unchanged": 2, "deleted": 0, "repaired": 1}
    assert notes == ["1 incomplete run(s) left by an interrupted import deleted"]
    assert mlflow.get_run(cut.info.run_id).info.lifecycle_stage == "deleted"


def test_where_the_uis_user_database_is(tmp_path):
    from scalestudy.store.address import auth_db

    assert auth_db(f"sqlite:///{tmp_path}/store.db") == tmp_path / "store-auth.db"
    assert auth_db("http://127.0.0.1:5000") is None  # a server keeps its own


# --------------------------------------------------------------------------------------------
# A writer killed inside a SQLite transaction leaves a hot journal: the next reader rolls it back, and says so


def test_a_hot_journal_left_by_a_killed_writer_is_rolled_back_by_the_reader(empty_store, capsys):
    import os
    import signal

    sync_experiment("unit", [rec("a", 1, 100.0), rec("b", 2, 190.0)], empty_store)
    path = Path(empty_store[len("sqlite:///") :])
    pid = os.fork()
    if pid == 0:  # the writer: a transaction that has changed the file itself (a tiny cache spills it), then killed
        con = sqlite3.connect(path, isolation_level=None)
        con.execute("PRAGMA cache_size = 1")
        con.execute("BEGIN IMMEDIATE")
        con.execute("UPDATE latest_metrics SET value = value * 1000")
        con.execute("UPDATE metrics SET value = value * 1000")
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    journal = path.with_name("store.db-journal")
    assert journal.stat().st_size > 0  # hot: the killed writer's undo log
    capsys.readouterr()
    table = load_runs(empty_store)
    assert sorted(zip(table.import_key, table.throughput_total)) == [("a", 100.0), ("b", 190.0)]  # as before
    assert capsys.readouterr().err == (
        f"store {path}: rolled back the transaction a killed writer left unfinished in {journal}\n"
    )
    assert not journal.exists() or journal.stat().st_size == 0
    journal.write_bytes(b"")  # an empty journal is not hot (SQLite leaves one after a clean transaction)
    load_runs(empty_store)
    assert capsys.readouterr().err == ""  # nothing to roll back
