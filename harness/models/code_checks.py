"""Causes in the user's own forward or objective, read off one traced step (code_trace.py) and
named at their file and line, each with the edit that fixes it. A cause here is in code, where no
config override reaches, unless `remedy` names one (an output activation that is a module).

Each check reads what happened on the untrained model's first micro-batch, not the code's text:
a sigmoid that feeds a loss which applies one again (or a ReLU that cuts the logits it reads), a
softmax over one value, a target that broadcasts against the prediction, a term whose gradient was
cut before it joined the loss, an op whose gradient is zero everywhere, a log of probabilities that
nothing keeps off 0, logits clamped into (0, 1) and read as probabilities, weight layers with no
nonlinearity between them, the first op that overflows, the first activation that is flat.
"""
from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from harness.models.code_trace import CLAMPS, FLAT_TAILS, Facts, Op, Trace, Where, traced
from harness.models.forward_facts import untouched
from harness.models.output_activation import FIXED_RANGES

log = logging.getLogger("harness")

# ops that pass a tensor's values on as they are (shape, dtype, device): looked through to find its maker
PASSING = frozenset({"view", "reshape", "squeeze", "unsqueeze", "flatten", "contiguous", "float", "double", "half",
                     "to", "type_as", "transpose", "permute", "clone", "view_as", "reshape_as", "getitem", "t"})
