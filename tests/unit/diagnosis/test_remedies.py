"""The remedies findings declare, computed from the run's own config: the config's own cause
first, numbers instead of advice, and none where the fix needs a person or a key is unknown."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.diagnosis.findings import Remedy, Restart
from harness.diagnosis.load import RunData
from harness.diagnosis.remedies import (bound_gradients, calmer_updates, clear_gradient_path, faster_updates,
                                        revive_units, unpin_clip, wider_range)

pytestmark = pytest.mark.trajectory  # follows unstable runs: checked under other kernels too (docs/testing.md)


def run_with(**config) -> RunData:
    base = {"accum": 1, "accum_reduction": "mean", "clip": 1.0, "device": "cpu", "optim": {"lr": 0.03},
            "schedule": {"name": "cosine", "warmup": 0.1}, "trainer": {"max_steps": 100}}
    for key, value in config.items():
        node, *path = key.split("__")
        if path:
            base.setdefault(node, {})[path[0]] = value
        else:
            base[node] = value
    return RunData(Path("run"), base, {}, [], [])


def test_a_diverging_run_gets_a_3x_lower_lr_or_10x_after_an_explosion_with_warmup_and_clip_when_missing():
    assert calmer_updates(run_with(), 40)[0].overrides == ("optim.lr=0.01",)
    (blown,) = calmer_updates(run_with(clip=None, schedule__warmup=0), 40, exploded=True)
    assert blown == Remedy(("optim.lr=0.003", "schedule.warmup=0.05", "clip=1.0"), Restart.CHECKPOINT, blown.why, 40,
                           kind="lr_down")


def test_an_unstable_sgd_run_also_gets_adamw_first_when_heavy_momentum_overshoots():
    sgd = {"_target_": "torch.optim.SGD", "lr": 0.3, "momentum": 0.9}
    lower, switch = calmer_updates(run_with(optim=sgd), 40)
    assert lower.kind == "lr_down" and switch.overrides == ("optim=adamw", "optim.lr=0.001", "optim.weight_decay=0")
    assert switch.restart is Restart.SCRATCH and not switch.changes_model
    first, _ = calmer_updates(run_with(optim={**sgd, "momentum": 0.99}), 40)
    assert first.kind == "optimizer"


def test_the_switch_to_adamw_adds_no_weight_decay_to_a_run_that_had_none():
    """The adamw option's decay (0.1) would hold a small net's weights down where SGD had none; a run
    with decay takes AdamW's usual one."""
    sgd = {"_target_": "torch.optim.SGD", "lr": 0.05, "momentum": 0.99}
    bare, _ = calmer_updates(run_with(optim={**sgd, "weight_decay": 0.0}), 40)
    assert bare.overrides == ("optim=adamw", "optim.lr=0.001", "optim.weight_decay=0")
    decayed, _ = calmer_updates(run_with(optim={**sgd, "weight_decay": 5e-4}), 40)
    assert decayed.overrides == ("optim=adamw", "optim.lr=0.001")


@pytest.mark.parametrize("target, lr, exploded, moved", [
    ("torch.optim.Adam", 100.0, True, "optim.lr=0.01"),  # 10x would leave it 1000x too high: 10x its usual 1e-3
    ("torch.optim.AdamW", 0.1, False, "optim.lr=0.01"),  # 3x would leave it 33x too high
    ("torch.optim.AdamW", 0.05, True, "optim.lr=0.005"),  # 10x lands inside the range: 10x
    ("torch.optim.RMSprop", 10.0, False, "optim.lr=0.1"),  # torch's RMSprop defaults to 1e-2
    ("bench.ports.umlaut_eval_b.NegativeLRAdam", 1000.0, True, "optim.lr=0.01"),  # a subclass of Adam
    ("some.unimportable.Adam", 100.0, True, "optim.lr=0.01"),  # known by its name where its code is not here
    ("torch.optim.SGD", 100.0, True, "optim.lr=10"),  # SGD's step scales with the gradient: no usual LR
])
def test_an_lr_far_above_an_adaptive_optimizers_range_goes_to_its_edge_at_once(target, lr, exploded, moved):
    first = calmer_updates(run_with(optim={"_target_": target, "lr": lr}), 40, exploded=exploded)[0]
    assert first.overrides[0] == moved and first.kind == "lr_down"
    assert ("its usual" in first.why) == (moved != f"optim.lr={lr / (10 if exploded else 3):.3g}")


