"""The LR schedule as built fits the run: warmup ends well inside it and any decay ends exactly at its end."""
from __future__ import annotations

from torch.optim.lr_scheduler import LRScheduler

from harness.assembly.assemble import Assembly
from harness.modes.doctor.result import Outcome, Status
from harness.training.schedule import ENDS_AT_MIN_LR, ScheduleConfig, steps_of

# Warmup longer than this share of the run spends it below the chosen LR; common recipes use 1-10%.
WARMUP_WARN_FRACTION = 0.2
RATIO_TOL = 1e-6  # float slack when comparing the last step's LR factor with min_lr_ratio
PEAK_PROBES = 1000  # steps sampled to find the schedule's peak without walking a million-step run


def check_schedule(built: Assembly) -> Outcome:
    return judge_schedule(built.live_lr.scheduler, built.config.schedule, built.config.trainer.max_steps)


def judge_schedule(scheduler: LRScheduler, cfg: ScheduleConfig, max_steps: int) -> Outcome:
    """`scheduler` is the one built; `cfg` the schedule asked for, whose length must be the run's."""
    lambdas = getattr(scheduler, "lr_lambdas", None)
    if not lambdas:
        return Outcome(Status.SKIP, f"{type(scheduler).__name__} is not an LR-multiplier schedule")
    factor, last = lambdas[0], max_steps - 1
    warmup = steps_of(cfg.warmup, max_steps)
    probes = {*range(0, max_steps, max(1, max_steps // PEAK_PROBES)), warmup}  # warmup < max_steps: validated
    peak = max(factor(step) for step in probes)
    final = factor(last)
    measured = (f"{cfg.name}: warmup {warmup}/{max_steps} steps ({warmup / max_steps:.0%}), "
                f"LR x{factor(0):.3g} at step 0, x{peak:.3g} peak, x{final:.3g} at step {last}")
    if factor(0) <= 0:
        return Outcome(Status.FAIL, measured,
                       "the first update has LR 0 and is wasted: let warmup start above 0, e.g. (step + 1) / (warmup + 1)")
    if final < peak and max_steps > 1 and factor(last - 1) <= final:
        return Outcome(Status.FAIL, measured,
                       "the decay reaches its floor before the last step: the schedule's length must be "
                       "trainer.max_steps")
    if final < peak and cfg.name in ENDS_AT_MIN_LR and abs(final - cfg.min_lr_ratio) > RATIO_TOL:
        return Outcome(Status.FAIL, measured,
                       f"the decay ends at x{final:.3g}, not schedule.min_lr_ratio={cfg.min_lr_ratio}: "
                       "the schedule and trainer.max_steps disagree")
    if warmup > WARMUP_WARN_FRACTION * max_steps:
        return Outcome(Status.WARN, measured,
                       f"warmup takes over {WARMUP_WARN_FRACTION:.0%} of the run: shorten schedule.warmup "
                       "(1-10% is usual) unless the run is deliberately short")
    return Outcome(Status.PASS, measured)