LOGITS_LOSSES = {"binary_cross_entropy_with_logits": "BCE-with-logits", "cross_entropy": "cross-entropy"}
PROBABILITIES = frozenset({"sigmoid", "softmax"})
CUTS = frozenset({"relu", "relu6"})  # no negative value passes: a logit they cut reads 0, with no gradient
LOGS = frozenset({"log", "log2", "log10"})
PICKING = frozenset({"gather", "index_select", "take_along_dim", "select", "narrow", "masked_select"})
PROBABILITY_READERS = LOGS | {"binary_cross_entropy"}
BUILT_IN_LOSSES = frozenset({"cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                             "binary_cross_entropy_with_logits"})  # what the harness's own losses call
TARGET_LOSSES = frozenset({"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
                           "binary_cross_entropy_with_logits", "soft_margin_loss"})
ELEMENTWISE = frozenset({"sub", "add", "mul", "div", "truediv", "pow"})
ZERO_GRADIENT = frozenset({"round", "floor", "ceil", "trunc", "sign"})
ACTIVATION_MODULES = {"Sigmoid", "Softmax", "LogSoftmax"}  # output_activation replaces these when they end the model
ANY_ACTIVATION = frozenset(kind.__name__ for kind in FIXED_RANGES)  # ... and so any of these that ends it
REBUILT = frozenset({"as_tensor", "tensor", "from_numpy", "scalar_tensor"})
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class CodeCause:
    check: str  # the finding's name
    title: str
    lines: tuple[Where, ...]  # where it happens, the cause's own line first
    edit: str
    remedy: tuple[str, ...] = ()  # config overrides that reach it, where any do

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "title": self.title, "lines": [w.to_json() for w in self.lines],
                "edit": self.edit, "remedy": list(self.remedy)}


Check = Callable[[Trace], CodeCause | None]


def _tensors(op: Op) -> list[Facts]:
    return [f for f in op.inputs if isinstance(f, Facts)]


def _dim(op: Op) -> int | None:
    dim = op.kwargs.get("dim", op.inputs[1] if len(op.inputs) > 1 else None)
    return dim if isinstance(dim, int) else None


def _at(op: Op) -> tuple[Where, ...]:
    """An op's line, the lines that built the module running it (a module in `nn.Sequential` or a
    layer library), then the objective's own line that called into it (a loss class, a helper)."""
    return tuple(dict.fromkeys(w for w in (op.where, *op.built_at, op.called_from) if w is not None))


def _lines(*ops: Op | None) -> tuple[Where, ...]:
    """The lines of each op that takes part (`_at`), in order, each once."""
    return tuple(dict.fromkeys(w for op in ops if op is not None for w in _at(op)))


def _placed(op: Op) -> str:
    """'at FILE:LINE (in `net.3`, Sigmoid, built at FILE:LINE)', as much of it as is known."""
    built = f", built at {op.built_at[-1]}" if op.built_at else ""
    module = f"`{op.module}`, {op.module_type}{built}" if op.module else ""
    if op.where is None:
        return f"in {module}"
    return f"at {op.where} (in {module})" if module else f"at {op.where}"


def probabilities_into_logits_loss(trace: Trace) -> CodeCause | None:
    """BCE-with-logits and cross-entropy apply their own sigmoid or softmax: one fed a probability
    applies it twice, squeezing every prediction towards the middle, so the loss stalls far from 0."""
    for op, made in _fed_to_logits_losses(trace, PROBABILITIES):
        if op.where is None:  # the built-in loss: an activation module is output_activation's to name
            if made.where is not None and made.module_type not in ACTIVATION_MODULES:
                return CodeCause(
                    "probabilities_into_logits_loss", f"the model returns a {made.name}, and the built-in "
                                                      f"{LOGITS_LOSSES[op.name]} applies one itself", _at(made),
                    f"return the logits: drop the {made.name} at {made.where} (the loss applies it; apply it "
                    f"yourself only where you report probabilities)")
            continue
        return CodeCause(
            "probabilities_into_logits_loss", f"a {made.name} output is fed to {LOGITS_LOSSES[op.name]}, which applies "
                                              f"one itself",
            _lines(made, op),
            f"return the logits: drop the {made.name} {_placed(made)}; {op.name} at {op.where} applies it (apply it "
            f"yourself only where you report probabilities)",
            ("output_activation=identity",) if made.module_type in ACTIVATION_MODULES else ())
    for op in trace.ops:  # nll_loss reads log-probabilities: anything above 0 is not one
        if op.name == "nll_loss" and op.where is not None and op.inputs and isinstance(op.inputs[0], Facts):
            made = trace.source(op.inputs[0], _reshaped)
            largest = op.inputs[0].largest
            if (made is not None and made.name in PROBABILITIES) or (largest is not None and largest > 1e-6):
                shown = made.where if made is not None and made.where is not None else op.where
                return CodeCause("probabilities_into_logits_loss",
                                 "nll_loss is fed values that are not log-probabilities",
                                 (shown, op.where) if shown != op.where else (op.where,),
                                 f"nll_loss at {op.where} reads log-probabilities (all <= 0): give it log_softmax of "
                                 f"the logits, or give the logits to cross_entropy")
    return None


def _fed_to_logits_losses(trace: Trace, makers: frozenset[str]) -> Iterator[tuple[Op, Op]]:
    """Each logits loss whose input an op of `makers` made (through reshapes and casts), with that op,
    where the user's code called it or built the module that ran it."""
    for op in trace.ops:
        if op.name not in LOGITS_LOSSES or not op.inputs:
            continue
        made = trace.source(op.inputs[0] if isinstance(op.inputs[0], Facts) else None, _reshaped)
        if made is not None and made.name in makers and _placed_in_users_code(made):
            yield op, made


def _placed_in_users_code(op: Op) -> bool:
    """The user's code called the op, or built the module that ran it: a line a finding can name."""
    return op.where is not None or bool(op.module)


def relu_into_logits_loss(trace: Trace) -> CodeCause | None:
    """Cross-entropy and BCE-with-logits read logits, any real number: a ReLU before them cuts every
    negative logit to 0, where it gets no gradient (under BCE-with-logits no label can then be
    predicted below 0.5). Under the built-in loss the output findings name the output's range."""
    for op, made in _fed_to_logits_losses(trace, CUTS):
        if op.where is None:
            continue
        below = "; the sigmoid it applies is then never below 0.5, so no label can be predicted absent" \
            if op.name == "binary_cross_entropy_with_logits" else ""
        return CodeCause(
            "relu_into_logits_loss", f"a {made.name} output is fed to {LOGITS_LOSSES[op.name]}, which reads logits",
            _lines(made, op),
            f"return the logits: drop the {made.name} {_placed(made)}; {op.name} at {op.where} reads any real number, "
            f"and the {made.name} cuts each negative logit to 0, where it gets no gradient{below}",
            ("output_activation=identity",) if made.module_type in ANY_ACTIVATION else ())
    return None


def softmax_over_one(trace: Trace) -> CodeCause | None:
    """A softmax over a dimension of size 1 is 1 whatever its input (a log-softmax 0): constant,
    with no gradient."""
    for op in trace.ops:
        dim = _dim(op)
        tensors = _tensors(op)
        if op.name not in ("softmax", "log_softmax") or op.where is None or dim is None or not tensors:
            continue
        shape = tensors[0].shape
        if -len(shape) <= dim < len(shape) and shape[dim] == 1:
            return CodeCause(
                "softmax_over_one", f"a {op.name} over a dimension of size 1 (dim={dim} of {list(shape)})", _at(op),
                f"a {op.name} over one value is {'1' if op.name == 'softmax' else '0'} for every input: for one output "
                f"unit use a sigmoid (and BCE-with-logits on the logit), for K classes take it over the class "
                f"dimension of K outputs",
                ("output_activation=identity",) if op.module_type in ACTIVATION_MODULES else ())
    return None


def broadcast_target(trace: Trace) -> CodeCause | None:
    """A prediction of shape (B, 1) against a target of (B,) broadcasts to (B, B): every prediction
    is compared with every target, and the model learns the targets' mean."""
    for op in trace.ops:
        tensors = _tensors(op)
        if op.where is None or len(tensors) < 2 or op.output is None:
            continue
        a, b = tensors[0].shape, tensors[1].shape
        if op.name in TARGET_LOSSES and a != b:
            try:
                joined = torch.broadcast_shapes(a, b)
            except RuntimeError:
                continue
            if math.prod(joined) > max(math.prod(a), math.prod(b)):
                return _broadcast(op, a, b, tuple(joined))
        if op.name in ELEMENTWISE and trace.batch > 1 and op.got_gradient and {a, b} == {
                (trace.batch, 1), (trace.batch,)} and op.output.shape == (trace.batch, trace.batch):
            return _broadcast(op, a, b, op.output.shape)
    return None


def _broadcast(op: Op, a: tuple[int, ...], b: tuple[int, ...], joined: tuple[int, ...]) -> CodeCause:
    return CodeCause(
        "broadcast_target", f"{op.name} broadcasts {list(a)} against {list(b)} to {list(joined)}", _at(op),
        "give the prediction and the target one shape: squeeze the model's last dimension (`out.squeeze(-1)`) or "
        "add one to the target (`y[:, None]`); as written every prediction is compared with every target")


def detached_term(trace: Trace) -> CodeCause | None:
    """A term added into the loss whose path to the parameters was cut (detach, no_grad, `.data`,
    numpy) or that was read as a Python number (`.item()`, `float()`): its value is in the loss,
    its gradient is not, so what it measures never trains."""
    numbers = [op for op in trace.ops if op.read_off]
    for op in trace.ops:
        if op.name not in ("add", "sub") or op.where is None or op.output is None or not op.got_gradient:
            continue
        cut = next((f for f in _tensors(op) if f.cut_at is not None and math.prod(f.shape) == 1), None)
        if cut is not None:
            at = trace.op(cut.cut_at)
            lines = tuple(w for w in (at.where if at else None, op.where) if w is not None)
            return CodeCause(
                "detached_term", "a term of the loss has no gradient: its path to the parameters was cut", lines,
                f"compute the term from tensors that keep their gradient: the {at.name if at else 'cut'} at "
                f"{lines[0]} cuts it, and {op.name} at {op.where} adds it to the loss, which then trains only the "
                f"other terms")
        read = [n for n in numbers if n.index < op.index and n.where is not None]
        constant = next((v for v in op.inputs if isinstance(v, float) and not _literal(v, op.where.text)), None)
        rebuilt = next((f for f in _tensors(op) if math.prod(f.shape) == 1 and not f.from_params
                        and _made_by(trace, f) in REBUILT), None)  # a value read out of torch, a tensor again
        if read and (constant is not None or rebuilt is not None):
            return CodeCause(
                "detached_term", "a term of the loss was read out of torch (a number, a numpy array): it has no "
                                 "gradient", (read[-1].where, op.where),
                f"keep the term a torch tensor: `{read[-1].name}` at {read[-1].where} reads it out, and {op.where} "
                f"adds what was read to the loss, which then trains only the other terms")
    return None


def _made_by(trace: Trace, facts: Facts) -> str | None:
    made = trace.op(facts.made_by)
    return made.name if made is not None else None


def _literal(value: float, text: str) -> bool:
    """Whether `value` is written as a number in the line (a constant, not a value read at run time)."""
    return any(float(n) == value for n in NUMBER.findall(text))


def zero_gradient_op(trace: Trace) -> CodeCause | None:
    """round, floor, ceil, trunc and sign have a zero gradient everywhere: nothing before them learns."""
    for op in trace.ops:
        tensors = _tensors(op)
        if op.name in ZERO_GRADIENT and op.where is not None and op.got_gradient and tensors and \
                tensors[0].requires_grad and tensors[0].from_params:
            return CodeCause(
                "zero_gradient_op", f"{op.name} between the parameters and the loss passes no gradient", _at(op),
                f"{op.name}'s gradient is 0 everywhere, so every weight before {op.where} gets none: train on the "
                f"continuous value and apply {op.name} only to report (or pass the gradient straight through: "
                f"`x + (x.{op.name}() - x).detach()`)")
    return None


def _reshaped(op: Op) -> bool:
    return op.name in PASSING


def _as_read(op: Op) -> bool:
    """Values passed on as a log or a loss reads them: reshaped or cast, some of them picked (a
    gather of the target's probability), `1 - x` or `x + 0`."""
    numbers = [v for v in op.inputs if isinstance(v, (int, float))]
    shifted = len(_tensors(op)) == 1 and len(numbers) == 1 and (
        (op.name == "add" and numbers[0] == 0) or (op.name == "sub" and numbers[0] == 1))
    return op.name in PASSING or op.name in PICKING or shifted


def _read_by_users(op: Op) -> bool:
    """The user's code called the op, on values that carry the parameters' gradient."""
    tensors = _tensors(op)
    return op.where is not None and op.got_gradient and bool(tensors) and tensors[0].from_params


def unguarded_log(trace: Trace) -> CodeCause | None:
    """A log of softmax or sigmoid probabilities (or of 1 minus them) with no epsilon or clamp between:
    finite on the untrained model, but a probability that underflows to 0 once the model grows
    confident makes it -inf and the loss NaN (log_softmax and logsigmoid never do)."""
    for op in trace.ops:
        if op.name not in LOGS or not _read_by_users(op):
            continue
        made = trace.source(_tensors(op)[0], _as_read)
        if made is None or made.name not in PROBABILITIES or not _placed_in_users_code(made):
            continue
        stable = "F.log_softmax of the logits (or give the logits to F.cross_entropy)" if made.name == "softmax" \
            else "F.logsigmoid of the logit, and F.logsigmoid(-logit) for log(1 - p) (or give the logits to " \
                 "F.binary_cross_entropy_with_logits)"
        return CodeCause(
            "unguarded_log", f"a log of {made.name} probabilities, with nothing keeping them off 0",
            _lines(op, made),
            f"the {op.name} at {op.where} reads the {made.name} {_placed(made)}: a probability that underflows to 0 "
            f"makes it -inf and the loss NaN; use {stable}, or clamp the probabilities to at least 1e-7 first")
    return None


def clamped_logits(trace: Trace) -> CodeCause | None:
    """Values clamped into (0, 1) and then read as probabilities (a log, binary_cross_entropy) that
    were not probabilities before the clamp: logits read as probabilities, and every value the
    clamp cuts gets no gradient."""
    for op in trace.ops:
        if op.name not in PROBABILITY_READERS or not _read_by_users(op):
            continue
        clamp = trace.source(_tensors(op)[0], _as_read)
        if clamp is None or clamp.name not in CLAMPS or clamp.where is None or not _tensors(clamp):
            continue
        low, high = _bounds(clamp)
        values = _tensors(clamp)[0]
        if low is None or high is None or not 0 <= low < high <= 1 or values.smallest is None \
                or values.largest is None or (values.smallest >= 0 and values.largest <= 1):
            continue
        made = trace.source(values, _reshaped)  # what made the values: the model's output layer, say
        return CodeCause(
            "clamped_logits", f"values from {values.smallest:.3g} to {values.largest:.3g} are clamped into "
                              f"[{low:g}, {high:g}] and read as probabilities",
            _lines(clamp, op, made),
            f"what the clamp at {clamp.where} gets are not probabilities (logits?), and each value it cuts has no "
            f"gradient: give the logits to a loss that reads them (F.cross_entropy, "
            f"F.binary_cross_entropy_with_logits), or make them probabilities first (softmax, sigmoid)",
            ("output_activation=sigmoid",) if made is not None and made.module_type in ANY_ACTIVATION else ())
    return None


def _bounds(op: Op) -> tuple[float | None, float | None]:
    """A clamp's lower and upper bound, where given as numbers."""
    numbers = [v if isinstance(v, (int, float)) else None for v in op.inputs[1:3]]
    low = op.kwargs.get("min", numbers[0] if numbers else None)
    high = op.kwargs.get("max", numbers[1] if len(numbers) > 1 else None)
    return (low if isinstance(low, (int, float)) else None), (high if isinstance(high, (int, float)) else None)


WEIGHTED = frozenset({"linear", "addmm", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                      "conv_transpose3d"})
# ops that keep the output an affine map of the input: sums, reshapes, picks, means, eval-mode dropout
# and batch norm, an embedding's lookup (linear in the one-hot ids); a product is affine while one
# side is a constant (`_affine`)
AFFINE = PASSING | PICKING | WEIGHTED | frozenset({
    "add", "sub", "neg", "cat", "stack", "split", "chunk", "unbind", "expand", "expand_as", "repeat", "flatten",
    "unflatten", "narrow", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
    "batch_norm", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_avg_pool3d", "mean", "sum", "embedding", "pad"})
PRODUCTS = frozenset({"mul", "div", "matmul", "mm", "bmm"})


def no_nonlinearity(trace: Trace) -> CodeCause | None:
    """Two or more weight layers (linear, conv) and nothing but affine ops between the model's input
    and its output: the layers compose to one linear map, whatever their width and depth, so the
    model fits only what a single layer fits."""
    inside = [op for op in trace.ops if op.module is not None and op.output is not None]
    weighted = [op for op in inside if op.name in WEIGHTED]
    if len(weighted) < 2 or not all(_affine(trace, op) for op in inside):
        return None
    built = [w for op in weighted for w in op.built_at]  # where the activation goes, then where they run
    lines = tuple(dict.fromkeys([*built, *_lines(*weighted)]))
    if not lines:
        return None  # the harness's own model: model.activation is a config setting
    return CodeCause(
        "no_nonlinearity", f"the model's {len(weighted)} weight layers have no nonlinearity between them", lines,
        f"put an activation (nn.ReLU(), nn.GELU()) between the layers: as written the {len(weighted)} layers "
        f"compose to one linear map, so the model fits only what a single linear layer fits")


def _affine(trace: Trace, op: Op) -> bool:
    """Whether the op keeps the model affine in its input: an AFFINE op, or a product with at most
    one side computed by the model (a scale, a weight; two computed sides are a gate, attention)."""
    if op.name in AFFINE:
        return True
    if op.name not in PRODUCTS:
        return False
    computed = [f for f in _tensors(op) if (made := trace.op(f.made_by)) is not None and made.module is not None]
    return len(computed) <= 1


def _first_if_users(trace: Trace, matches: Callable[[Op], bool]) -> Op | None:
    """The first op that `matches`, when the user's code called it; None when there is none, or when
    the first is the harness's own (its module-level finding names that one)."""
    op = next((op for op in trace.ops if matches(op)), None)
    return op if op is not None and op.where is not None else None


def _overflows(op: Op) -> bool:
    tensors = _tensors(op)
    return op.output is not None and not op.output.finite and bool(tensors) and all(f.finite for f in tensors)


def _flat(op: Op) -> bool:
    tensors = _tensors(op)
    return op.name in FLAT_TAILS and op.output is not None and op.output.varies is False and bool(tensors) \
        and bool(tensors[0].varies)


def nonfinite_op(trace: Trace) -> CodeCause | None:
    """The first op whose output is Inf/NaN on finite inputs: an exp past ~88, a log of a value at
    or below 0, a division by 0 (forward_overflow names it when it is the harness's own)."""
    op = _first_if_users(trace, _overflows)
    if op is None:
        return None
    return CodeCause("nonfinite_op", f"{op.name} returns Inf/NaN on finite inputs", _at(op),
                     f"compute {op.name} in a stable form (log_softmax, logsigmoid, a clamp or an epsilon "
                     f"before a log or a division, softplus instead of exp)")


def saturated_op(trace: Trace) -> CodeCause | None:
    """The first activation whose output is the same for every sample while its input differs
    (output_activation names it when it is the harness's own)."""
    op = _first_if_users(trace, _flat)
    if op is None:
        return None
    return CodeCause("saturated_op", f"{op.name} is flat: every sample gets the same output", _at(op),
                     f"the {op.name} at {op.where} gets inputs where it is flat (or reduces over one "
                     f"value): scale what feeds it, or take it over the right dimension")


CHECKS: tuple[Check, ...] = (probabilities_into_logits_loss, relu_into_logits_loss, softmax_over_one,
                             broadcast_target, detached_term, zero_gradient_op, unguarded_log, clamped_logits,
                             no_nonlinearity, nonfinite_op, saturated_op)


def code_causes(trace: Trace) -> list[CodeCause]:
    """Every check's cause, at most one per check, in the checks' order; a line an earlier check
    named already (a softmax over one value is also flat) is told once."""
    causes: list[CodeCause] = []
    for check in CHECKS:
        cause = check(trace)
        if cause is not None and not any(cause.lines[0] == earlier.lines[0] for earlier in causes):
            causes.append(cause)
    return causes


def code_facts(model: nn.Module, loss_of: Callable[[], torch.Tensor], batch: int) -> dict[str, Any] | None:
    """summary.json's `code_causes`, `output_lines` and `module_lines` (the lines that built each
    activation module, which the output findings name): one forward, objective and backward of the
    untrained model on the first micro-batch, traced, in eval mode with the RNG streams untouched
    and no `.grad` written. None when the trace itself failed (the run goes on: it is a measurement)."""
    params = [p for p in model.parameters() if p.requires_grad]

    def step() -> None:
        loss = loss_of()
        if loss.requires_grad and params:
            torch.autograd.grad(loss, params, allow_unused=True)

    try:
        with untouched(model):
            trace = traced(model, batch, step)
    except Exception as err:  # noqa: BLE001 - the objective's own check ran this step already; a trace that
        log.warning("the traced first step failed (%s: %s); the run goes on without its code checks",  # fails
                    type(err).__name__, err)  # must not cost the user the run
        return None
    return {"code_causes": [cause.to_json() for cause in code_causes(trace)],
            "output_lines": [where.to_json() for where in output_lines(trace)],
            "module_lines": {name: [where.to_json() for where in lines] for name, lines in trace.built.items()}}


def output_lines(trace: Trace) -> tuple[Where, ...]:
    """The user's lines that made what the built-in loss reads (the model's output, and the module
    that computed it where one did), where the output findings (an activation the loss does not
    expect) can quote them."""
    for op in trace.ops:
        if op.name in BUILT_IN_LOSSES and op.where is None and op.inputs and isinstance(op.inputs[0], Facts):
            made = trace.source(op.inputs[0], _reshaped)
            return _at(made) if made is not None else ()
    return ()


def announced(found: dict[str, Any] | None) -> dict[str, Any] | None:
    """`found`, each cause said once on the console before training starts: it needs an edit, and
    the run that follows shows only its symptoms."""
    for cause in (found or {}).get("code_causes", ()):
        first = cause["lines"][0]
        log.warning("your code: %s, at %s:%d (report.md quotes the lines and the edit)", cause["title"], first["file"],
                    first["line"])
    return found
