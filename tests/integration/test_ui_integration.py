"""The end-to-end tests of tests/test_ui.py (real store, CLI or service), marked `integration` by this folder's
conftest.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from base64 import b64encode
from pathlib import Path

import pytest
import yaml
from helpers import REPO, free_port, run_module

from scalestudy.schema import REQUIRED_PARAMS
from scalestudy.store import load_runs
from scalestudy.ui.server import ADMIN_PASSWORD_ENV, UIError, auth_config, serve

CHROMIUM = Path("/usr/bin/chromium")


CHROMEDRIVER = Path("/usr/bin/chromedriver")


CHROME_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=2400,1200",
)


WAIT_S = 60


EXPERIMENT = "tf-benchmarks-2017"


SHOWN = {"model": "params.`model`", "workers": "params.`workers`", "throughput_total": "metrics.`throughput_total`"}


LINK_LINE = re.compile(r"^\s+(\S+)\s+(\d+) runs\s+(http://\S+)$")


def _needs_chromium():
    if CHROMIUM.exists() and CHROMEDRIVER.exists():
        return
    if os.geteuid() != 0:
        pytest.skip(
            "needs Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver): "
            "sudo apt-get install chromium chromium-driver"
        )
    pytest.fail(
        "root, but /usr/bin/chromium or /usr/bin/chromedriver is missing: apt-get install chromium chromium-driver"
    )


@pytest.fixture(scope="module")
def site(published_store, tmp_path_factory):
    """`python -m scalestudy.ui` on a copy of the published store, with the sidecars of figures 3 and 7 built
    from it: the printed links ({name: url}), the sidecars and the store's runs. Stopped as Ctrl-C stops it."""
    _needs_chromium()
    root = tmp_path_factory.mktemp("ui")
    db = root / "store.db"
    shutil.copy(published_store[len("sqlite:///") :], db)
    uri = f"sqlite:///{db}"
    paper = root / "paper"
    run_module("scalestudy.paper", "figure-3", "figure-7", f"out_dir={paper}", uri=uri)
    port = free_port()
    out = root / "ui.out"
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri)
    command = [sys.executable, "-m", "scalestudy.ui", "--port", str(port), "--paper", str(paper)]
    with out.open("w") as handle:
        proc = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 240
        while "Ctrl-C stops the UI" not in out.read_text():
            assert proc.poll() is None, f"python -m scalestudy.ui exited {proc.returncode}:\n{out.read_text()}"
            assert time.monotonic() < deadline, f"python -m scalestudy.ui printed no links in 240 s:\n{out.read_text()}"
            time.sleep(0.5)
        printed = out.read_text()
        links = {m[1]: (int(m[2]), m[3]) for m in map(LINK_LINE.match, printed.splitlines()) if m}
        sidecars = {n: json.loads((paper / "figures" / f"{n}.json").read_text()) for n in ("figure-3", "figure-7")}
        yield {
            "base_url": f"http://127.0.0.1:{port}",  # the study's home page; MLflow's UI under /mlflow/
            "mlflow_url": f"http://127.0.0.1:{port}/mlflow",
            "links": links,
            "printed": printed,
            "sidecars": sidecars,
            "runs": load_runs(uri),
            "uri": uri,
            "root": root,
        }
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the UI stops its server's process group
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise


@pytest.fixture
def browser(tmp_path):
    """A fresh headless Chromium (a new profile: nothing clicked or remembered), and where its screenshots go."""
    _needs_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)  # never let Selenium Manager fetch a browser or driver
    for arg in (*CHROME_ARGS, f"--user-data-dir={profile}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.save_screenshot(str(tmp_path / "last-page.png"))  # what the page looked like at the end
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _wait(driver):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))


