"""Causes in the user's own code are named at their file and line: each check on a program with
that one bug (tests/code_bugs.py, the lines marked `# names: CHECK`), and silence on its fixed twin;
then the finding, remedy=auto and mode=doctor on a whole run."""
from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
import torch
from torch import nn

import code_bugs as bugs
from conftest import compose_cfg, train
from harness.diagnosis import write_report
from harness.models.code_checks import code_facts
from harness.models.code_trace import BUILT_AT, recording_sites
from harness.modes.run import run

SOURCE = Path(bugs.__file__).read_text().splitlines()

# check -> (the bug's model, objective, data), (its fixed twin's)
CASES = {
    "probabilities_into_logits_loss": ((bugs.SigmoidTagger, bugs.tag_loss, bugs.tags),
                                       (bugs.Tagger, bugs.tag_loss, bugs.tags)),
    "detached_term (detach)": ((bugs.VAE, bugs.elbo_detached, bugs.tags), (bugs.VAE, bugs.elbo, bugs.tags)),
    "detached_term (item)": ((bugs.VAE, bugs.elbo_item, bugs.tags), (bugs.VAE, bugs.elbo, bugs.tags)),
    "detached_term (.data)": ((bugs.VAE, bugs.elbo_data, bugs.tags), (bugs.VAE, bugs.elbo, bugs.tags)),
    "detached_term (numpy)": ((bugs.VAE, bugs.elbo_numpy, bugs.tags), (bugs.VAE, bugs.elbo, bugs.tags)),
    "broadcast_target (mse_loss)": ((bugs.Regressor, bugs.mse_broadcast, bugs.pairs),
                                    (bugs.Regressor, bugs.mse, bugs.pairs)),
    "broadcast_target (by hand)": ((bugs.Regressor, bugs.squared_error_broadcast, bugs.pairs),
                                   (bugs.Regressor, bugs.mse, bugs.pairs)),
    "zero_gradient_op": ((bugs.RoundedRegressor, bugs.mse, bugs.pairs), (bugs.Regressor, bugs.mse, bugs.pairs)),
    "softmax_over_one": ((bugs.OneUnitSoftmax, bugs.binary_nll, bugs.classes),
                         (bugs.LogSoftmaxNet, bugs.nll, bugs.classes)),
    "nonfinite_op": ((bugs.ExpHead, bugs.mse, bugs.pairs), (bugs.SoftplusHead, bugs.mse, bugs.pairs)),
    "saturated_op": ((bugs.SaturatedRegressor, bugs.mse, bugs.raw_prices),
                     (bugs.CenteredRegressor, bugs.mse, bugs.raw_prices)),
    "unguarded_log (softmax)": ((bugs.ClassNet, bugs.handwritten_nll, bugs.classes),
                                (bugs.ClassNet, bugs.guarded_nll, bugs.classes)),
    "unguarded_log (sigmoid)": ((bugs.ProbabilityTagger, bugs.handwritten_bce, bugs.tags),
                                (bugs.ProbabilityTagger, bugs.stable_bce, bugs.tags)),
    "relu_into_logits_loss": ((bugs.ReluHeadNet, bugs.cross_entropy_relu, bugs.classes),
                              (bugs.ClassNet, bugs.cross_entropy, bugs.classes)),
    "clamped_logits": ((bugs.LogitsNet, bugs.clamped_nll, bugs.classes),
                       (bugs.ClassNet, bugs.guarded_nll, bugs.classes)),
    "no_nonlinearity": ((bugs.LinearStack, bugs.cross_entropy, bugs.classes),
                        (bugs.ReluStack, bugs.cross_entropy, bugs.classes)),
}


def causes(model_class, objective, data, batch: int = 16) -> list[dict]:
    torch.manual_seed(0)
    x, y = data()[0].tensors
    model = model_class()
    found = code_facts(model, lambda: objective(model(x[:batch]), [x[:batch], y[:batch]]), batch)
    assert found is not None
    assert all(p.grad is None for p in model.parameters())  # a measurement: nothing kept
    return found["code_causes"]


