"""The doctor (`python train.py mode=doctor`): pre-flight checks of a configuration, each with a verdict,
the measured value and a fix; `train.py` exits 1 when any check fails."""
from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

from harness.assembly.assemble import Assembly, assemble
from harness.state.run_dir_snapshot import accept_command
from harness.config.run_config import RunConfig
from harness.config.doctor import DoctorConfig
from harness.modes.doctor.code_check import check_code
from harness.modes.doctor.data_checks import check_inputs, check_labels
from harness.modes.doctor.gradcheck import check_gradients
from harness.modes.doctor.model_checks import check_gradient_flow, check_initial_loss, check_overfit
from harness.modes.doctor.report import headline, print_table, write
from harness.modes.doctor.result import CheckResult, Outcome, Status
from harness.modes.doctor.schedule_check import check_schedule

__all__ = ["CheckResult", "DoctorConfig", "Outcome", "Status", "diagnose", "run_doctor"]
log = logging.getLogger("harness")
Check = Callable[[Assembly], Outcome]


def checks(settings: DoctorConfig) -> list[tuple[str, Check]]:
    """In order: data before the model (a bad label explains a bad loss), the costly overfit last."""
    return [
        ("labels vary and are in range", check_labels),
        ("inputs finite / ids in vocab", check_inputs),
        ("initial loss vs ln(K)", check_initial_loss),
        ("your code: no cause at a line", check_code),  # before the gradients: a cut term explains a missing one
        ("every parameter gets a gradient", check_gradient_flow),
        ("numerical gradient check (float64)", check_gradients),
        ("schedule fits max_steps", check_schedule),
        (f"overfits {settings.overfit_samples} samples", partial(check_overfit, settings=settings)),
    ]


def _run_check(name: str, check: Check, built: Assembly) -> CheckResult:
    """A check that crashes is a failure of the configuration, reported like the others."""
    try:
        return CheckResult(name, check(built))
    except Exception as err:  # noqa: BLE001 - whatever the model or data raise, the user needs the row
        log.warning("doctor: check %r raised", name, exc_info=True)
        return CheckResult(name, Outcome(Status.FAIL, f"raised {type(err).__name__}: {err}",
                                         "the traceback is in the log above (and train.log)"))


def diagnose(built: Assembly, settings: DoctorConfig) -> list[CheckResult]:
    """Every check on this run; its trainer's state is the same afterwards."""
    return [_run_check(name, check, built) for name, check in checks(settings)]


def run_doctor(config: RunConfig, run_dir: Path, device: torch.device) -> int:
    """mode=doctor: prints the table, writes RUN_DIR/doctor.md and doctor.json; returns the number of failures."""
    settings = config.doctor
    built = assemble(config, run_dir, device, resume_from=None)
    accept_command()
    try:
        results = diagnose(built, settings)
    finally:
        built.close()
    print_table(results)
    write(results, run_dir)
    log.info("%s (%s)", headline(results), run_dir / "doctor.md")
    return sum(r.outcome.status is Status.FAIL for r in results)