def _click(driver, text: str, link: bool = False, exact: bool = True):
    """Click what a person clicks to follow `text`: a link, or a toggle or menu item that shows it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    if link:
        where = (By.LINK_TEXT, text)
    else:
        test = f"normalize-space(.)='{text}'" if exact else f"starts-with(normalize-space(.), '{text}')"
        where = (By.XPATH, f"(//span|//*[@role='menuitem'])[{test}]")
    _wait(driver).until(EC.element_to_be_clickable(where)).click()


# The cells of the rows ag-grid has drawn (those in view), by row id (= run id) and column id.
DRAWN_ROWS = """
const rows = {};
for (const row of document.querySelectorAll(".ag-center-cols-container div[role='row']")) {
  const cells = {};
  for (const cell of row.querySelectorAll("[col-id]")) cells[cell.getAttribute("col-id")] = cell.textContent.trim();
  rows[row.getAttribute("row-id")] = cells;
}
return rows;
"""


def _runs_table(driver) -> dict[str, dict[str, str]]:
    """Every row of the runs table by run id, with the text of its SHOWN cells: ag-grid draws only the rows in
    view, so this scrolls through the table, half a screen at a time."""
    from selenium.webdriver.common.by import By

    rows: dict[str, dict[str, str]] = {}
    viewport = driver.find_element(By.CSS_SELECTOR, ".ag-body-viewport")
    driver.execute_script("arguments[0].scrollTop = 0;", viewport)
    position = -1
    while True:
        time.sleep(0.2)  # let ag-grid draw the rows scrolled into view
        for run_id, cells in driver.execute_script(DRAWN_ROWS).items():
            rows[run_id] = {key: cells.get(col_id, "") for key, col_id in SHOWN.items()}
        top = driver.execute_script(
            "arguments[0].scrollTop += arguments[0].clientHeight / 2; return arguments[0].scrollTop;", viewport
        )
        if top == position:
            driver.execute_script("arguments[0].scrollTop = 0;", viewport)
            return rows
        position = top


def _check_runs_table(driver, expected: set[str], runs, screenshot: Path) -> None:
    """The runs table lists exactly `expected` (run ids), with model, workers and throughput_total shown, and
    their values are the store's."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    wait = _wait(driver)
    wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "body"), f"{len(expected)} matching runs"))
    for col_id in SHOWN.values():
        header = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, f".ag-header-cell[col-id='{col_id}']")))
        assert header.is_displayed(), f"column {col_id} is not shown"

    def complete(drv):  # every row drawn, every cell filled
        rows = _runs_table(drv)
        return rows if rows and all(all(cells.values()) for cells in rows.values()) else False

    shown = wait.until(complete, "the runs table never showed every row with model, workers and throughput_total")
    time.sleep(0.5)
    driver.save_screenshot(str(screenshot))
    assert set(shown) == expected
    by_id = runs.set_index("run_id")
    for run_id, cells in shown.items():
        run = by_id.loc[run_id]
        assert cells["model"] == run["model"] and cells["workers"] == str(int(run["workers"]))
        # the UI rounds a metric for display (e.g. 1783.47 -> "1783"): compare to its shown precision
        digits = cells["throughput_total"].split(".")[-1] if "." in cells["throughput_total"] else ""
        assert float(cells["throughput_total"]) == pytest.approx(run["throughput_total"], abs=0.51 * 10 ** -len(digits))


def _click_until_done(driver, where) -> None:
    """Click what `where` finds once it takes the click: the table redraws under a button it is replacing."""
    from selenium.common.exceptions import (
        ElementClickInterceptedException,
        NoSuchElementException,
        StaleElementReferenceException,
    )

    def clicked(drv) -> bool:
        try:
            drv.find_element(*where).click()
        except (StaleElementReferenceException, ElementClickInterceptedException, NoSuchElementException):
            return False
        return True

    _wait(driver).until(clicked, f"nothing at {where} took a click")


def _report(capsys, *paths: Path) -> None:
    with capsys.disabled():
        for path in paths:
            print(f"\nscreenshot: {path}")


