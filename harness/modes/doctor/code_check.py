"""The doctor's check of the user's own code: one traced step of the untrained model, and any cause
it finds named at its file and line (models/code_checks.py), before a run is spent on it."""
from __future__ import annotations

from harness.assembly.assemble import Assembly
from harness.data.batch import batch_size
from harness.models.code_checks import code_facts
from harness.modes.doctor.result import Outcome, Status
from harness.modes.doctor.sampling import batches, sample_indices


def check_code(built: Assembly) -> Outcome:
    model = built.raw_model
    x, y = next(batches(built, sample_indices(built.train_set, built.micro_batch)))
    found = code_facts(model, lambda: built.objective.score(model, x, y).loss, batch_size(x))
    if found is None:
        return Outcome(Status.SKIP, "the traced step failed (the log above says why)")
    found = found["code_causes"]
    if not found:
        return Outcome(Status.PASS, "no cause at a line of the model's forward or the objective")
    first = found[0]
    where = "; ".join(f"{line['file']}:{line['line']}  {line['text']}" for line in first["lines"])
    more = f" (and {len(found) - 1} more: report.md after a run lists each)" if len(found) > 1 else ""
    config = f"; or {' '.join(first['remedy'])}" if first["remedy"] else ""
    return Outcome(Status.FAIL, f"{first['title']}: {where}{more}", first["edit"] + config)
