"""The output activation: what it can produce is measured when a run is built, `output_activation`
replaces it on any model, and the diagnosis names an output that cannot express the answer."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from conftest import one_line_error, run_cli, train
from harness.core.errors import ConfigError
from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData, load_run
from harness.diagnosis.rules import diagnose
from harness.diagnosis.rules.output import output_activation
from harness.models.activation_trace import trace_activations
from harness.models.output_activation import describe_output, replace_output_activation


class TwoClassFromOneUnit(nn.Module):
    """A binary classifier that makes a probability from one unit and turns it into two logits itself."""

    def __init__(self, squash: nn.Module) -> None:
        super().__init__()
        self.body, self.head, self.squash = nn.Sequential(nn.Linear(4, 8), nn.ReLU()), nn.Linear(8, 1), squash

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.squash(self.head(self.body(x))).clamp(1e-7, 1 - 1e-7)
        return torch.cat([torch.log1p(-p), p.log()], dim=1)


def described(model: nn.Module) -> dict | None:
    return describe_output(model, trace_activations(model, torch.randn(5, 4)))


def test_the_output_activation_is_told_from_hidden_ones_with_its_range_and_what_reads_it():
    regressor = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1), nn.Sigmoid())
    out = described(regressor)
    assert (out["module"], out["type"], out["low"], out["high"]) == ("3", "Sigmoid", 0.0, 1.0)
    assert out["read_by_loss"] and not out["single_unit_softmax"] and out["units"] == out["output_units"] == 1
    single = described(TwoClassFromOneUnit(nn.Softmax(dim=1)))
    assert single["single_unit_softmax"] and not single["read_by_loss"] and (single["units"], single["output_units"]) \
        == (1, 2)
    assert described(TwoClassFromOneUnit(nn.ReLU()))["high"] is None  # unbounded above
    assert described(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))) is None  # logits: no activation


def test_output_activation_replaces_only_what_comes_after_the_last_layer_with_weights():
    model = nn.Sequential(nn.Linear(4, 8), nn.Sigmoid(), nn.Linear(8, 1), nn.ReLU(), nn.Sigmoid())
    replaced = replace_output_activation(model, "identity", trace_activations(model, torch.randn(5, 4)))
    assert replaced == ["3: ReLU -> Identity", "4: Sigmoid -> Identity"]
    assert isinstance(model[1], nn.Sigmoid)  # hidden: activation_swap's business
    x = torch.randn(5, 4)
    assert torch.equal(model(x), model[2](model[1](model[0](x))))
    softmax = TwoClassFromOneUnit(nn.ReLU())
    assert replace_output_activation(softmax, "sigmoid", trace_activations(softmax, x)) == ["squash: ReLU -> Sigmoid"]


def test_a_model_without_an_output_activation_has_nothing_to_replace(tmp_path):
    """Logits already: identity is what it has; a sigmoid or softmax asked for would change nothing,
    so it is refused in one line, before anything is written."""
    logits = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    trace = trace_activations(logits, torch.randn(5, 4))
    assert replace_output_activation(logits, "identity", trace) == []
    with pytest.raises(ConfigError) as err:
        replace_output_activation(logits, "softmax", trace)
    assert err.value.key == "output_activation" and "Sequential calls no activation module" in str(err.value)
    result = run_cli(["model=mlp", "data=synthetic", "debug=smoke", "output_activation=sigmoid",
                      f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert "null or identity: MLP calls no activation module" in one_line_error(result, "output_activation")
    assert not (tmp_path / "run").exists()


def run_of(task: str, out: dict | None, **summary) -> RunData:
    return RunData(Path("run"), {"output_activation": None}, {"task": task, "output_activation": out, **summary}, [], [])


def output(kind: str, low, high, *, single=False, read=True, units=1, output_units=1) -> dict:
    return {"module": "head.act", "type": kind, "low": low, "high": high, "single_unit_softmax": single,
            "read_by_loss": read, "units": units, "output_units": output_units}


@pytest.mark.parametrize("task, out, percentiles, severity, remedy", [
    # a softmax over one unit is 1 whatever the input: a binary probability is a sigmoid
    ("classification", output("Softmax", 0.0, 1.0, single=True, read=False, output_units=2), None, "critical",
     "output_activation=sigmoid"),
    ("regression", output("Softmax", 0.0, 1.0, single=True), [0.0] * 101, "critical", "output_activation=identity"),
    # a sigmoid regression head on targets in the tens: none reachable
    ("regression", output("Sigmoid", 0.0, 1.0), list(range(10, 111)), "critical", "output_activation=identity"),
    ("regression", output("Sigmoid", 0.0, 1.0), [0.5] * 96 + [2.0] * 5, "warning", "output_activation=identity"),
    ("regression", output("Sigmoid", 0.0, 1.0), [0.0] * 50 + [1.0] * 51, None, None),  # 0/1 targets: reachable
    ("regression", output("ReLU", 0.0, None), list(range(101)), None, None),
    # a cross-entropy on logits squashed into (0, 1); a ReLU's logits are unbounded above
    ("classification", output("Sigmoid", 0.0, 1.0, units=10, output_units=10), None, "warning",
     "output_activation=identity"),
    ("classification", output("ReLU", 0.0, None, units=10, output_units=10), None, None, None),
    # a model that normalises its scores itself: a ReLU is no probability, a sigmoid is
    ("classification", output("ReLU", 0.0, None, read=False, units=10, output_units=10), None, "warning",
     "output_activation=softmax"),
    ("classification", output("ReLU", 0.0, None, read=False, output_units=2), None, "warning",
     "output_activation=sigmoid"),
    ("classification", output("Sigmoid", 0.0, 1.0, read=False, output_units=2), None, None, None),
    ("classification", output("GELU", -0.17, None, read=False, units=64, output_units=10), None, None, None),
])
def test_an_output_that_cannot_express_the_answer_is_named_with_the_replacement_that_can(task, out, percentiles,
                                                                                       severity, remedy):
    finding = output_activation(run_of(task, out, target_percentiles=percentiles))
    if severity is None:
        assert finding is None
        return
    assert finding.severity == Severity(severity) and finding.remedy.overrides == (remedy,)
    assert finding.remedy.changes_model and finding.remedy.kind == "output"


def test_a_warning_beside_a_symptom_it_explains_becomes_critical_and_comes_first(monkeypatch):
    import harness.diagnosis.rules as rules

    out = output("ReLU", 0.0, None, read=False, units=10, output_units=10)
    run = run_of("classification", out)
    assert output_activation(run).severity == Severity.WARNING  # alone: the run may still learn
    for symptom in ("plateau_at_chance", "diverging"):
        def sick(_run, name=symptom):
            return Finding(name, Severity.CRITICAL, "sick", "", "")

        monkeypatch.setattr(rules, "RULES", (sick, output_activation))
        assert [(f.name, f.severity) for f in rules.diagnose(run)] == [
            ("output_activation", Severity.CRITICAL), (symptom, Severity.CRITICAL)]
    replaced = RunData(Path("run"), {"output_activation": "softmax"}, run.summary, [], [])
    assert output_activation(replaced).remedies == ()  # replaced once already: no second candidate of that kind


@pytest.mark.trajectory
def test_a_user_regressor_with_a_sigmoid_head_is_named_and_its_output_replaced(tmp_path):
    overrides = ["model=mlp", "data=synthetic", "data.task=regression", "~model.depth", "~model.activation",
                 "~model.norm", "~model.residual", "~model.dropout", "~model.width", "trainer.max_steps=60",
                 "model._target_=tests.remedy_models.SigmoidHeadRegressor", "diagnose.report=false"]
    _, summary = train(overrides, tmp_path / "given")
    assert summary["output_activation"]["type"] == "Sigmoid" and summary["output_activation"]["read_by_loss"]
    _, fixed = train([*overrides, "output_activation=identity"], tmp_path / "fixed")
    assert fixed["output_replaced"] == ["squash: Sigmoid -> Identity"] and fixed["output_activation"] is None
    assert fixed["best_val_loss"] < 0.8 * summary["best_val_loss"]
    (first, *_) = diagnose(load_run(tmp_path / "given"))
    assert (first.name, first.severity, first.remedy.overrides) == ("output_activation", Severity.CRITICAL,
                                                                    ("output_activation=identity",))
    result = run_cli(["output_activation=tanh", f"hydra.run.dir={tmp_path / 'bad'}"], cwd=tmp_path)
    assert "null or one of ['identity', 'sigmoid', 'softmax']" in one_line_error(result, "output_activation")
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("off_one, percentiles, severity, remedy", [
    (0.68, [0.0] * 50 + [1.0] * 51, "critical", "output_activation=sigmoid"),  # multi-label rows: 2 labels on
    (0.05, [0.0] * 50 + [1.0] * 51, "warning", "output_activation=sigmoid"),
    (0.5, list(range(-50, 51)), "critical", "output_activation=identity"),  # values of any size
    (0.0, [0.0] * 50 + [1.0] * 51, None, None),  # distributions: a softmax can make every row
])
def test_a_softmax_cannot_make_target_rows_that_do_not_sum_to_one(off_one, percentiles, severity, remedy):
    run = run_of("regression", output("Softmax", 0.0, 1.0, units=3, output_units=3), target_percentiles=percentiles,
                 target_rows_off_one=off_one)
    finding = output_activation(run)
    assert (finding.severity, finding.remedy.overrides) == (Severity(severity), (remedy,)) if severity else \
        finding is None


def bounds(low: float, high: float, share_low: float, share_high: float, values: int = 640, positions: int = 10) -> dict:
    return {"forward": {"output_bounds": {"low": low, "high": high, "share_low": share_low, "share_high": share_high,
                                          "values": values, "positions_low": positions, "positions_high": positions}}}


@pytest.mark.parametrize("task, out, held, remedy, words", [
    # a ReLU module on the logits, half of them at 0: it can be replaced
    ("classification", output("ReLU", 0.0, None, units=10, output_units=10), bounds(0.0, 9.0, 0.5, 0.0),
     ("output_activation=identity",), "`head.act` (ReLU)"),
    # the same cut written in the forward: named, with no remedy that could reach it
    ("classification", None, bounds(0.0, 9.0, 0.5, 0.0), (), "the forward's own code"),
    # log(clip(z)): held at both ends
    ("classification", None, bounds(-16.1, -1e-7, 0.4, 0.57), (), "likelier or less likely"),
    # a bce regression's logits too
    ("regression", None, bounds(0.0, 3.0, 0.2, 0.0), (), "the forward's own code"),
    # a single logit through a ReLU module: held in its one position, where the module's range ends
    ("classification", output("ReLU", 0.0, None, units=1, output_units=1), bounds(0.0, 2.0, 0.5, 0.0, positions=1),
     ("output_activation=identity",), "`head.act` (ReLU)"),
])
def test_logits_a_cut_holds_are_named_at_the_cut(task, out, held, remedy, words):
    summary = {**held, **({"loss_function": "bce"} if task == "regression" else {})}
    finding = output_activation(run_of(task, out, **summary))
    assert finding.name == "output_activation" and finding.severity is Severity.WARNING
    assert finding.title == "the logits are cut off" and words in finding.evidence
    assert tuple(o for r in finding.remedies for o in r.overrides) == remedy


def test_a_cut_in_the_forwards_own_code_quotes_the_line_that_made_the_output():
    line = {"file": "net.py", "line": 34, "text": "return torch.relu(logits)"}
    finding = output_activation(run_of("classification", None, **bounds(0.0, 9.0, 0.5, 0.0), output_lines=[line]))
    assert finding.title == "the logits are cut off" and "In your code: `net.py:34  return torch.relu(logits)`" \
        in finding.evidence


@pytest.mark.parametrize("task, held, summary", [
    ("classification", bounds(0.0, 9.0, 0.05, 0.0), {}),  # a few ties: chance, or too few to say
    ("classification", bounds(0.0, 9.0, 0.5, 0.0, values=6), {}),
    # every sample the same two logits: each class ties at its own value (a model blind to its inputs)
    ("classification", bounds(-0.1, 0.2, 0.5, 0.5, positions=1), {}),
    ("regression", bounds(0.0, 9.0, 0.5, 0.0), {}),  # an MSE regression's range is another check's
    ("classification", bounds(0.0, 9.0, 0.5, 0.0), {"user_loss": True}),  # a user's loss may read anything
])
def test_logits_that_are_not_held_or_not_logits_are_not_named(task, held, summary):
    assert output_activation(run_of(task, None, **held, **summary)) is None


def test_an_output_module_that_explains_held_logits_is_named_with_its_own_remedy():
    """A ReLU's class scores turned into logits by a clipped log (Keras' cross-entropy on what it
    takes for probabilities): most logits sit at log 1e-7, and the ReLU module behind them is what
    to replace, by a softmax, not a cut in the forward's code."""
    out = output("ReLU", 0.0, None, read=False, units=10, output_units=10)
    finding = output_activation(run_of("classification", out, **bounds(-16.1, -1e-7, 0.89, 0.09, positions=9)))
    assert finding.title == "the class scores are not probabilities"
    assert finding.remedy.overrides == ("output_activation=softmax",)