# What MLflow's stock pages show a new user, none of which the study's pages may: its GenAI start page (with its
# demo button and tour), the assistant's pane, the telemetry notice.
NOT_ON_THE_WAY = (
    "Start Demo",
    "MLflow Assistant",
    "Ask a question",
    "Information about UI telemetry",
    "Welcome to MLflow",
)


def _nothing_in_the_way(driver) -> None:
    body = driver.find_element("tag name", "body").text
    for text in NOT_ON_THE_WAY:
        assert text not in body, f"{text!r} on {driver.current_url}"
    shown = [e for e in driver.find_elements("css selector", "[data-assistant-ui]") if e.is_displayed()]
    assert not shown, f"MLflow's assistant button on {driver.current_url}"


def test_the_home_page_and_a_thumbnail_to_the_runs_of_figure_3(site, browser, tmp_path, capsys):
    """A fresh browser at the UI's root lands on the study's home page; figure 3's thumbnail opens exactly its
    runs; MLflow's demo, assistant and telemetry notice are nowhere on the way."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    wait = _wait(browser)
    sidecar = site["sidecars"]["figure-3"]
    expected = {r["run_id"] for r in sidecar["mlflow_runs"]}
    assert len(expected) == 64

    browser.get(f"{site['base_url']}/")
    wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "h1"), "Distributed-training scaling study"))
    card = browser.find_element(By.ID, "figure-3")
    assert f"figure-3: {sidecar['title']}" in card.text and "Open its 64 runs in MLflow" in card.text
    assert f"built at commit {sidecar['git_commit'][:12]}" in card.text
    thumbnail = card.find_element(By.CSS_SELECTOR, "a.thumbnail img")
    wait.until(lambda d: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth", thumbnail))
    figure7 = browser.find_element(By.CSS_SELECTOR, "#figure-7 a.runs").text
    n7 = len(site["sidecars"]["figure-7"]["mlflow_runs"])
    assert figure7.startswith(f"Open its {n7} runs (MLflow's table shows 100 at a time")  # the true count
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "python -m scalestudy.ingest logs PATH --experiment NAME" in body
    runs = site["runs"]
    for experiment, n in runs.groupby("experiment").size().items():
        assert f"{experiment} {n} run" in body  # each dataset with its run count
    _nothing_in_the_way(browser)
    browser.save_screenshot(str(tmp_path / "home.png"))

    card.find_element(By.CSS_SELECTOR, "a.thumbnail").click()
    wait.until(EC.url_contains("/mlflow/#/experiments/"))
    _check_runs_table(browser, expected, runs, tmp_path / "figure-3-from-home.png")
    _nothing_in_the_way(browser)
    _report(capsys, tmp_path / "home.png", tmp_path / "figure-3-from-home.png")


def test_from_mlflows_experiments_by_clicks_to_the_runs_of_figure_3(site, browser, tmp_path, capsys):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    wait = _wait(browser)
    sidecar = site["sidecars"]["figure-3"]
    expected = {r["run_id"] for r in sidecar["mlflow_runs"]}

    browser.get(f"{site['mlflow_url']}/")  # MLflow's own start: its experiments list, not its GenAI home
    wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "body"), "Published measurements: TensorFlow"))
    _nothing_in_the_way(browser)
    browser.save_screenshot(str(tmp_path / "mlflow-start.png"))
    _click(browser, EXPERIMENT, link=True)
    wait.until(EC.url_contains("/runs"))
    wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "body"), "Published measurements: TensorFlow"))
    _nothing_in_the_way(browser)
    browser.save_screenshot(str(tmp_path / "experiment.png"))

    # Two clicks from the experiment's runs table: "Views", then the figure's view.
    browser.find_element(By.CSS_SELECTOR, "[data-testid='saved-views-trigger']").click()
    _click(browser, "figure-3 · 64 runs", exact=False)
    _check_runs_table(browser, expected, site["runs"], tmp_path / "figure-3-by-clicks.png")
    _report(capsys, tmp_path / "mlflow-start.png", tmp_path / "experiment.png", tmp_path / "figure-3-by-clicks.png")


def test_an_mlperf_run_shows_when_it_was_measured(site, browser, tmp_path, capsys):
    """The run page's "Created at" is the log's run_start (2018 for MLPerf v0.5), its Duration the log's."""
    from datetime import datetime

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    runs = site["runs"]
    run = runs[runs.experiment == "mlperf-training-resnet"].sort_values("start_ms").iloc[0]
    measured = datetime.fromtimestamp(run.start_ms / 1000)  # the browser's time zone is this machine's
    assert measured.year == 2018
    browser.get(f"{site['mlflow_url']}/#/experiments/{run.experiment_id}/runs/{run.run_id}")
    _wait(browser).until(EC.text_to_be_present_in_element((By.TAG_NAME, "body"), "Created at"))
    body = browser.find_element(By.TAG_NAME, "body").text
    assert f"Created at\n{measured.strftime('%m/%d/%Y')}, " in body
    assert "time_basis\n: measured: start and end from the source" in body
    browser.save_screenshot(str(tmp_path / "mlperf-run.png"))
    _report(capsys, tmp_path / "mlperf-run.png")


