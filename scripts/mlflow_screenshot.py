"""Look at an MLflow store the way a person would: start `mlflow ui` on it, open an experiment's
runs, one run, its metric chart and its artifacts in headless Chromium, and save a screenshot of
each page (then open the PNGs and look).

    python scripts/mlflow_screenshot.py --store outputs/mlflow.db --out shots/
    python scripts/mlflow_screenshot.py --store outputs/mlflow.db --experiment my-study --out shots/

Needs the mlflow extra and a Chromium (Debian: apt-get install chromium).
"""
from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

PAGES = {  # file name -> the UI's route (a hash route of its single-page app)
    "1_experiment_runs": "#/experiments/{experiment}/runs",
    "2_run_overview": "#/experiments/{experiment}/runs/{run}",
    "3_run_metrics": "#/experiments/{experiment}/runs/{run}/model-metrics",
    "4_run_artifacts": "#/experiments/{experiment}/runs/{run}/artifacts",
    "5_runs_charts": "#/experiments/{experiment}/runs?compareRunsMode=CHART",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"mlflow ui did not answer at {url} within {seconds:.0f} s")


def pick_runs(uri: str, experiment: str | None) -> tuple[str, str]:
    """(experiment id, a child run id when the experiment has parent/child runs, else any run)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment) if experiment else next(
        e for e in client.search_experiments() if e.name != "Default")
    runs = client.search_runs([found.experiment_id], order_by=["attributes.start_time ASC"])
    child = next((r for r in runs if "mlflow.parentRunId" in r.data.tags), runs[0])
    return found.experiment_id, child.info.run_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, default=Path("outputs/mlflow.db"))
    parser.add_argument("--experiment", default=None, help="default: the first experiment that is not Default")
    parser.add_argument("--out", type=Path, default=Path("mlflow_shots"))
    parser.add_argument("--wait", type=float, default=60.0, help="seconds each page may render (virtual time)")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is None:
        raise SystemExit("no Chromium found (Debian: apt-get install chromium)")
    uri = f"sqlite:///{args.store.resolve()}"
    experiment, run = pick_runs(uri, args.experiment)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", "127.0.0.1",
                               "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}/"
        wait_until_up(base, 90)
        args.out.mkdir(parents=True, exist_ok=True)
        for name, route in PAGES.items():
            shot = args.out / f"{name}.png"
            # charts draw lazily: every compositor stage must run before the shot is taken
            subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            "--window-size=1500,2400", "--run-all-compositor-stages-before-draw",
                            f"--virtual-time-budget={int(args.wait * 1000)}",
                            f"--screenshot={shot}", base + route.format(experiment=experiment, run=run)],
                           check=True, capture_output=True, timeout=120)
            print(shot)
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
