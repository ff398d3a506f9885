"""The rules that name a cause in the user's code read summary.json's `code_causes` (the traced
first step): each gives one finding quoting its lines and the edit, carries a remedy only where a
config override reaches the cause, and is listed before the symptom it explains."""
from __future__ import annotations

import pytest

from diagnosis_runs import Run
from harness.diagnosis.findings import Severity
from harness.diagnosis.rules.code import code_lines

LINE = {"file": "mymodel.py", "line": 41, "text": "return torch.sigmoid(self.out(h))"}
LOSS = {"file": "myloss.py", "line": 12, "text": "return F.binary_cross_entropy_with_logits(out, y)"}


def cause(check: str, remedy: tuple[str, ...] = (), lines=(LINE,)) -> dict:
    return {"check": check, "title": f"{check} happened", "lines": list(lines), "edit": "edit it", "remedy": list(remedy)}


@pytest.mark.parametrize("check", ["probabilities_into_logits_loss", "relu_into_logits_loss", "softmax_over_one",
                                   "broadcast_target", "detached_term", "zero_gradient_op", "unguarded_log",
                                   "clamped_logits", "no_nonlinearity"])
def test_each_cause_is_one_finding_quoting_its_lines_and_the_edit(tmp_path, check):
    run = Run()
    run.summary["code_causes"] = [cause(check, lines=(LINE, LOSS))]
    found = run.findings(tmp_path)
    finding = found[check]
    assert finding.severity is Severity.WARNING and list(found)[0] == check
    assert finding.title.endswith("at mymodel.py:41") and "`mymodel.py:41  return torch.sigmoid" in finding.evidence
    assert "`myloss.py:12  return F.binary_cross_entropy_with_logits(out, y)`" in finding.evidence
    assert finding.fix.startswith("edit it") and "no config override reaches it" in finding.fix
    assert not finding.remedies


def test_a_cause_a_config_override_reaches_carries_it_as_a_remedy_on_any_objective(tmp_path):
    run = Run()
    run.summary.update(code_causes=[cause("probabilities_into_logits_loss", ("output_activation=identity",))],
                       user_loss="mypkg.objective")
    finding = run.findings(tmp_path)["probabilities_into_logits_loss"]
    assert finding.remedies[0].overrides == ("output_activation=identity",) and finding.remedies[0].any_objective
    assert code_lines(_loaded(run, tmp_path)) == []  # a remedy reaches it: remedy=auto may try it


def test_a_latent_cause_does_not_stop_remedy_auto_at_once(tmp_path):
    """A log that meets 0 only once a probability underflows, layers that compose to one linear map:
    the run trains, so the other findings' remedies are tried beside them (an LR cut postpones the
    underflow); a cause that keeps the run from training stops remedy=auto at once."""
    run = Run()
    run.summary["code_causes"] = [cause("unguarded_log"), cause("no_nonlinearity", lines=(LOSS,))]
    loaded = _loaded(run, tmp_path / "latent")
    assert code_lines(loaded) == ["mymodel.py:41", "myloss.py:12"] and code_lines(loaded, latent=False) == []
    run.summary["code_causes"].append(cause("detached_term"))
    assert code_lines(_loaded(run, tmp_path / "blocking"), latent=False) == ["mymodel.py:41"]


def test_causes_quoted_by_other_findings_are_not_findings_of_their_own_and_a_run_without_causes_has_none(tmp_path):
    run = Run()
    run.summary["code_causes"] = [cause("nonfinite_op"), cause("saturated_op")]
    assert not {"nonfinite_op", "saturated_op"} & set(run.findings(tmp_path))
    assert not {"probabilities_into_logits_loss", "detached_term"} & set(Run().findings(tmp_path / "clean"))


def test_forward_overflow_quotes_the_line_that_overflows(tmp_path):
    run = Run()
    run.summary.update(forward={"nonfinite": {"module": "", "type": "Net", "input_max": 1.0, "after": "fc",
                                              "after_type": "Linear"}},
                       code_causes=[cause("nonfinite_op", lines=({"file": "net.py", "line": 9,
                                                                 "text": "return torch.exp(10 * self.fc(x))"},))])
    assert "In your code: `net.py:9  return torch.exp(10 * self.fc(x))`." in run.findings(tmp_path)[
        "forward_overflow"].evidence


def test_a_softmax_over_one_the_constant_output_finding_covers_is_quoted_there_not_told_twice(tmp_path):
    run = Run()
    run.summary.update(forward={"gradient_norm": 0.0, "constant_output": {
        "module": "", "type": "Net", "after": "fc", "after_type": "Linear", "input_max": 1.0, "saturated": False,
        "value": 1.0}}, code_causes=[cause("softmax_over_one")])
    found = run.findings(tmp_path)
    assert "softmax_over_one" not in found
    assert "In your code: `mymodel.py:41  return torch.sigmoid(self.out(h))`." in found["output_activation"].evidence


def test_a_softmax_over_one_behind_a_saturated_activation_is_a_finding_of_its_own(tmp_path):
    """Raw inputs saturate a hidden sigmoid (that finding quotes the sigmoid's line), and the output
    is a softmax over one unit as well: a second cause, told with its own lines."""
    run = Run()
    run.summary.update(forward={"gradient_norm": 0.0, "constant_output": {
        "module": "layers.1", "type": "Sigmoid", "after": "layers.0", "after_type": "Linear", "input_max": 1e4,
        "saturated": True, "value": 1.0}}, code_causes=[cause("softmax_over_one", lines=(LINE, LOSS))])
    found = run.findings(tmp_path)
    assert "output_activation" in found and "`myloss.py:12" in found["softmax_over_one"].evidence


def _loaded(run: Run, tmp_path):
    from harness.diagnosis import load_run

    return load_run(run.write(tmp_path / "loaded"))
