"""Judgement on programs written the way users write them (tests/sick_programs.py): a healthy MLP on
raw tabular columns gets no warning at batch 32 or 1, the same at a 1000x too low LR is slow, an
exponential activation that overflows is named at its module, and an output that cannot vary is
named at the output, with the remedy that heals each."""
from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

import sick_programs as programs
from conftest import train
from harness.diagnosis import Severity, diagnose, load_run
from harness.models.activation_swap import swap_activations
from harness.models.activation_trace import trace_activations
from harness.models.forward_facts import forward_facts
from harness.models.output_activation import replace_output_activation
from harness.training.attribution import attribute

RUN = ["data=custom", "clip=null", "schedule=constant", "guard=off", "init=default", "monitor=full",
       "monitor.every=25", "logger=none"]
TABULAR = [*RUN, "data._target_=sick_programs.tabular", "data.task=classification", "model._target_=sick_programs.MLP",
           "optim=adam"]
BINARY = [*RUN, "data._target_=sick_programs.binary_float", "data.task=regression", "optim=adam", "optim.lr=1e-3",
          "batch_size=32", "trainer.max_steps=300", "trainer.eval_every=60"]


def _findings(run_dir):
    return diagnose(load_run(run_dir))


def _alarms(findings):
    return [f"{f.name}[{f.severity.value}]" for f in findings if f.severity is not Severity.INFO]


# --- what the untrained model's first batch shows ---------------------------------------------------

@pytest.mark.parametrize("model, inputs, module, kind, value", [
    (programs.OneUnitSoftmax, (8, 5), "net.3", "Softmax", 1.0),
    (programs.OneUnitLogSoftmax, (8, 5), "net.3", "LogSoftmax", 0.0),
    (programs.LSTMClassifier, (8, 12, 1), "softmax", "Softmax", 1.0),
    (programs.FunctionalOneUnitSoftmax, (8, 5), None, None, 1.0),
])
def test_a_constant_output_is_traced_to_the_module_that_makes_it(model, inputs, module, kind, value):
    torch.manual_seed(0)
    net, x = model(), torch.randn(*inputs)
    facts = forward_facts(net, lambda: net(x).sum(), len(x))
    constant = facts["constant_output"]
    assert constant["module"] == module and constant["type"] == kind and constant["value"] == value
    assert constant["after"] is not None and facts["gradient_norm"] == 0.0


def test_where_the_gradient_ends_is_found_when_no_weight_gets_one():
    """Alike inputs hide a constant output; where the gradient stops does not depend on them."""
    torch.manual_seed(0)
    net, x = programs.FunctionalOneUnitSoftmax(), torch.zeros(8, 5)
    facts = forward_facts(net, lambda: net(x).sum(), len(x))
    assert not facts["inputs_vary"] and facts["constant_output"] is None and facts["gradient_norm"] == 0.0
    assert facts["gradient_stop"] == {"reached": "", "reached_type": "FunctionalOneUnitSoftmax",
                                      "last_layer": "net.2", "last_layer_type": "Linear"}
    rounded = programs.MLP()
    stop = forward_facts(rounded, lambda: (rounded(x).round() - 1).pow(2).mean(), len(x))["gradient_stop"]
    assert stop["reached"] is None and stop["last_layer"] == "net.4"  # the loss reads a rounded output
    dead = nn.Sequential(nn.Linear(5, 16, bias=False), nn.ReLU(), nn.Linear(16, 2, bias=False))
    with torch.no_grad():
        dead[0].weight.fill_(-1.0)
    x = torch.rand(8, 5)  # positive inputs: every unit below zero
    stop = forward_facts(dead, lambda: dead(x).logsumexp(1).mean(), len(x))["gradient_stop"]
    assert stop["reached"] == "1" and stop["reached_type"] == "ReLU"  # ends inside: the units' doing
    healthy = programs.MLP()
    assert forward_facts(healthy, lambda: healthy(x).sum(), len(x))["gradient_stop"] is None


def test_a_healthy_model_varies_passes_a_gradient_and_leaves_no_trace():
    torch.manual_seed(0)
    net, x = programs.MLP(), torch.randn(8, 5)
    state = torch.get_rng_state()
    facts = forward_facts(net, lambda: net(x).sum(), len(x))
    assert facts["constant_output"] is None and facts["nonfinite"] is None and facts["gradient_norm"] > 0
    assert all(p.grad is None for p in net.parameters()) and torch.equal(state, torch.get_rng_state())
    assert net.training