def saturated(module: str = "head.act", kind: str = "Sigmoid") -> dict:
    return {"forward": {"gradient_norm": 0.0, "constant_output": {
        "after": "head", "after_type": "Linear", "module": module, "type": kind, "input_max": 387.0,
        "saturated": True, "value": 1.0}}}


RAW = {"input_stats": {"max_abs_feature_median": 2567.0, "max_feature_spread": 872.0, "rms": 1188.0}}
SCALED = {"input_stats": {"max_abs_feature_median": 0.1, "max_feature_spread": 1.0, "rms": 1.0}}


@pytest.mark.parametrize("summary, out, remedies", [
    # raw inputs drove a sigmoid the built-in bce reads as logits flat: scale them, then drop it
    ({**RAW, "loss_function": "bce"}, output("Sigmoid", 0.0, 1.0),
     [("data.standardize=true",), ("output_activation=identity",)]),
    # inputs already scaled: nothing to standardise; a sigmoid that is the prediction itself is kept
    ({**SCALED, "loss_function": "mse"}, output("Sigmoid", 0.0, 1.0, read=False), []),
    ({**RAW, "loss_function": "mse"}, output("Sigmoid", 0.0, 1.0, read=False), [("data.standardize=true",)]),
    # the user's objective reads whole batches: named with its fix, never a swap to the same sigmoid
    ({**RAW, "user_loss": "mypkg.bce"}, output("Sigmoid", 0.0, 1.0, read=False), []),
])
def test_a_saturated_output_is_blamed_on_the_scale_that_feeds_it(summary, out, remedies):
    finding = output_activation(run_of("regression", out, **saturated(), **summary))
    assert finding.severity is Severity.CRITICAL and "is saturated: the model's output is the same" in finding.title
    assert "`head.act` (Sigmoid) is saturated" in finding.evidence and "reach 387" in finding.evidence
    assert ("raw units" in finding.evidence) == (summary["input_stats"] is RAW["input_stats"])
    assert [r.overrides for r in finding.remedies] == remedies
    assert ("in your dataset" in finding.fix) == ("user_loss" in summary)