def marked(check: str, *objects) -> set[int]:
    """The lines of `objects` (and the functions they call in tests/code_bugs.py) marked for `check`."""
    lines = set()
    for obj in objects:
        body, start = inspect.getsourcelines(obj)
        lines |= {start + i for i, text in enumerate(body) if text.rstrip().endswith(f"# names: {check}")}
    return lines


@pytest.mark.parametrize("case", CASES)
def test_each_check_names_the_bugs_lines_and_stays_silent_on_the_fixed_twin(case):
    check = case.split(" ")[0]
    (model, objective, data), fixed = CASES[case]
    found = causes(model, objective, data)
    assert [c["check"] for c in found][:1] == [check]
    ours = [line for line in found[0]["lines"] if line["file"].endswith("code_bugs.py")]  # not this test's call
    assert found[0]["lines"][0] == ours[0] and {line["line"] for line in ours} == marked(check, model, objective)
    assert found[0]["edit"] and all(line["text"] == SOURCE[line["line"] - 1].strip() for line in ours)
    assert causes(*fixed) == []


def test_a_linear_stack_is_named_first_at_the_lines_that_made_its_layers():
    """Built as the harness builds a model (its construction lines recorded): where the activation
    goes comes first, then the forward's line that runs the layers."""
    torch.manual_seed(0)
    x, y = bugs.classes()[0].tensors
    with recording_sites():
        model = bugs.LinearStack()
    found = code_facts(model, lambda: bugs.cross_entropy(model(x[:16]), [x[:16], y[:16]]), 16)["code_causes"]
    ours = [w["line"] for w in found[0]["lines"] if w["file"].endswith("code_bugs.py")]
    assert found[0]["check"] == "no_nonlinearity"
    assert ours == [*sorted(marked("built_apart", bugs.LinearStack)), *marked("no_nonlinearity", bugs.LinearStack)]


def test_a_cut_or_clamp_made_by_an_activation_module_carries_the_override_that_replaces_it():
    """A ReLU module before cross-entropy: output_activation=identity; the same values clamped and read
    as probabilities: output_activation=sigmoid. A ReLU written in the forward: an edit only."""
    (module,) = causes(bugs.relu_module_net, bugs.cross_entropy, bugs.classes)
    assert (module["check"], module["remedy"]) == ("relu_into_logits_loss", ["output_activation=identity"])
    (clamped,) = causes(bugs.relu_module_net, bugs.clamped_nll, bugs.classes)
    assert (clamped["check"], clamped["remedy"]) == ("clamped_logits", ["output_activation=sigmoid"])
    (functional,) = causes(bugs.ReluHeadNet, bugs.cross_entropy_relu, bugs.classes)
    assert functional["remedy"] == []


@pytest.mark.parametrize("model", [bugs.GatedUnit, bugs.BagOfWords, bugs.ClassNet])
def test_models_that_are_not_a_collapsed_linear_stack_get_no_cause(model):
    """A gate multiplies two computed sides; a bag of embeddings and a single layer are linear on purpose."""
    assert causes(model, bugs.cross_entropy, bugs.classes) == []


def test_a_built_in_model_and_loss_get_no_cause(tmp_path):
    _, summary = train(["model=mlp", "data=synthetic", "trainer.max_steps=4", "logger=none", "diagnose=false"],
                       tmp_path / "run")
    assert summary["code_causes"] == []


TAGGER = ["data=custom", "data._target_=code_bugs.tags", "loss._target_=code_bugs.tag_loss", "trainer.max_steps=40",
          "trainer.eval_every=20", "logger=none"]


