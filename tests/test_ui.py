"""The MLflow UI served by scalestudy.ui shows the store's runs and their parameters (headless Chromium)."""

from __future__ import annotations

import json
import os
import shutil
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import free_port

from scalestudy.schema import REQUIRED_PARAMS, RunRecord
from scalestudy.tracking import load_runs, sync_experiment
from scalestudy.ui import serve

pytestmark = pytest.mark.integration

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
EXPERIMENT = "tf-benchmarks-2017"
RUNS = [("resnet50", 1), ("resnet50", 8), ("inception3", 4), ("vgg16", 2)]
WAIT_S = 30
SHOWN = ("model", "workers", "device")  # params read back from the runs table


def _records() -> list[RunRecord]:
    records = []
    for model, workers in RUNS:
        params = {
            "model": model,
            "framework": "tensorflow",
            "workers": workers,
            "device": "P100",
            "data": "synthetic",
            "batch_per_worker": 64,
            "platform": "nvidia-dgx-1",
        }
        records.append(
            RunRecord(
                experiment=EXPERIMENT,
                key=f"{model}/{workers}",
                params=params,
                where=f"test_ui:{model}/{workers}",
                metrics={"throughput_total": 200.0 * workers},
                tags={"source": "published", "citation": "TensorFlow performance benchmarks, 2017"},
            )
        )
    return records


def _driver(profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)  # never let Selenium Manager fetch a browser or driver
    for arg in (*CHROME_ARGS, f"--user-data-dir={profile}"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


@pytest.fixture
def store(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    records = _records()
    assert sync_experiment(EXPERIMENT, records)["created"] == len(records)
    return uri, load_runs(uri)


def test_ui_lists_runs_and_their_params(store, tmp_path):
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        if os.geteuid() != 0:
            pytest.skip(
                "needs Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver): "
                "sudo apt-get install chromium chromium-driver"
            )
        pytest.fail(
            "root, but /usr/bin/chromium or /usr/bin/chromedriver is missing: apt-get install chromium "
            "chromium-driver (make does)"
        )
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    uri, table = store
    expected = dict(zip(table["run_id"], table["run_name"]))  # run id -> run name
    params = table.set_index("run_id").to_dict("index")
    assert len(expected) == len(RUNS)
    with serve(uri, free_port()) as base_url:
        query = urllib.parse.urlencode({"experiment_name": EXPERIMENT})
        with urllib.request.urlopen(f"{base_url}/api/2.0/mlflow/experiments/get-by-name?{query}") as resp:
            experiment_id = json.load(resp)["experiment"]["experiment_id"]
        profile = tmp_path / "chromium-profile"
        profile.mkdir()
        driver = _driver(profile)
        try:
            wait = WebDriverWait(driver, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))
            # MLflow 3 opens an experiment on its GenAI overview unless the experiment is tagged as model
            # training; workflowType=machine_learning selects the "Model training" runs table.
            driver.get(f"{base_url}/#/experiments/{experiment_id}/runs?workflowType=machine_learning")

            # 1. The experiment page lists every run by its run name: the "Run Name" column (pinned left in
            #    ag-grid) holds one link per run, to #/experiments/<id>/runs/<run_id>, whose text is the name.
            links = "[col-id='attributes.`Run Name`'] a[href*='/runs/']"

            def listed(drv):
                found = {
                    a.get_attribute("href").rsplit("/", 1)[-1]: a.get_attribute("textContent").strip()
                    for a in drv.find_elements(By.CSS_SELECTOR, links)
                }
                return found if len(found) >= len(expected) else False

            runs = wait.until(listed, "the runs table never listed the runs")
            assert runs == {run_id: name for run_id, name in expected.items()}
            wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "body"), f"{len(expected)} matching runs"))

            # 2. Their params: tick "Parameters (7)" in the "Columns" selector, as a user would, then read
            #    the params.`<key>` columns of each row (ag-grid's row-id is the run id).
            driver.find_element(By.CSS_SELECTOR, "[data-testid='column-selection-dropdown']").click()
            tree = wait.until(
                EC.visibility_of_element_located((By.CSS_SELECTOR, "[data-testid='column-selector-tree']"))
            )
            group = f"Parameters ({len(REQUIRED_PARAMS)})"
            tree.find_element(
                By.XPATH, f".//span[@title='{group}']/preceding-sibling::span[contains(@class, 'tree-checkbox')]"
            ).click()
            driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)

            def shown_params(drv):
                rows = {}
                for row in drv.find_elements(By.CSS_SELECTOR, "div.ag-center-cols-container div[role='row']"):
                    cells = {
                        c.get_attribute("col-id"): c.get_attribute("textContent").strip()
                        for c in row.find_elements(By.CSS_SELECTOR, "[col-id^='params.']")
                    }
                    rows[row.get_attribute("row-id")] = {key: cells.get(f"params.`{key}`") for key in SHOWN}
                complete = len(rows) >= len(expected) and all(all(v.values()) for v in rows.values())
                return rows if complete else False

            shown = wait.until(shown_params, "the params columns never filled")
            driver.save_screenshot(str(tmp_path / "experiment-runs.png"))
            want = {run_id: {key: str(params[run_id][key]) for key in SHOWN} for run_id in expected}
            assert shown == want

            # 3. One run's own page shows its full params table.
            run_id = max(expected, key=lambda r: params[r]["workers"])
            driver.get(f"{base_url}/#/experiments/{experiment_id}/runs/{run_id}")
            wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "body"), group))
            body = driver.find_element(By.TAG_NAME, "body").text
            assert expected[run_id] in body
            for key in REQUIRED_PARAMS:
                value = params[run_id][key]
                assert f"{key}\n{value}" in body, f"run page lacks param {key}={value}"
            driver.save_screenshot(str(tmp_path / "run-page.png"))
        except BaseException:
            driver.save_screenshot(str(tmp_path / "failure.png"))  # what the page looked like
            raise
        finally:
            driver.quit()
            shutil.rmtree(profile, ignore_errors=True)