@pytest.mark.parametrize("lr, ratio, moved", [(1e-7, 1e-9, "optim.lr=0.0001"), (1e-5, 1e-6, "optim.lr=0.0001"),
                                              (3e-4, 1e-4, "optim.lr=0.003")])
def test_an_lr_far_below_an_adaptive_optimizers_range_goes_to_its_edge_at_once(lr, ratio, moved):
    (raised,) = faster_updates(run_with(optim={"_target_": "torch.optim.Adam", "lr": lr}), ratio)
    assert raised.overrides == (moved,) and raised.kind == "lr_up"


def test_summed_micro_batch_gradients_are_averaged_before_the_lr_is_touched():
    summed = run_with(accum=4, accum_reduction="sum")
    (average,) = calmer_updates(summed)
    assert average.overrides == ("accum_reduction=mean",) and "4x too large" in average.why
    assert unpin_clip(summed, 1e-4, 0.3)[0].overrides == ("accum_reduction=mean",)
    assert unpin_clip(summed, 1e-4, 0.3)[0].restart is Restart.CHECKPOINT  # the weights so far were only slowed down


def test_a_pinned_clip_goes_to_the_norms_90th_percentile_and_at_least_10x():
    assert unpin_clip(run_with(), 1e-4, 3.3)[0].overrides == ("clip=3.3",)
    assert unpin_clip(run_with(), 0.5, 0.6)[0].overrides == ("clip=5",)


def test_remedies_for_a_slow_start_restart_from_scratch_so_the_faster_updates_get_every_step():
    assert unpin_clip(run_with(), 1e-4, 0.33)[0].restart is Restart.SCRATCH
    assert faster_updates(run_with())[0].restart is Restart.SCRATCH


@pytest.mark.parametrize("ratio, lr", [(None, "optim.lr=0.09"), (2e-4, "optim.lr=0.15"), (1e-6, "optim.lr=0.3"),
                                       (0.0, "optim.lr=0.3")])
def test_a_slow_run_gets_an_lr_raised_by_how_far_its_updates_fall_short_and_10x_when_nothing_moved(ratio, lr):
    assert faster_updates(run_with(), ratio)[0].overrides == (lr,)


def test_a_slow_sgd_run_gets_adamw_after_the_raise_or_first_when_no_raise_closes_its_shortfall():
    sgd = {"_target_": "torch.optim.SGD", "lr": 0.01, "momentum": 0.9}
    raise_first = faster_updates(run_with(optim=sgd), 2e-4)  # 5x closes it
    assert [r.kind for r in raise_first] == ["lr_up", "optimizer"]
    for ratio in (1e-6, 0.0):  # 1000x short, or nothing moved: SGD's step is the tiny gradient's
        switch, raised = faster_updates(run_with(optim=sgd), ratio)
        assert switch.overrides == ("optim=adamw", "optim.lr=0.001", "optim.weight_decay=0")
        assert switch.restart is Restart.SCRATCH
        assert raised.overrides == ("optim.lr=0.1",)
    assert [r.kind for r in faster_updates(run_with(), 1e-6)] == ["lr_up"]  # already adaptive


def test_fp16_underflow_turns_loss_scaling_on_and_an_overflow_despite_it_moves_to_bf16_where_it_runs():
    assert wider_range(run_with(), scaling_is_on=False)[0].overrides == ("precision.loss_scaling=true",)
    assert wider_range(run_with(), scaling_is_on=True)[0].overrides == ("precision=bf16",)  # every CPU computes in bf16
    assert wider_range(run_with(device="mps"), scaling_is_on=True) == ()


