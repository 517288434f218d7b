"""The Prefect UI's Run form for the explain deployment, in a real browser (headless Chromium via Selenium).

Uses the end-to-end stack of test_e2e_prefect (real Prefect server with its UI, deployments from
deploy/prefect.yaml, a process worker, a Dask cluster). Opens the deployment's custom-run form,
checks that every field is titled by its name and that the enumerations are drop-downs, fills
two fields, submits, and waits for the run to complete. Screenshots of the form and of the
finished run go to the system's temporary folder (exclust-ui-form.png, exclust-ui-run.png,
exclust-ui-artifacts.png).
Skips when Chromium or its driver is not installed (Debian: apt-get install chromium chromium-driver).
"""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from test_e2e_prefect import stack  # noqa: F401  (the shared module-scoped fixture; tests/ is on sys.path)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
SHOTS = Path(tempfile.gettempdir())
ENUM_FIELDS = {"algorithm", "reference", "threshold", "kernel", "nan_policy", "objective", "kmedians_price"}


@pytest.fixture
def browser():
    if not CHROMIUM or not DRIVER:
        pytest.skip("Chromium and chromedriver are not installed (Debian: apt-get install chromium chromium-driver)")
    pytest.importorskip("selenium")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync", "--window-size=1400,3000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the page's console, kept for failures
    profile = tempfile.TemporaryDirectory(prefix="exclust-chromium-")
    options.add_argument(f"--user-data-dir={profile.name}")
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        profile.cleanup()


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception:  # the page is still rendering
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise TimeoutError(f"{what} not seen after {timeout:.0f} s")


def _fields(driver) -> dict[str, object]:
    """Form properties by their title (without the UI's ' (Optional)'), each the element holding its input."""
    from selenium.webdriver.common.by import By

    found = {}
    for prop in driver.find_elements(By.CSS_SELECTOR, ".schema-form-property"):
        labels = prop.find_elements(By.CSS_SELECTOR, ".schema-form-property__label")
        if labels:
            found.setdefault(labels[0].text.replace("(Optional)", "").strip(), prop)
    return found


def test_run_form_reads_well_and_starts_a_run(stack, browser):  # noqa: F811
    import prefect.settings
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from exclust.datasets.synthetic import write_gmm_parquet
    from flows.params import ExplainParams

    data = stack["data"]
    if not (data / "input").exists():
        write_gmm_parquet(data / "input", 6_000, n_components=3, n_features=2, rows_per_file=2_000, random_state=2)
    ui = stack["env"]["PREFECT_API_URL"].removesuffix("/api")
    with prefect.settings.temporary_settings({prefect.settings.PREFECT_API_URL: stack["env"]["PREFECT_API_URL"]}):
        with get_client(sync_client=True) as client:
            deployment = client.read_deployment_by_name("explain/explain")

    browser.get(f"{ui}/deployments/deployment/{deployment.id}/run")
    expected = set(ExplainParams.model_fields)
    fields = _wait_for(lambda: (f := _fields(browser)) and expected <= set(f) and f, 90, "the Run form")
    assert {"categorical", "cluster_on"} <= set(fields)  # issue 28: category codes and the clustering's columns
    page = browser.find_element(By.TAG_NAME, "body").text
    for class_name in ("ReferenceKind", "ThresholdVariant", "NanPolicy", "KmediansPrice", "Algorithm", "ExplainParams"):
        assert class_name not in page  # titled by field names, not by class names
    assert "``" not in page and "Property is type" not in page  # plain descriptions, no type toggles
    for name in ENUM_FIELDS:
        assert fields[name].find_elements(By.TAG_NAME, "select"), f"{name} is not a drop-down"
    for name in expected - ENUM_FIELDS:
        assert not fields[name].find_elements(By.TAG_NAME, "select"), name
        assert fields[name].find_elements(By.CSS_SELECTOR, "textarea, input"), f"{name} has no text box"
    options = [o.get_attribute("value") for o in fields["algorithm"].find_elements(By.TAG_NAME, "option")]
    assert {"mmdt", "imm", "exkmc", "kernel-mmdt"} <= set(options)

    fields["features"].find_element(By.TAG_NAME, "textarea").send_keys("x0, x1")
    Select(fields["algorithm"].find_element(By.TAG_NAME, "select")).select_by_value("imm")
    n_clusters = fields["n_clusters"].find_element(By.TAG_NAME, "input")
    n_clusters.clear()
    n_clusters.send_keys("3")
    browser.save_screenshot(str(SHOTS / "exclust-ui-form.png"))
    with prefect.settings.temporary_settings({prefect.settings.PREFECT_API_URL: stack["env"]["PREFECT_API_URL"]}):
        with get_client(sync_client=True) as client:
            only_this = DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id]))
            created = None
            for attempt in range(2):  # on a loaded machine the UI's request can fail ("Oops"); press again once
                submit = browser.find_element(By.CSS_SELECTOR, "button[type=submit]")
                browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", submit)
                submit.click()
                try:
                    created = _wait_for(lambda: client.read_flow_runs(deployment_filter=only_this), 45,
                                        "a run created by Submit")
                    break
                except TimeoutError:
                    browser.save_screenshot(str(SHOTS / f"exclust-ui-submit-failed-{attempt}.png"))
                    (SHOTS / f"exclust-ui-submit-failed-{attempt}.log").write_text(
                        "\n".join(str(entry) for entry in browser.get_log("browser")))
            assert created, "Submit created no run (see exclust-ui-submit-failed-*.png/.log)"
            run_id = created[0].id
            run = _wait_for(lambda: (r := client.read_flow_run(run_id)).state.is_final() and r, 300, "a final state")
    assert run.state.is_completed(), f"{run.state.type}: {run.state.message}"
    assert run.parameters["params"]["algorithm"] == "imm" and run.parameters["params"]["features"] == "x0, x1"
    metrics = json.loads((data / "explain" / "metrics.json").read_text())
    assert metrics["algorithm"] == "imm" and metrics["k"] == 3 and metrics["features_used"]

    browser.get(f"{ui}/runs/flow-run/{run_id}")
    _wait_for(lambda: "Completed" in browser.find_element(By.TAG_NAME, "body").text, 60, "Completed on the run page")
    browser.save_screenshot(str(SHOTS / "exclust-ui-run.png"))
    # the run page's Artifacts tab lists the rules digest, the metrics table and the report
    browser.find_element(By.CSS_SELECTOR, "li.p-tab#artifacts").click()
    try:
        _wait_for(lambda: all(key in browser.find_element(By.TAG_NAME, "body").text
                              for key in ("explain-rules", "explain-report", "explain-metrics")), 60,
                  "the run's artifacts")
    finally:
        browser.save_screenshot(str(SHOTS / "exclust-ui-artifacts.png"))
        (SHOTS / "exclust-ui-artifacts.html").write_text(browser.page_source)