def test_the_sigmoid_tagger_is_named_at_both_lines_in_the_report_and_its_fixed_twin_is_not(tmp_path):
    train([*TAGGER, "model._target_=code_bugs.SigmoidTagger"], tmp_path / "sick")
    write_report(tmp_path / "sick", plots=False)
    report = (tmp_path / "sick" / "report.md").read_text()
    model_line, loss_line = sorted(marked("probabilities_into_logits_loss", bugs.SigmoidTagger, bugs.tag_loss))
    assert "`probabilities_into_logits_loss`" in report
    assert f"code_bugs.py:{model_line}  return torch.sigmoid(self.out(torch.relu(self.body(x))))" in report
    assert f"code_bugs.py:{loss_line}  return F.binary_cross_entropy_with_logits(output, batch[1])" in report
    train([*TAGGER, "model._target_=code_bugs.Tagger"], tmp_path / "fine")
    write_report(tmp_path / "fine", plots=False)
    assert "probabilities_into_logits_loss" not in (tmp_path / "fine" / "report.md").read_text()


def test_a_sigmoid_module_the_harness_calls_is_named_by_its_module_the_line_that_built_it_and_its_override(tmp_path):
    """No line of the user's runs the sigmoid (torch's Sequential calls it): the line that built the
    module stands for it."""
    _, summary = train([*TAGGER, "model._target_=code_bugs.sequential_tagger", "diagnose=false"], tmp_path / "run")
    (cause,) = summary["code_causes"]
    (built,), (loss_line,) = marked("built_at", bugs.sequential_tagger), marked("probabilities_into_logits_loss",
                                                                                bugs.tag_loss)
    assert cause["check"] == "probabilities_into_logits_loss" and cause["remedy"] == ["output_activation=identity"]
    assert [line["line"] for line in cause["lines"]] == [built, loss_line]
    assert f"in `3`, Sigmoid, built at tests/code_bugs.py:{built}" in cause["edit"]
    assert {name: [w["line"] for w in lines] for name, lines in summary["module_lines"].items()} == {
        "1": [built], "3": [built]}  # the activation modules (ReLU, Sigmoid) the output findings may name


def test_a_module_is_placed_at_the_line_that_constructed_it_not_where_it_was_handed_on():
    """A layer list made on one line and given to nn.Sequential on the next; a module of the user's
    own class at the line that called it (not its `super().__init__()`), its parts at theirs."""
    with recording_sites():
        listed, head = bugs.listed_tagger(), bugs.headed()
    (made,), (called,) = marked("constructed", bugs.listed_tagger), marked("constructed", bugs.headed)
    (inside,) = marked("constructed_inside", bugs.SigmoidHead)
    assert BUILT_AT[listed[3]][0].line == made and BUILT_AT[listed[1]][0].line == made  # [1]: the outer caller's
    assert BUILT_AT[head][0].line == called and BUILT_AT[head.act][0].line == inside
    assert nn.Module.__init__ is torch.nn.modules.module.Module.__dict__["__init__"]  # put back


BUILT_IN = ["data=synthetic", "trainer.max_steps=20", "trainer.eval_every=10", "logger=none", "diagnose=false"]


def test_a_softmax_returned_to_the_built_in_cross_entropy_is_named_at_its_line(tmp_path):
    _, summary = train([*BUILT_IN, "model._target_=code_bugs.SoftmaxClassifier"], tmp_path / "functional")
    (cause,) = summary["code_causes"]
    line = min(marked("probabilities_into_logits_loss", bugs.SoftmaxClassifier))
    assert cause["check"] == "probabilities_into_logits_loss" and [w["line"] for w in cause["lines"]] == [line]