def test_a_sigmoid_on_raw_columns_is_found_saturated_and_a_one_unit_softmax_is_not():
    """The measurement behind it: a module constant on varying inputs that varies once they are
    brought to unit scale is saturated; one constant by its form stays constant."""
    from harness.models.forward_facts import forward_facts

    torch.manual_seed(2)
    raw = torch.rand(32, 6) * torch.tensor([400.0, 900.0, 30.0, 5.0, 120.0, 2.0]) + 1000.0
    net = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1), nn.Sigmoid())
    with torch.no_grad():
        net[2].weight.abs_()
        net[2].bias.fill_(50.0)  # every sample far in the sigmoid's upper tail, where float32 rounds it to 1
    facts = forward_facts(net, lambda: net(raw).sum(), len(raw))
    constant = facts["constant_output"]
    assert constant["module"] == "3" and constant["saturated"] and constant["input_max"] > 50
    assert facts["gradient_norm"] == 0.0
    one_unit = nn.Sequential(nn.Linear(6, 1), nn.Softmax(dim=1))
    facts = forward_facts(one_unit, lambda: one_unit(raw / 1000).sum(), len(raw))
    assert facts["constant_output"]["module"] == "1" and not facts["constant_output"]["saturated"]


@pytest.mark.parametrize("held, named", [
    (bounds(0.0, 1.0, 0.75, 0.06, values=32, positions=1), True),  # 3 in 4 outputs at a sigmoid's 0
    (bounds(0.0, 1.0, 0.03, 0.06, values=32, positions=1), False),  # a few: noise-sized
    (bounds(0.02, 0.97, 0.0, 0.0, values=32, positions=1), False),  # inside the range: not saturated
])
def test_outputs_held_at_the_end_of_their_range_are_named_under_the_users_objective(held, named):
    out = output("Sigmoid", 0.0, 1.0)  # the loss reads what the sigmoid returns
    finding = output_activation(run_of("regression", out, user_loss="mypkg.bce", **RAW, **held))
    assert (finding is not None) == named
    if named:
        assert finding.severity is Severity.WARNING and "75% exactly 0" in finding.evidence
        assert "raw units" in finding.evidence and not finding.remedies


def test_squashed_logits_are_told_in_the_tasks_terms():
    """Classes under cross-entropy: how much likelier one class can be; labels under bce: how far
    each label's own probability can go."""
    classes = output_activation(run_of("classification", output("Sigmoid", 0.0, 1.0, units=10, output_units=10)))
    assert "times likelier than another" in classes.evidence and "softmax" in classes.fix
    labels = output_activation(run_of("classification", output("Sigmoid", 0.0, 1.0, units=5, output_units=5),
                                      loss_function="bce"))
    assert "each label's probability stays between 0.5 and 0.731" in labels.evidence
    assert "softmax" not in labels.evidence + labels.fix and "one sigmoid per label" in labels.fix
    assert labels.remedy.overrides == ("output_activation=identity",)