def test_the_printed_figure_3_link_opens_exactly_its_runs(site, browser, tmp_path, capsys):
    sidecar = site["sidecars"]["figure-3"]
    expected = {r["run_id"] for r in sidecar["mlflow_runs"]}
    n, link = site["links"]["figure-3"]
    assert n == len(expected) == 64
    assert link == f"{site['mlflow_url']}/{sidecar['mlflow_ui']['link']}"  # the sidecar carries the same link
    browser.get(link)  # a browser that never chose "Model training"
    _check_runs_table(browser, expected, site["runs"], tmp_path / "figure-3-link.png")
    _report(capsys, tmp_path / "figure-3-link.png")


SCROLL_TO_END = (
    "document.querySelectorAll('*').forEach(e => {"
    " if (e.scrollHeight > e.clientHeight) e.scrollTop = e.scrollHeight; })"
)


def test_a_figure_of_two_experiments_and_an_experiment_link(site, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    wait = _wait(browser)
    sidecar = site["sidecars"]["figure-7"]
    experiments = {r["experiment"] for r in sidecar["mlflow_runs"]}
    published = yaml.safe_load((REPO / "conf" / "figure" / "figure-7.yaml").read_text())["runs"]["published"]
    named = [f["experiment"] for f in (published if isinstance(published, list) else [published])]  # a filter list
    assert experiments == {e for names in named for e in ([names] if isinstance(names, str) else names)}
    n, link = site["links"]["figure-7"]
    assert n == len(sidecar["mlflow_runs"]) > 100  # more than the runs table loads at once
    browser.get(link)
    wait.until(
        EC.text_to_be_present_in_element((By.TAG_NAME, "body"), f"Displaying Runs from {len(experiments)} Experiments")
    )
    wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "body"), "100 matching runs"))  # the first page
    for shown in range(200, n + 100, 100):  # as a reviewer would: the rest of the figure's runs, a page at a time
        # the button sits under the last loaded row: scroll every scrolled box to its end, as a reader does
        browser.execute_script(SCROLL_TO_END)
        _click_until_done(browser, (By.XPATH, "//button[normalize-space()='Load more']"))
        wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "body"), f"{min(shown, n)} matching runs"))

    n, link = site["links"]["horovod-docs"]  # an experiment's link: its runs table with our columns
    assert n == 3
    browser.get(link)
    wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "body"), "3 matching runs"))
    header = wait.until(
        EC.presence_of_element_located((By.CSS_SELECTOR, ".ag-header-cell[col-id='metrics.`efficiency_published`']"))
    )
    assert header.is_displayed()