def test_an_activation_module_the_output_finding_names_gets_the_line_that_made_the_output(tmp_path):
    """nn.Softmax as the last module: output_activation names the module (with its remedy) and
    quotes the line of the forward that returned it and the line that constructed the module (its
    own line of a multi-line nn.Sequential); no second finding."""
    _, summary = train([*BUILT_IN, "model._target_=code_bugs.SoftmaxModuleClassifier"], tmp_path / "run")
    assert summary["code_causes"] == []
    built, returned = sorted(marked("output_line", bugs.SoftmaxModuleClassifier))
    assert [(w["file"], w["line"]) for w in summary["output_lines"]] == [("tests/code_bugs.py", returned),
                                                                         ("tests/code_bugs.py", built)]
    assert summary["output_lines"][0]["text"] == "return self.net(x)  # names: output_line"
    write_report(tmp_path / "run", plots=False)
    report = (tmp_path / "run" / "report.md").read_text()
    assert f"In your code: `tests/code_bugs.py:{returned}  return self.net(x)" in report
    assert f"`tests/code_bugs.py:{built}  nn.Linear(32, num_classes), nn.Softmax(dim=1))" in report  # its own line


def test_a_loss_class_is_named_inside_and_at_the_objectives_line_that_calls_it(tmp_path):
    _, summary = train(["data=custom", "data._target_=code_bugs.pairs", "model._target_=code_bugs.Regressor",
                        "loss._target_=code_bugs.class_loss_broadcast", "trainer.max_steps=4", "logger=none",
                        "diagnose=false"], tmp_path / "run")
    (cause,) = summary["code_causes"]
    assert cause["check"] == "broadcast_target"
    assert [line["line"] for line in cause["lines"]] == sorted(marked("broadcast_target", bugs.SmoothL1,
                                                                      bugs.class_loss_broadcast))


VAE = ["data=custom", "data._target_=code_bugs.tags", "model._target_=code_bugs.VAE", "trainer.max_steps=40",
       "trainer.eval_every=20", "logger=none", "diagnose.remedy=auto", "diagnose.report=false"]


def test_remedy_auto_says_a_code_change_is_needed_at_the_line_and_tries_nothing(tmp_path):
    _, summary = train([*VAE, "loss._target_=code_bugs.elbo_detached"], tmp_path / "run")
    detach_line = min(marked("detached_term", bugs.elbo_detached))
    assert summary["remedy_verdict"] == "needs a code change" and len(summary["attempts"]) == 1
    assert summary["attempts"][0]["code"] == [f"tests/code_bugs.py:{detach_line}"]
    _, fine = train([*VAE, "loss._target_=code_bugs.elbo"], tmp_path / "fine")
    assert fine["remedy_verdict"] != "needs a code change" and not fine["attempts"][0].get("code")


def test_a_latent_cause_alone_still_needs_a_code_change(tmp_path):
    """A linear stack trains, so it does not stop the other findings' remedies (tests/unit/diagnosis),
    but a run with nothing else to try is never 'healthy' beside it."""
    _, alone = train(["data=custom", "data._target_=code_bugs.classes", "model._target_=code_bugs.LinearStack",
                      "loss._target_=code_bugs.cross_entropy", "trainer.max_steps=40", "trainer.eval_every=20",
                      "logger=none", "diagnose.remedy=auto", "diagnose.report=false"], tmp_path / "alone")
    assert alone["remedy_verdict"] == "needs a code change" and len(alone["attempts"]) == 1
    assert alone["attempts"][0]["code"] == [f"tests/code_bugs.py:{min(marked('built_apart', bugs.LinearStack))}"]


def test_the_doctor_fails_the_check_naming_the_line(tmp_path):
    cfg = compose_cfg([*TAGGER, "model._target_=code_bugs.SigmoidTagger", "mode=doctor", "doctor.overfit_steps=10"])
    assert run(cfg, run_dir=tmp_path) >= 1
    rows = {c["name"]: c for c in json.loads((tmp_path / "doctor.json").read_text())["checks"]}
    row = rows["your code: no cause at a line"]
    model_line = min(marked("probabilities_into_logits_loss", bugs.SigmoidTagger))
    assert row["status"] == "FAIL" and f"code_bugs.py:{model_line}" in row["measured"] and "logits" in row["fix"]
