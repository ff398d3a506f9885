"""config.yaml records what ran: read back and checked, it gives the typed config the run was built
from, for the config as composed and for every config derived from it (LR scaling, a remedy
attempt, the LR finder's sweep, mode=eval's scoring pass)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from conftest import compose_cfg
from harness.assembly.assemble import assemble
from harness.config.run_config import RunConfig, validate_config
from harness.modes.lr_find import sweep_config
from harness.remedy.driver import attempt_config
from harness.remedy.story import Attempt

RUN = ["model=mlp", "data=synthetic", "model.width=16", "logger=none", "trainer.max_steps=8", "diagnose.live=true",
       "batch_size=32", "scale_lr.base_batch=8", "schedule.warmup=4", "lr_find.num_steps=20", "doctor.overfit_steps=7"]


def _given() -> RunConfig:
    return validate_config(compose_cfg(RUN)).with_lr_scaling()


def _derived(name: str, tmp_path: Path) -> RunConfig:
    given = _given()
    if name == "as composed":
        return validate_config(compose_cfg(RUN))
    if name == "lr scaling":
        return given
    if name == "remedy attempt":
        attempt = Attempt(2, ["optim=sgd", "optim.lr=0.05", "precision=bf16", "activation_swap=gelu"], "from scratch")
        return attempt_config(given, attempt, tmp_path / "attempt")
    if name == "lr_find sweep":
        return sweep_config(given)
    return given.with_overrides(["trainer.eval_batches=1000000", "logger=none", "diagnose=false"])  # mode=eval


def _typed_parts(config: RunConfig) -> dict[str, object]:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name != "record"}


@pytest.mark.parametrize("name", ["as composed", "lr scaling", "remedy attempt", "lr_find sweep", "eval"])
def test_config_yaml_read_back_is_the_typed_config_that_ran(name, tmp_path):
    torch.set_num_threads(1)
    config = _derived(name, tmp_path)
    assemble(config, tmp_path / "run", torch.device("cpu"), resume_from=None, console=False).close()
    recorded = OmegaConf.load(tmp_path / "run" / "config.yaml")
    read_back = validate_config(recorded)
    assert _typed_parts(read_back) == _typed_parts(config)


def test_each_derivation_changed_what_it_names():
    """The round trip above is not vacuous: the derived configs differ from the one as composed,
    in their typed parts and in their record alike."""
    given = _given()
    assert given.optim.options["lr"] == pytest.approx(4 * validate_config(compose_cfg(RUN)).optim.options["lr"])
    assert given.schedule.warmup == given.record.schedule.warmup == 1
    attempt = attempt_config(given, Attempt(2, ["optim=sgd", "precision=bf16"], "from scratch"), Path("unused"))
    assert attempt.optim.path == attempt.record.optim._target_ == "torch.optim.SGD"
    assert attempt.precision.name == "bf16" and attempt.job.resume == "auto"
    assert attempt.diagnose.abort_on == attempt.record.diagnose.abort_on == "remedy"
    assert (attempt.lr_find, attempt.doctor) == (given.lr_find, given.doctor)
    assert given.lr_find.num_steps == 20 and given.doctor.overfit_steps == 7
    assert sweep_config(given).guard.spike_zscore is None is sweep_config(given).record.guard.spike_zscore
