"""`python train.py hydra/launcher=slurm ...` without -m: the run becomes one SLURM job.

Hydra only consults a launcher in multirun mode, so train.py asks first (harness.launch.single,
which calls `SlurmLauncher.submit_single_run`).
The config is checked here, before anything is queued; the job then runs the same command
(minus the launcher) in the same run dir, with `resume=auto`, so a requeue continues it. By
default the command returns once the job is queued; `hydra.launcher.wait=true` follows it to
the end (Ctrl-C cancels it) and exits with its outcome.
"""
import signal
import threading
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from harness.launch.app import app_command
from harness.launch.runner import TrialSpec
from hydra_plugins.harness_slurm_launcher.runner import SlurmTrialRunner, job_log

DEVICE_KEYS = ("device", "precision")  # checked in the job: the submitting node may have no GPU


def submit_run(cfg: DictConfig) -> int:
    """Queue this run as a job; with `wait`, follow it. Returns the exit status for train.py."""
    from hydra.core.hydra_config import HydraConfig

    from harness.config.run_config import validate_config
    from harness.core.errors import ConfigError
    from harness.state.run_lock import release_run_dir
    from harness.state.rundir import claim_run_dir
    from harness.modes.run import hydra_choices

    hydra_cfg = HydraConfig.get()
    runner = SlurmTrialRunner(hydra_cfg.launcher, what=str(hydra_cfg.job.name))
    params = runner.params
    try:
        validate_config(cfg, params["nodes"] * params["tasks_per_node"], hydra_choices())
    except ConfigError as err:
        if err.key.split(".")[0] not in DEVICE_KEYS or not params["gpus_per_node"]:
            raise
    run_dir = Path(hydra_cfg.runtime.output_dir)
    claim_run_dir(run_dir, cfg.resume, cfg.overwrite)  # here, so the job's resume=auto never meets an earlier run
    release_run_dir(run_dir)  # the job takes the run dir's lock: this process only queues it
    spec = TrialSpec(number=0, run_dir=run_dir, overrides=tuple(hydra_cfg.overrides.task), env={}, slot=0, n_slots=1)
    app = app_command(OmegaConf.create({"hydra": OmegaConf.to_container(hydra_cfg)}))
    job = runner.submit(app, spec, folder=run_dir / ".submitit")
    print(f"submitted SLURM job {job.job_id}; log {job_log(job)}; run dir {run_dir}", flush=True)
    if not params["wait"]:
        print(f"follow it with: tail -f {job_log(job)}   cancel it with: scancel {job.job_id}", flush=True)
        return 0
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())  # Ctrl-C cancels the job
    result = runner.follow(job, app, spec, stop)
    summary = run_dir / "summary.json"
    if result.killed:
        print(f"job {job.job_id} cancelled ({result.killed})", flush=True)
        return 130
    print(f"job {job.job_id} ended with exit code {result.exit_code}; "
          f"{summary if summary.is_file() else 'no summary.json: see its log'}", flush=True)
    return 0 if result.exit_code == 0 else 1