def test_model_remedies_start_over_and_only_name_keys_the_model_has():
    clip, lower = bound_gradients(run_with(), recurrent=True)
    assert clip.overrides == ("clip=0.5",) and lower.overrides == ("optim.lr=0.01",)
    lr, swap, init = revive_units(run_with(clip=None, optim__lr=0.1), dead_from_the_start=False)
    assert lr == Remedy(("optim.lr=0.01", "clip=1.0"), Restart.SCRATCH, lr.why, kind="lr_down")
    assert (swap.overrides, init.overrides) == (("activation_swap=leaky_relu",), ("init=kaiming",))
    gpt, mlp = "harness.models.gpt.GPT", "harness.models.mlp.MLP"
    post_ln = clear_gradient_path(run_with(model={"_target_": gpt, "ln_position": "post"},
                                           schedule={"name": "constant", "warmup": 0}))[0]
    assert post_ln.overrides == ("model.ln_position=pre", "schedule.warmup=0.05") and post_ln.restart is Restart.SCRATCH
    assert clear_gradient_path(run_with(model={"_target_": mlp, "activation": "sigmoid", "residual": False}))[0] \
        .overrides == ("model.activation=gelu",)
    assert clear_gradient_path(run_with(model={"_target_": mlp, "activation": "relu", "residual": False}))[0] \
        .overrides == ("model.residual=true",)


def test_units_dead_from_the_start_get_a_new_init_first_and_every_model_remedy_says_so():
    init, swap, lr = revive_units(run_with(), dead_from_the_start=True)
    assert init.overrides == ("init=kaiming",) and init.changes_model and swap.changes_model and not lr.changes_model
    assert "(changes the model)" in init.describe()
    assert [r.kind for r in revive_units(run_with(init={"name": "kaiming"}, activation_swap="gelu"), True)] == \
        ["lr_down"]  # what the run already has is not offered again


def test_a_user_models_saturating_stack_gets_its_activations_swapped_then_a_new_init():
    """No architecture keys to turn: the modules themselves (activation_swap) and the init group
    work on any nn.Module."""
    run = RunData(Path("run"), {"model": {"_target_": "mymodels.Net"}, "activation_swap": None, "init": {}},
                  {"modules": ["Linear", "Net", "Sigmoid"]}, [], [])
    swap, init = clear_gradient_path(run)
    assert swap.overrides == ("activation_swap=gelu",) and init.overrides == ("init=xavier",)


def test_a_plain_cnn_without_norm_gets_its_residuals_and_batch_norm_back():
    plain = run_with(model={"_target_": "harness.models.resnet.ResNet", "residual": False, "norm": "none"})
    assert clear_gradient_path(plain)[0].overrides == ("model.residual=true", "model.norm=batch")


def test_a_slow_run_gets_the_lr_factor_its_update_ratio_falls_short_by_between_3x_and_10x():
    assert faster_updates(run_with(), update_ratio=2e-4)[0].overrides == ("optim.lr=0.15",)  # 5x
    assert faster_updates(run_with(), update_ratio=1e-6)[0].overrides == ("optim.lr=0.3",)  # capped at 10x
    assert faster_updates(run_with(), update_ratio=8e-4)[0].overrides == ("optim.lr=0.09",)  # at least 3x


def test_a_pinned_clip_is_raised_to_at_least_the_usual_1():
    assert unpin_clip(run_with(), 0.01, 0.2)[0].overrides == ("clip=1",)


def test_a_user_model_gets_no_architecture_remedy_even_when_the_mlp_option_left_its_keys_in_the_config():
    """model=mlp model._target_=mypkg.Net keeps mlp.yaml's residual: false in the composed config;
    model.residual=true would be refused by the user's class, so only the init (any model) is offered."""
    offered = clear_gradient_path(run_with(model={"_target_": "bench.suite_models.Net", "residual": False,
                                                  "activation": "sigmoid", "ln_position": "post"}))
    assert [r.kind for r in offered] == ["init"]


def test_no_lr_in_the_config_means_no_lr_remedy():
    assert faster_updates(run_with(optim={})) == () and calmer_updates(run_with(optim={})) == ()
    assert faster_updates(run_with())[0].overrides == ("optim.lr=0.09",)


def test_a_remedy_reads_as_overrides_where_and_why():
    line = Remedy(("clip=1.0",), Restart.CHECKPOINT, "it bounds updates", 40).describe()
    assert line == "`clip=1.0`, from the last checkpoint before step 40: it bounds updates"
    assert Remedy(("model.residual=true",), Restart.SCRATCH, "why").describe().startswith("`model.residual=true`, "
                                                                                          "from scratch")
