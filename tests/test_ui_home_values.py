"""The study's home page and the front that serves it (ui/home.py, ui/front.py, ui/front_server.py,
store/mlflow_apps.py) without a browser: the page written from sidecars on a copy of the published store, each
figure's link and thumbnail, each dataset's source and count, what the front answers itself and what it leaves to
MLflow. tests/integration/test_ui_integration.py clicks through the same page in Chromium."""

from __future__ import annotations

import asyncio
import json
import re
from html import unescape
from pathlib import Path

import pytest

from scalestudy.store import load_runs
from scalestudy.store.mlflow_apps import swapped_app_command
from scalestudy.ui import front, front_server, home
from scalestudy.ui.links import experiment_view, runs_view
from scalestudy.ui.server import publish_views

DOC = Path(__file__).resolve().parents[1] / "docs" / "ui.md"

PNG = b"\x89PNG\r\n\x1a\n a thumbnail"
CAPTION_TEX = (
    "% figure-3: built from conf/figure/figure-3.yaml by `make figure-3`\n"
    r"\caption[P100 against K80]{\textbf{P100 against K80.} Ratio of tf\_cnn\_benchmarks' images/s at $N$ GPUs; "
    r"batch 64~per GPU.}"
)


def write_sidecar(paper: Path, kind: str, name: str, run_ids: list[str], **more) -> Path:
    path = paper / f"{kind}s" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({kind: name, "mlflow_runs": [{"run_id": r} for r in run_ids], **more}))
    return path


def cards(page: str) -> dict[str, str]:
    """Each card's HTML by its id (figure-3, table-2)."""
    return dict(re.findall(r'<div class="card" id="([^"]+)">(.*?)</div>', page, re.S))


def test_the_home_page_shows_each_figure_table_and_dataset(store_copy, tmp_path):
    runs = load_runs(store_copy)
    tf = runs[runs.experiment == "tf-benchmarks-2017"]
    fig3, eid = sorted(tf.run_id)[:3], str(tf.experiment_id.iloc[0])
    paper = tmp_path / "paper"
    figure = write_sidecar(paper, "figure", "figure-3", fig3, title="P100 against K80", git_commit="abc123" * 7)
    figure.with_suffix(".png").write_bytes(PNG)
    figure.with_suffix(".caption.tex").write_text(CAPTION_TEX)
    write_sidecar(paper, "table", "table-2", fig3[:1], caption=r"Runs per \textbf{GPU}. Counted.", git_commit="x-dirty")
    write_sidecar(paper, "figure", "figure-5", ["f" * 32])  # built from another store
    page_path = tmp_path / "home.html"

    publish_views(store_copy, paper, "http://127.0.0.1:5999/mlflow", page_path)

    page = page_path.read_text()
    shown = cards(page)
    assert list(shown) == ["figure-3", "figure-5", "table-2"]
    view = runs_view("figure-3", [(r, eid, "tf-benchmarks-2017") for r in fig3], "P100 against K80")
    link = f"/mlflow/{view.link}"
    hrefs = [unescape(h) for h in re.findall(r'href="([^"]+)"', shown["figure-3"])]
    assert hrefs == [link, link]  # the thumbnail and the text
    assert '<img src="/study/figures/figure-3.png" alt="figure-3: P100 against K80">' in shown["figure-3"]
    assert "<h3>figure-3: P100 against K80</h3>" in shown["figure-3"]
    assert "Open its 3 runs in MLflow" in shown["figure-3"]
    assert "built at commit abc123abc123<" in shown["figure-3"]
    assert unescape(shown["figure-3"]).count(
        "P100 against K80. Ratio of tf_cnn_benchmarks' images/s at N GPUs; batch 64 per GPU."
    )
    assert "<h3>table-2: Runs per GPU</h3>" in shown["table-2"] and "<img" not in shown["table-2"]
    assert "built at commit x-dirty (uncommitted changes)" in shown["table-2"]
    assert "href" not in shown["figure-5"]
    assert "1 of its 1 runs are not in this store" in unescape(shown["figure-5"])

    rows = re.findall(r"<tr><td>([^<]+)</td><td><a href=\"([^\"]+)\">([^<]+)</a></td><td>(.*?)</td></tr>", page)
    counts = runs.groupby("experiment").size()
    assert {name: int(label.split()[0]) for name, _, label, _ in rows} == counts.to_dict()
    by_name = {name: (href, about) for name, href, _, about in rows}
    href, about = by_name["tf-benchmarks-2017"]
    assert unescape(href) == f"/mlflow/{experiment_view(eid).link}"
    assert about.startswith("TensorFlow documentation, Benchmarks page")
    assert "python -m scalestudy.ingest logs PATH --experiment NAME" in page


def test_a_link_to_more_than_a_page_of_runs_says_its_true_count():
    assert home.runs_label(1) == "1 run"
    assert home.runs_label(100) == "100 runs"
    assert home.runs_label(486) == (
        "486 runs (MLflow's table shows 100 at a time: 'Load more' at its end shows the rest)"
    )


def test_a_caption_as_plain_text():
    assert home.plain_caption(CAPTION_TEX) == (
        "P100 against K80. Ratio of tf_cnn_benchmarks' images/s at N GPUs; batch 64 per GPU."
    )


