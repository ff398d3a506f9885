"""Optimizer component: every conf/optim option trains, custom optimizers match their
definitions, param groups follow the weight-decay rules, and bad configs fail early."""
from __future__ import annotations

import copy
import importlib.util
import io
import sys
import types
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from harness.core.errors import ConfigError
from harness.training.optim import Lamb, Lion, MuonWithAdamW, build_optimizer, validate_optim_config

OPTIONS = ["adamw", "adam", "sgd", "lion", "lamb", "adafactor", "muon"]
HAS_BNB = importlib.util.find_spec("bitsandbytes") is not None


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


@pytest.fixture
def load(repo_root: Path):
    def _load(name: str, **overrides) -> DictConfig:
        cfg = OmegaConf.load(repo_root / "conf" / "optim" / f"{name}.yaml")
        for key, value in overrides.items():
            OmegaConf.update(cfg, key, value, force_add=True)
        return cfg

    return _load


class TinyLM(nn.Module):
    """Embedding -> hidden Linear -> LayerNorm -> head; the head may share the embedding."""

    def __init__(self, vocab: int = 16, dim: int = 8, tie: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.hidden = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        if tie:
            self.lm_head.weight = self.embed.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.norm(torch.relu(self.hidden(self.embed(idx)))))


def make_model(seed: int = 0, **kwargs) -> TinyLM:
    torch.manual_seed(seed)
    return TinyLM(**kwargs)


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed, learnable task: predict (token + 1) mod vocab."""
    gen = torch.Generator().manual_seed(step)
    idx = torch.randint(0, 16, (32,), generator=gen)
    return idx, (idx + 1) % 16


def loss_of(model: nn.Module, step: int) -> torch.Tensor:
    idx, target = batch(step)
    return nn.functional.cross_entropy(model(idx), target)


def train(model: nn.Module, opt: torch.optim.Optimizer, steps: range) -> list[float]:
    losses = []
    for step in steps:
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model, step)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def group_of(opt: torch.optim.Optimizer, param: torch.Tensor) -> dict:
    (group,) = [g for g in opt.param_groups if any(p is param for p in g["params"])]
    return group


# --- every option trains ----------------------------------------------------------------


@pytest.mark.parametrize("name", OPTIONS)
def test_option_reduces_loss(load, name: str) -> None:
    model = make_model()
    opt = build_optimizer(validate_optim_config(load(name)), model)
    with torch.no_grad():
        before = sum(loss_of(model, s).item() for s in range(4))
    train(model, opt, range(60))
    with torch.no_grad():
        after = sum(loss_of(model, s).item() for s in range(4))
    assert after < 0.99 * before, f"{name}: loss {before / 4:.4f} -> {after / 4:.4f}"


@pytest.mark.skipif(not HAS_BNB, reason="bitsandbytes not installed (optional extra stable-harness[bnb])")
def test_adamw8bit_trains_or_explains(load) -> None:
    model = make_model()
    try:
        opt = build_optimizer(validate_optim_config(load("adamw8bit")), model)
    except ConfigError as err:
        assert err.key == "optim._target_" and "cannot run on device" in str(err)
        pytest.skip(f"bitsandbytes cannot run here: {err}")
    losses = train(model, opt, range(40))
    assert losses[-1] < losses[0]


@pytest.mark.skipif(HAS_BNB, reason="bitsandbytes is installed")
def test_adamw8bit_without_bitsandbytes_names_the_extra(load) -> None:
    with pytest.raises(ConfigError) as info:
        validate_optim_config(load("adamw8bit"))
    assert info.value.key == "optim._target_"
    assert 'pip install "stable-harness[bnb]"' in str(info.value)


def test_bitsandbytes_that_cannot_run_here_is_a_config_error(load, monkeypatch) -> None:
    class AdamW8bit(torch.optim.AdamW):
        def step(self, closure=None):
            raise RuntimeError("no kernel for this device")

    package = types.ModuleType("bitsandbytes")
    optim = types.ModuleType("bitsandbytes.optim")
    optim.AdamW8bit = AdamW8bit
    package.optim = optim
    monkeypatch.setitem(sys.modules, "bitsandbytes", package)
    monkeypatch.setitem(sys.modules, "bitsandbytes.optim", optim)

    validate_optim_config(load("adamw8bit"))  # importable: the device problem shows only at build
    with pytest.raises(ConfigError) as info:
        build_optimizer(validate_optim_config(load("adamw8bit")), make_model())
    assert info.value.key == "optim._target_"
    assert "cannot run on device cpu" in str(info.value) and "no kernel" in str(info.value)


# --- Lion and LAMB against hand computations --------------------------------------------


def test_lion_matches_reference_for_two_steps() -> None:
    torch.manual_seed(0)
    w0 = torch.randn(5, 3)
    grads = [torch.randn(5, 3), torch.randn(5, 3)]
    lr, (b1, b2), wd = 0.1, (0.9, 0.99), 0.5

    param = nn.Parameter(w0.clone())
    opt = Lion([param], lr=lr, betas=(b1, b2), weight_decay=wd)
    w, m = w0.clone(), torch.zeros_like(w0)
    for g in grads:
        param.grad = g.clone()
        opt.step()
        c = b1 * m + (1 - b1) * g
        w = w * (1 - lr * wd) - lr * torch.sign(c)
        m = b2 * m + (1 - b2) * g
    torch.testing.assert_close(param.detach(), w)
    torch.testing.assert_close(opt.state[param]["exp_avg"], m)


def test_lamb_scales_adam_step_by_trust_ratio() -> None:
    lr, eps, wd = 0.01, 1e-6, 0.1
    w0 = torch.tensor([3.0, -4.0, 12.0])  # ||w|| = 13
    g = torch.tensor([0.5, 2.0, -1.0])
    param, zero = nn.Parameter(w0.clone()), nn.Parameter(torch.zeros(3))
    opt = Lamb([param, zero], lr=lr, betas=(0.9, 0.999), eps=eps, weight_decay=wd)
    param.grad, zero.grad = g.clone(), g.clone()
    opt.step()

    # After one step the bias-corrected moments are g and g^2.
    adam = g / (g.abs() + eps)
    update = adam + wd * w0
    ratio = w0.norm() / update.norm()
    assert not torch.isclose(ratio, torch.tensor(1.0))
    torch.testing.assert_close(param.detach(), w0 - lr * ratio * update)
    # ||w|| = 0: trust ratio falls back to 1, a plain Adam(W) step.
    torch.testing.assert_close(zero.detach(), -lr * adam)


def test_lamb_zero_gradient_keeps_weights() -> None:
    param = nn.Parameter(torch.ones(4))
    opt = Lamb([param], lr=0.1)
    param.grad = torch.zeros(4)
    opt.step()
    assert torch.equal(param.detach(), torch.ones(4))


# --- Muon --------------------------------------------------------------------------------


def test_muon_routes_hidden_matrices_to_muon_and_the_rest_to_adamw(load) -> None:
    model = make_model()
    opt = build_optimizer(validate_optim_config(load("muon")), model)
    assert isinstance(opt, MuonWithAdamW)
    names = {n: group_of(opt, p)["name"] for n, p in model.named_parameters()}
    assert names == {
        "embed.weight": "adamw_no_decay",
        "hidden.weight": "muon",
        "hidden.bias": "adamw_no_decay",
        "norm.weight": "adamw_no_decay",
        "norm.bias": "adamw_no_decay",
        "lm_head.weight": "adamw_decay",
    }

    # One step must equal torch's own Muon on the hidden matrix plus AdamW on the rest.
    ref_model = copy.deepcopy(model)
    cfg = load("muon")
    ref_muon = torch.optim.Muon(
        [ref_model.hidden.weight], lr=cfg.lr, weight_decay=cfg.weight_decay, momentum=cfg.momentum
    )
    adamw_kw = {"lr": cfg.lr / 20, "betas": tuple(cfg.adamw_betas), "eps": cfg.adamw_eps}
    ref_adamw = torch.optim.AdamW(
        [
            {"params": [ref_model.lm_head.weight], "weight_decay": cfg.adamw_weight_decay},
            {
                "params": [ref_model.embed.weight, ref_model.hidden.bias, ref_model.norm.weight, ref_model.norm.bias],
                "weight_decay": 0.0,
            },
        ],
        **adamw_kw,
    )
    for m, opts in ((model, [opt]), (ref_model, [ref_muon, ref_adamw])):
        loss_of(m, 0).backward()
        for o in opts:
            o.step()
    for (name, p), q in zip(model.named_parameters(), ref_model.parameters()):
        assert torch.equal(p, q), name


def test_muon_head_names_and_tied_embedding(load) -> None:
    model = make_model(tie=True)
    opt = build_optimizer(validate_optim_config(load("muon")), model)
    assert group_of(opt, model.embed.weight)["name"] == "adamw_no_decay"  # tied head counts as embedding
    untied = make_model()
    opt = build_optimizer(validate_optim_config(load("muon", head_names=[])), untied)
    assert group_of(opt, untied.lm_head.weight)["name"] == "muon"


def test_muon_rejects_untagged_params() -> None:
    with pytest.raises(ValueError, match="use_muon"):
        MuonWithAdamW(make_model().parameters())


def test_lambda_lr_reaches_both_inner_optimizers(load) -> None:
    model = make_model()
    opt = build_optimizer(validate_optim_config(load("muon")), model)
    sched = LambdaLR(opt, lambda step: 1.0 if step == 0 else 0.0)
    train(model, opt, range(1))
    sched.step()
    assert all(g["lr"] == 0.0 for g in opt.param_groups)
    before = [p.detach().clone() for p in model.parameters()]
    train(model, opt, range(1, 2))  # lr 0 also zeroes decoupled weight decay
    for (name, p), b in zip(model.named_parameters(), before):
        assert torch.equal(p, b), f"{name} moved at lr 0"


# --- resume ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", OPTIONS)
def test_state_dict_round_trip_is_bit_exact(load, name: str) -> None:
    model = make_model()
    opt = build_optimizer(validate_optim_config(load(name)), model)
    sched = LambdaLR(opt, lambda step: 1.0 / (1 + step))
    train(model, opt, range(3))
    sched.step()
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buffer)
    train(model, opt, range(3, 6))

    buffer.seek(0)
    ckpt = torch.load(buffer)
    resumed = make_model(seed=1)
    resumed.load_state_dict(ckpt["model"])
    resumed_opt = build_optimizer(validate_optim_config(load(name)), resumed)
    resumed_opt.load_state_dict(ckpt["opt"])
    train(resumed, resumed_opt, range(3, 6))
    for (pname, p), q in zip(model.named_parameters(), resumed.parameters()):
        assert torch.equal(p, q), f"{name}: {pname} differs after resume"


def test_muon_scheduler_still_reaches_inner_optimizers_after_load(load) -> None:
    model = make_model()
    opt = build_optimizer(validate_optim_config(load("muon")), model)
    train(model, opt, range(2))
    opt.load_state_dict(copy.deepcopy(opt.state_dict()))
    for group in opt.param_groups:
        group["lr"] = 0.0
    before = [p.detach().clone() for p in model.parameters()]
    train(model, opt, range(2, 3))
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))


def test_muon_survives_deepcopy(load) -> None:
    model = make_model()
    opt = build_optimizer(validate_optim_config(load("muon")), model)
    train(model, opt, range(2))
    twin_model, twin_opt = copy.deepcopy((model, opt))
    train(model, opt, range(2, 4))
    train(twin_model, twin_opt, range(2, 4))
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), twin_model.parameters()))


# --- parameter groups --------------------------------------------------------------------


def test_default_groups_skip_decay_on_bias_norm_embedding(load) -> None:
    model = make_model()
    opt = build_optimizer(validate_optim_config(load("adamw")), model)
    decay = {n for n, p in model.named_parameters() if group_of(opt, p)["weight_decay"] > 0}
    assert decay == {"hidden.weight", "lm_head.weight"}
    assert {g["name"] for g in opt.param_groups} == {"decay", "no_decay"}


def test_tied_weight_appears_once_as_embedding(load) -> None:
    model = make_model(tie=True)
    opt = build_optimizer(validate_optim_config(load("adamw")), model)
    ids = [id(p) for g in opt.param_groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))
    assert group_of(opt, model.embed.weight)["weight_decay"] == 0.0


def test_no_decay_selects_kinds(load) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.RMSNorm(4), nn.BatchNorm1d(4), nn.Embedding(3, 4))
    model[0].bias.requires_grad_(False)
    opt = build_optimizer(validate_optim_config(load("adamw", no_decay=[])), model)
    assert [g["name"] for g in opt.param_groups] == ["decay"]
    assert all(p is not model[0].bias for p in opt.param_groups[0]["params"])  # frozen: skipped

    opt = build_optimizer(validate_optim_config(load("adamw", no_decay=["norm"])), model)
    no_decay = {id(p) for p in group_of(opt, model[1].weight)["params"]}
    assert no_decay == {id(model[1].weight), id(model[2].weight), id(model[2].bias)}


def test_config_lists_become_tuples(load) -> None:
    model = make_model()
    assert build_optimizer(validate_optim_config(load("adamw")), model).param_groups[0]["betas"] == (0.9, 0.95)
    assert build_optimizer(validate_optim_config(load("adafactor")), model).param_groups[0]["eps"] == (None, 1e-3)


def test_validation_leaves_the_global_rng_alone(load) -> None:
    state = torch.get_rng_state()
    for name in OPTIONS:
        validate_optim_config(load(name))
    assert torch.equal(state, torch.get_rng_state())


def test_validate_accepts_root_config(load) -> None:
    validate_optim_config(OmegaConf.create({"seed": 1, "optim": load("adamw")}))


# --- validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "override", "key"),
    [
        ("adamw", {"lr": 0}, "optim.lr"),
        ("adamw", {"lr": -1e-3}, "optim.lr"),
        ("sgd", {"lr": "fast"}, "optim.lr"),
        ("adamw", {"betas": [0.9, 1.0]}, "optim.betas"),
        ("lion", {"betas": [0.9]}, "optim.betas"),
        ("muon", {"adamw_betas": [-0.1, 0.9]}, "optim.adamw_betas"),
        ("adamw", {"weight_decay": -0.1}, "optim.weight_decay"),
        ("sgd", {"momentum": 1.0}, "optim.momentum"),
        ("adamw", {"foo": 1}, "optim.foo"),
        ("adamw", {"no_decay": ["bias", "gain"]}, "optim.no_decay"),
        ("adamw", {"_target_": "torch.optim.NoSuchOpt"}, "optim._target_"),
        ("adamw", {"_target_": "no_such_pkg.Opt"}, "optim._target_"),
        ("adamw", {"_target_": "torch.nn.Linear"}, "optim._target_"),
        ("muon", {"ns_steps": 0}, "optim.ns_steps"),
        ("adam", {"eps": -1.0}, "optim.eps"),  # torch says "epsilon"
    ],
)
def test_validation_names_the_bad_key(load, name: str, override: dict, key: str) -> None:
    cfg = load(name, **override)
    with pytest.raises(ConfigError) as info:
        validate_optim_config(cfg)
    assert info.value.key == key
    assert "\n" not in str(info.value)


def test_unknown_kwarg_message_names_the_option(load) -> None:
    with pytest.raises(ConfigError, match=r"optim\.foo=1 is invalid: .*unexpected keyword argument 'foo'"):
        validate_optim_config(load("adamw", foo=1))


@pytest.mark.parametrize("name", OPTIONS)
def test_shipped_options_validate(load, name: str) -> None:
    validate_optim_config(load(name))