class ClampedLogits(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = programs.MLP(out_features=3)

    def forward(self, x):
        return self.net(x).clamp(-0.05, 0.05)


@pytest.mark.parametrize("model, low, high", [
    (lambda: programs.ReLULogits(functional=False), True, False),
    (lambda: programs.ReLULogits(functional=True), True, False),
    (ClampedLogits, True, True),
    (lambda: programs.MLP(out_features=3), False, False),  # raw logits tie nowhere
])
def test_logits_held_at_a_cut_are_counted_at_each_end(model, low, high):
    torch.manual_seed(0)
    net, x = model(), torch.randn(64, 5)
    bounds = forward_facts(net, lambda: net(x).sum(), len(x))["output_bounds"]
    assert bounds["values"] == 192 and (bounds["share_low"] > 0.1) == low and (bounds["share_high"] > 0.1) == high
    assert bounds["positions_low"] == (3 if low else 1)  # a cut holds logits of every class
    if not low:
        assert bounds["share_low"] == 0.0
    assert (bounds["low"] == 0.0) == (low and not high)


def test_a_model_that_gives_every_sample_the_same_logits_ties_each_class_at_its_own_value():
    torch.manual_seed(0)
    net = programs.MLP(out_features=2)
    x = torch.randn(1, 5).expand(64, 5)  # every sample alike: the same two logits each
    bounds = forward_facts(net, lambda: net(x).sum(), len(x))["output_bounds"]
    assert bounds["share_low"] == bounds["share_high"] == 0.5
    assert bounds["positions_low"] == bounds["positions_high"] == 1


def test_the_first_module_that_overflows_on_finite_inputs_is_named():
    torch.manual_seed(0)
    net, x = programs.ExpNet(), 300 * torch.randn(8, 5)
    facts = forward_facts(net, lambda: net(x).sum(), len(x))
    assert facts["nonfinite"]["module"] == "act" and facts["nonfinite"]["type"] == "Exp"
    assert facts["nonfinite"]["input_max"] > 88 and not facts["loss_finite"] and facts["gradient_norm"] is None


def test_a_nonfinite_output_of_the_forwards_own_code_is_told_from_a_modules():
    class LogOfLinear(nn.Module):  # a probability's log with no sigmoid before it: NaN wherever the output is < 0
        def __init__(self) -> None:
            super().__init__()
            self.net = programs.MLP(out_features=3)

        def forward(self, x):
            return torch.log(self.net(x))

    torch.manual_seed(0)
    net, x = LogOfLinear(), torch.randn(8, 5)
    where = forward_facts(net, lambda: net(x).sum(), len(x))["nonfinite"]
    assert where == {"module": "", "type": "LogOfLinear", "input_max": where["input_max"], "after": "net",
                     "after_type": "MLP"} and where["input_max"] > 0


def test_a_users_own_activation_module_is_swapped_and_a_constant_output_replaced():
    net = programs.ExpNet()
    assert swap_activations(net, "gelu", torch.randn(2, 5)) == ["act: Exp -> GELU"]
    lstm = programs.LSTMClassifier()
    x = torch.randn(4, 12, 1)
    replaced = replace_output_activation(lstm, "softmax", trace_activations(lstm, x))
    assert replaced == ["softmax: Softmax -> Softmax"] and lstm.softmax.dim == -1
    assert lstm(x).sum(1).allclose(torch.ones(4)) and lstm(x).std(0).max() > 0  # over the classes now
    log_softmax = programs.OneUnitLogSoftmax()
    assert replace_output_activation(log_softmax, "sigmoid", trace_activations(log_softmax, x[:, :5, 0])) == [
        "net.3: LogSoftmax -> Sigmoid"]


def test_a_nonfinite_loss_on_finite_samples_is_the_models_not_the_datas():
    class Overflow(nn.Module):
        def forward(self, x):
            return torch.exp(x) * torch.tensor([1.0, 0.0])  # exp(90) overflows float32; exp(87) does not
    x = torch.tensor([[90.0, 0.0], [85.0, 0.0], [80.0, 0.0], [87.0, 0.0]])  # inputs of one size
    y = torch.tensor([1, 0, 0, 0])
    found = attribute(Overflow(), lambda out: out, x, y, [0, 1, 2, 3], "classification")
    assert not math.isfinite(found.samples[0]["loss"]) and not found.data_cause
    x[2, 1] = math.nan  # a NaN feature is the data's
    assert attribute(Overflow(), lambda out: out, x, y, [0, 1, 2, 3], "classification").data_cause


# --- whole runs --------------------------------------------------------------------------------------

@pytest.mark.trajectory
@pytest.mark.parametrize("batch, steps, every", [(32, 1500, 150), (1, 2400, 240)])
def test_a_healthy_mlp_on_raw_columns_gets_no_warning(tmp_path, batch, steps, every):
    """Raw columns make the untrained model's first losses far above chance and spread widely; the
    run then learns. Nothing in it is worth a warning."""
    _, summary = train([*TABULAR, "optim.lr=1e-3", f"batch_size={batch}", f"trainer.max_steps={steps}",
                        f"trainer.eval_every={every}", "trainer.eval_batches=300"], tmp_path)
    assert summary["best_val_loss"] < 0.7 * summary["val_prior_loss"]  # it learned
    assert _alarms(_findings(tmp_path)) == []
    if batch > 1:  # the first batch's logits are measured, and cut nowhere
        held = summary["forward"]["output_bounds"]
        assert held["share_low"] == held["share_high"] == 0.0 and held["values"] == 2 * batch


@pytest.mark.trajectory
def test_an_lr_far_too_low_is_slow_progress_not_a_divergence(tmp_path):
    train([*TABULAR, "optim.lr=1e-6", "batch_size=32", "trainer.max_steps=1500", "trainer.eval_every=150"], tmp_path)
    findings = {f.name: f for f in _findings(tmp_path)}
    assert "diverging" not in findings and findings["slow_progress"].severity is Severity.WARNING
    assert findings["slow_progress"].remedies[0].kind == "lr_up"


@pytest.mark.trajectory
def test_an_exponential_activation_that_overflows_is_named_at_its_module(tmp_path):
    train([*TABULAR, "model._target_=sick_programs.ExpNet", "optim.lr=1e-3", "batch_size=32",
           "trainer.max_steps=200", "trainer.eval_every=50"], tmp_path)
    first = _findings(tmp_path)[0]
    assert first.name == "forward_overflow" and "`act` (Exp)" in first.evidence
    assert first.remedies[0].overrides == ("activation_swap=gelu",)


@pytest.mark.parametrize("program, target", [
    (["model._target_=sick_programs.OneUnitSoftmax", "loss._target_=sick_programs.bce"], "sigmoid"),
    (["model._target_=sick_programs.OneUnitLogSoftmax", "loss._target_=sick_programs.bce"], "sigmoid"),
    (["model._target_=sick_programs.OneUnitSoftmax", "loss.function=bce"], "identity"),
])
@pytest.mark.trajectory
def test_a_one_unit_output_is_named_at_the_output_with_its_remedy(tmp_path, program, target):
    train([*BINARY, *program], tmp_path)
    first = _findings(tmp_path)[0]
    assert first.name == "output_activation" and first.severity is Severity.CRITICAL
    assert "`net.3`" in first.evidence and "same output" in first.evidence
    assert first.remedies[0].overrides == (f"output_activation={target}",)


@pytest.mark.trajectory
def test_a_softmax_along_a_size_one_dimension_is_named_before_the_units_it_starves(tmp_path):
    train([*RUN, "data._target_=sick_programs.sequences", "data.task=classification",
           "model._target_=sick_programs.LSTMClassifier", "optim=adam", "optim.lr=1e-2", "batch_size=32",
           "trainer.max_steps=300", "trainer.eval_every=60"], tmp_path)
    findings = _findings(tmp_path)
    assert findings[0].name == "output_activation" and "`softmax` (Softmax)" in findings[0].evidence
    assert findings[0].remedies[0].overrides == ("output_activation=identity",)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["forward"]["gradient_norm"] == 0.0


@pytest.mark.trajectory
def test_a_one_unit_softmax_on_rows_never_filled_in_is_named_at_the_output(tmp_path):
    """Inputs all alike: the output cannot be seen to be constant, but no gradient leaves it."""
    train([*BINARY, "data._target_=sick_programs.blank_rows", "model._target_=sick_programs.FunctionalOneUnitSoftmax",
           "loss._target_=sick_programs.bce", "trainer.max_steps=120"], tmp_path)
    first = _findings(tmp_path)[0]
    assert first.name == "output_activation" and first.severity is Severity.CRITICAL
    assert "not `net.2` (Linear), the last layer with weights" in first.evidence and not first.remedies


@pytest.mark.trajectory
def test_remedy_auto_replaces_a_constant_output_under_the_users_own_objective(tmp_path):
    train([*BINARY, "model._target_=sick_programs.OneUnitSoftmax", "loss._target_=sick_programs.bce",
           "diagnose.remedy=auto", "diagnose.report=false"], tmp_path)
    story = json.loads((tmp_path / "attempts.json").read_text())
    applied = [a["applied"]["overrides"] for a in story["attempts"] if a.get("applied")]
    first, best = story["attempts"][0], story["attempts"][story["best_attempt"] - 1]
    assert applied[0] == ["output_activation=sigmoid"] and story["verdict"] == "healed"
    assert best["best_val_loss"] < 0.5 * first["best_val_loss"]



@pytest.mark.trajectory
def test_a_sigmoid_raw_columns_saturate_is_named_at_the_output_with_their_scale(tmp_path):
    """Under the user's own BCELoss: the scale of the model's inputs is measured where the model
    reads them, and the fix named is to scale them in the dataset (the objective reads whole batches)."""
    train([*RUN, "data._target_=sick_programs.raw_binary", "data.task=regression",
           "model._target_=sick_programs.SigmoidProbability", "loss._target_=sick_programs.bce", "optim=adam",
           "optim.lr=1e-3", "batch_size=32", "trainer.max_steps=60", "trainer.eval_every=30"], tmp_path)
    first = _findings(tmp_path)[0]
    assert first.name == "output_activation" and "output is saturated" in first.title
    assert "`net.3` (Sigmoid)" in first.evidence and "raw units" in first.evidence
    assert "in your dataset" in first.fix and not first.remedies
    stats = json.loads((tmp_path / "summary.json").read_text())["input_stats"]
    assert stats["max_abs_feature_median"] > 1000