@pytest.fixture
def served(tmp_path, monkeypatch):
    """The front's files: a home page and a paper folder with one thumbnail."""
    page = tmp_path / "home.html"
    page.write_text("<html><head><title>home</title></head><body>study</body></html>")
    (tmp_path / "paper" / "figures").mkdir(parents=True)
    (tmp_path / "paper" / "figures" / "figure-3.png").write_bytes(PNG)
    monkeypatch.setenv(front.HOME_ENV, str(page))
    monkeypatch.setenv(front.PAPER_ENV, str(tmp_path / "paper"))
    return tmp_path


def test_what_the_front_answers_itself(served):
    status, body, kind = front.answer("GET", "/")
    assert (status, kind) == (200, "text/html; charset=utf-8")
    assert body.decode().startswith("<html><head>" + front.defaults_script() + "<title>home</title>")
    assert front.answer("GET", "/study/figures/figure-3.png") == (200, PNG, "image/png")
    assert front.answer("GET", "/study/figures/figure-4.png")[0] == 404
    assert front.answer("GET", "/study/figures/../figure-3.png") is None  # only NAME.png in figures|tables
    assert front.answer("POST", "/mlflow/ajax-api/3.0/mlflow/demo/generate")[0] == 403
    status, body, _ = front.answer("GET", "/mlflow/")
    page = body.decode()
    assert status == 200 and front.AWAY_FROM_HOME in page and "static-files/static/js/main." in page
    assert page.index(front.defaults_script()) < page.index("<script defer")  # before MLflow's own scripts
    assert front.NO_ASSISTANT in page
    for method, path in (("GET", "/mlflow/health"), ("POST", "/"), ("GET", "/mlflow/ajax-api/2.0/mlflow/runs/get")):
        assert front.answer(method, path) is None


def test_the_defaults_are_mlflows_own_browser_settings():
    script = front.defaults_script()
    values = json.loads(re.search(r"\((\{.*\})\)", script)[1])
    assert values == {
        "mlflow.workflowType_v1": '"machine_learning"',
        "mlflow.telemetry.info.alert.dismissed_v1": "true",
        "mlflow.settings.telemetry.enabled_v1": "false",
        "mlflow.assistant.fab.autoOpenedOnFirstLoad_v1": "true",
        "mlflow.assistant.panelOpen_v1": "false",
    }
    import mlflow.server  # (a test may: only the package keeps MLflow in its store)

    bundle = Path(mlflow.server.app.static_folder) / "static" / "js"
    text = "".join(path.read_text(errors="replace") for path in bundle.glob("main.*.js"))
    assert '"data-assistant-ui":"true"' in text  # the marker NO_ASSISTANT hides, on MLflow's assistant button
    for key in values:  # each a key MLflow's UI reads (useLocalStorage's "<key>_v<version>", version 1 here)
        name = key.rsplit("_v", 1)[0]
        assert f'key:"{name}",version:1' in text or f'="{name}"' in text, key


def test_the_front_passes_everything_else_to_mlflow(served):
    seen = []

    async def mlflow_app(scope, receive, send):
        seen.append(scope["path"])
        await send({"type": "http.response.start", "status": 299, "headers": []})

    def call(scope):
        sent = []

        async def send(message):
            sent.append(message)

        asyncio.run(front.front(mlflow_app)(scope, None, send))
        return sent[0]["status"]

    assert call({"type": "http", "method": "GET", "path": "/"}) == 200
    assert call({"type": "http", "method": "GET", "path": "/mlflow/ajax-api/2.0/mlflow/runs/get"}) == 299
    assert call({"type": "lifespan", "path": "/"}) == 299
    assert seen == ["/mlflow/ajax-api/2.0/mlflow/runs/get", "/"]


def test_the_front_server_swaps_mlflows_app_for_the_front():
    calls = []
    build = swapped_app_command(lambda *args: calls.append(args) or ["uvicorn", args[4]], front_server.FRONTS)
    assert build("", "127.0.0.1", 5000, 1, "mlflow.server.fastapi_app:app") == [
        "uvicorn",
        "scalestudy.ui.front:create_app",
    ]
    build("", "127.0.0.1", 5000, 1, "mlflow.server.auth:create_app", None, True)
    assert calls == [
        ("", "127.0.0.1", 5000, 1, "scalestudy.ui.front:create_app", None, True),
        ("", "127.0.0.1", 5000, 1, "scalestudy.ui.front:create_auth_app", None, True),
    ]
    with pytest.raises(SystemExit, match="'other:app', which has no front"):
        build("", "127.0.0.1", 5000, 1, "other:app")


def test_the_run_counts_docs_ui_md_states_are_the_sidecars(published_figures):
    """Every "figure-N   K runs", "figure N (K runs)" and "Open its K runs" of docs/ui.md, against the sidecars
    built from the published store."""
    text = " ".join(DOC.read_text().split())
    claims = re.findall(r"figure[- ](\d+) +\((\d+) runs\)", text) + re.findall(r"figure-(\d+) +(\d+) runs", text)
    assert len(claims) >= 4
    for number, n in claims:
        sidecar = json.loads((Path(published_figures["dir"]) / f"figure-{number}.json").read_text())
        assert len({r["run_id"] for r in sidecar["mlflow_runs"]}) == int(n), f"figure {number}: docs/ui.md says {n}"
    (true_count,) = set(re.findall(r"Open its (\d+) runs \(MLflow's table", text))
    assert ("7", true_count) in claims