def test_a_run_page_shows_its_params_and_where_it_was_read(site, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    runs = site["runs"]
    run = runs[(runs.experiment == EXPERIMENT) & (runs.platform == "nvidia-dgx-1") & (runs.workers == 8)].iloc[0]
    browser.get(f"{site['mlflow_url']}/#/experiments/{run.experiment_id}/runs/{run.run_id}")
    _wait(browser).until(
        EC.text_to_be_present_in_element((By.TAG_NAME, "body"), f"Parameters ({len(REQUIRED_PARAMS) + 2})")
    )
    body = browser.find_element(By.TAG_NAME, "body").text
    assert run.run_name in body
    for key in REQUIRED_PARAMS:
        value = run[key]  # numeric params are numbers in the runs table, written as MLflow shows them (512, not 512.0)
        shown = int(value) if isinstance(value, float) and value.is_integer() else value
        assert f"{key}\n{shown}" in body, f"run page lacks param {key}={shown}"
    line = run.source_line.split(":")[1]
    assert f"experiments/reference/{EXPERIMENT}/tf_benchmarks_2017.csv line {line}" in body
    browser.save_screenshot(str(tmp_path / "run-page.png"))


def _api(base_url: str, path: str, user: tuple[str, str] | None = None, body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(f"{base_url}/api/2.0/mlflow/{path}", method="POST" if body is not None else "GET")
    if body is not None:
        request.add_header("Content-Type", "application/json")
        request.data = json.dumps(body).encode()
    if user:
        request.add_header("Authorization", "Basic " + b64encode(":".join(user).encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as err:
        return err.code, {}


def test_auth_keeps_other_local_users_from_reading_or_deleting_runs(store_copy, monkeypatch, browser):
    """--auth serves MLflow's basic-auth app: without a password a local user gets nothing; a user the admin
    creates may read but not delete; the UI works in a browser that has the password."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    monkeypatch.delenv(ADMIN_PASSWORD_ENV, raising=False)
    with pytest.raises(UIError, match=ADMIN_PASSWORD_ENV):
        auth_config(store_copy)
    admin = ("admin", "a-long-admin-password")
    monkeypatch.setenv(ADMIN_PASSWORD_ENV, admin[1])
    run_id = load_runs(store_copy)["run_id"].iloc[0]
    with serve(store_copy, free_port(), auth=True) as base_url:
        assert _api(base_url, "experiments/search?max_results=10")[0] == 401
        assert _api(base_url, "runs/delete", body={"run_id": run_id})[0] == 401
        status, found = _api(base_url, "experiments/search?max_results=10", user=admin)
        assert status == 200 and {e["name"] for e in found["experiments"]} >= {EXPERIMENT}
        reviewer = ("reviewer", "another-long-password")
        assert _api(base_url, "users/create", user=admin, body=dict(zip(("username", "password"), reviewer)))[0] == 200
        assert _api(base_url, f"runs/get?run_id={run_id}", user=reviewer)[0] == 200
        assert _api(base_url, "runs/delete", user=reviewer, body={"run_id": run_id})[0] == 403
        status, run = _api(base_url, f"runs/get?run_id={run_id}", user=admin)
        assert run["run"]["info"]["lifecycle_stage"] == "active"

        # A browser asks for the password once (at the first answer 401) and sends it with every request after;
        # headless, the password goes in the URL of that first request (not of the page: the UI's fetch
        # refuses a page URL that carries one).
        runs = load_runs(store_copy)
        experiment_id = runs.loc[runs.experiment == "horovod-docs", "experiment_id"].iloc[0]
        with_password = base_url.replace("http://", f"http://{admin[0]}:{admin[1]}@")
        browser.get(f"{with_password}/api/2.0/mlflow/experiments/search")
        browser.get(f"{base_url}/#/experiments/{experiment_id}/runs?workflowType=machine_learning")
        _wait(browser).until(EC.text_to_be_present_in_element((By.TAG_NAME, "body"), "3 matching runs"))
