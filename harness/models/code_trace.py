"""One step of the untrained model traced op by op, so that a cause in the user's own forward or
objective can be shown at its file and line.

Under a `TorchFunctionMode` every torch function and tensor method the model's forward and the
objective call is recorded with the facts the checks (code_checks.py) read: the shapes of its
tensor inputs, which op made each of them, whether they carry a gradient or were cut from one
(detach, no_grad, `.data`, numpy), whether its output is finite and varies across the batch, and
the first frame in the user's files that called it, and where the module running it was built
(`recording_sites`: the line that constructed a module `nn.Sequential` or a layer library runs).
A hook on each output says whether the loss's gradient reached it. It runs once, inside the
build's forward-and-backward measurement: nothing is kept and no step pays for it.
"""
from __future__ import annotations

import functools
import importlib.util
import linecache
import sys
import sysconfig
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode


def _package(name: str) -> str:
    spec = importlib.util.find_spec(name)
    return str(Path(spec.origin).parent) if spec is not None and spec.origin else "<"


# torch, the standard library, generated code, and the config machinery that builds the model
_PASSED = (str(Path(torch.__file__).parent), sysconfig.get_paths()["stdlib"], "<", _package("hydra"),
           _package("omegaconf"))
_HARNESS = str(Path(__file__).resolve().parents[1])
NUMBER_OF = ("item", "float", "int", "tolist")  # a tensor read as a Python number: no gradient leaves it
FLAT_TAILS = frozenset({"sigmoid", "tanh", "softmax", "log_softmax", "hardtanh", "hardsigmoid", "softsign"})
CLAMPS = frozenset({"clamp", "clip"})
DETAILED = FLAT_TAILS | CLAMPS | {"nll_loss"}  # ops whose first input and output get `varies` and their range
MAX_OPS = 20_000  # a forward longer than this is traced up to here: the checks read its start
MAX_MODULES = 2_000  # activation modules whose building lines are kept (the findings name a few of them)


@dataclass(frozen=True)
class Where:
    """The user's line that called an op."""

    file: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "text": self.text}


@dataclass
class Facts:
    """One tensor an op read or made."""

    shape: tuple[int, ...]
    floating: bool
    requires_grad: bool
    from_params: bool  # computed from a parameter (or is one)
    made_by: int | None  # the op that made it, None for the batch, a parameter or a constant
    cut_at: int | None = None  # the op where its path to the parameters lost its gradient
    finite: bool = True
    varies: bool | None = None  # across the batch (None: no batch dimension)
    largest: float | None = None  # its largest value, floating and finite only
    smallest: float | None = None  # its smallest value, likewise


@dataclass
class Op:
    index: int
    name: str  # the torch function or tensor method: "sigmoid", "binary_cross_entropy_with_logits", "add"
    where: Where | None
    module: str | None  # the innermost module running when it was called ("" the model itself)
    module_type: str | None
    built_at: tuple[Where, ...]  # the lines that built that module (innermost, then outermost), where seen
    inputs: list[Facts | float | int | None]  # tensors, Python numbers (None: anything else), in call order
    kwargs: dict[str, Any]
    output: Facts | None
    got_gradient: bool = False
    read_off: bool = False  # a tensor computed from the parameters left torch here (`.item()`, `float()`, numpy)
    called_from: Where | None = None  # outside the model: the objective's own line that led here (a loss class's call)


@dataclass
class Trace:
    ops: list[Op] = field(default_factory=list)
    batch: int = 0
    built: dict[str, tuple[Where, ...]] = field(default_factory=dict)  # activation module -> the lines that built it

    def op(self, index: int | None) -> Op | None:
        return None if index is None else self.ops[index]

    def source(self, facts: Facts | None, passes: Callable[[Op], bool]) -> Op | None:
        """The op that made `facts`, looking back along the first tensor input of each op that
        `passes` (a reshape, a cast: the values go on as they were)."""
        op = self.op(facts.made_by) if facts is not None else None
        while op is not None and passes(op):
            tensor = next((f for f in op.inputs if isinstance(f, Facts)), None)
            if tensor is None:
                return op
            op = self.op(tensor.made_by)
        return op


def _user_frames(frame: Any = None) -> tuple[Where | None, Where | None]:
    """The innermost caller outside torch and the standard library, when it is the user's (a library
    the user's model is made of, such as transformers, counts as theirs), and the outermost user
    frame before the harness called in, where it differs; (None, None) when the innermost is the
    harness's own code (its built-in losses, its measurements)."""
    frame, found = frame or sys._getframe(1), []
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(_PASSED) and name != __file__:
            if name.startswith(_HARNESS):
                break
            found.append(Where(_shown(name), frame.f_lineno, linecache.getline(name, frame.f_lineno).strip()))
        frame = frame.f_back
    if not found:
        return None, None
    return found[0], found[-1] if len(found) > 1 else None


BUILT_AT: weakref.WeakKeyDictionary[nn.Module, tuple[Where, ...]] = weakref.WeakKeyDictionary()


@contextmanager
def recording_sites() -> Iterator[None]:
    """While active, each module records in `BUILT_AT` the user's lines that constructed it
    (`nn.Sigmoid()` on its own line of a multi-line `nn.Sequential(...)`, or in a list handed to
    one on the next line): an op run inside a module the harness calls, or one built by a layer
    library, has no line of its own in the forward. torch has no hook on construction, so
    `nn.Module.__init__` is wrapped for as long as the model is being built."""
    init = nn.Module.__init__

    def recorded(module: nn.Module, *args: Any, **kwargs: Any) -> None:
        init(module, *args, **kwargs)
        if module not in BUILT_AT:
            inner, outer = _user_frames(_constructor_caller(sys._getframe(1), module))
            if inner is not None:
                BUILT_AT[module] = (inner, outer) if outer is not None else (inner,)

    nn.Module.__init__ = recorded  # type: ignore[method-assign]
    try:
        yield
    finally:
        nn.Module.__init__ = init  # type: ignore[method-assign]


def _constructor_caller(frame: Any, module: nn.Module) -> Any:
    """The frame that called `Class(...)`: past the `__init__`s of `module`'s own classes (the
    user's `super().__init__()` line is not where the module was made)."""
    while frame is not None and frame.f_code.co_name == "__init__" and frame.f_locals.get("self") is module:
        frame = frame.f_back
    return frame


@functools.lru_cache(maxsize=256)
def _shown(path: str) -> str:
    """A path relative to the working directory where it lies below it (as a user names it)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return path


def _name(func: Any) -> str:
    """The op's name as the checks read it: `__radd__` is an add, `__float__` reads a number."""
    if func is torch.Tensor.data.__get__:
        return "data"
    name = getattr(func, "__name__", str(func))
    if name in ("__float__", "__int__"):
        return "item"
    if name.startswith("__r") and name.endswith("__") and name not in ("__repr__", "__reduce__", "__reduce_ex__"):
        return name[3:-2]
    return name.strip("_")


class CodeTrace(TorchFunctionMode):
    """Records `Op`s while active; `trace` holds them. `batch` is the micro-batch's size."""

    def __init__(self, model: nn.Module, batch: int) -> None:
        super().__init__()
        self.trace = Trace(batch=batch)
        self._made: dict[int, Facts] = {}  # id(tensor) -> its facts, for tensors the trace made
        self._kept: list[Any] = []  # what the ids refer to, alive until the trace ends
        self._params = {id(p) for p in model.parameters()}
        self._modules: list[tuple[str, str, tuple[Where, ...]]] = []
        self._arrays: dict[int, Facts] = {}  # id(numpy array) -> the cut tensor it was read from
        names = {module: name for name, module in model.named_modules()}
        self._hooks = [m.register_forward_pre_hook(self._entered(n)) for m, n in names.items()]
        self._hooks += [m.register_forward_hook(self._left) for m in names]

    def _entered(self, name: str) -> Callable[[nn.Module, Any], None]:
        def entered(module: nn.Module, args: Any) -> None:
            built = BUILT_AT.get(module, ())
            self._modules.append((name, type(module).__name__, built))
            if built and type(module).__module__ == nn.modules.activation.__name__ \
                    and len(self.trace.built) < MAX_MODULES:
                self.trace.built.setdefault(name, built)
        return entered

    def _left(self, module: nn.Module, args: Any, output: Any) -> None:
        if self._modules:
            self._modules.pop()

    def close(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._made.clear()
        self._kept.clear()
        self._arrays.clear()

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if len(self.trace.ops) < MAX_OPS and func is not torch.Tensor.backward:
            self._record(func, args, kwargs, out)
        return out

    def _record(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        name = _name(func)
        inputs = [item for a in (*args, *kwargs.values()) for item in self._read(a)]
        if name in ("as_tensor", "tensor", "from_numpy") and args and id(args[0]) in self._arrays:
            source = self._arrays[id(args[0])]  # numpy read off a cut tensor, back as a tensor
            inputs = [source]
        index = len(self.trace.ops)
        where, outer = _user_frames()
        module = self._modules[-1] if self._modules else (None, None, ())
        op = Op(index, name, where, module[0], module[1], module[2], inputs, _plain(kwargs), None,
                called_from=outer if module[0] is None else None)
        if (name in NUMBER_OF and not isinstance(out, torch.Tensor) or name == "numpy") and args \
                and isinstance(args[0], torch.Tensor):
            op.read_off = self._facts(args[0]).from_params
        if name == "numpy" and args and isinstance(args[0], torch.Tensor):
            self._arrays[id(out)] = self._facts(args[0])
            self._kept.append(out)
        tensor = out if isinstance(out, torch.Tensor) else next(
            (t for t in out if isinstance(t, torch.Tensor)), None) if isinstance(out, (tuple, list)) else None
        if tensor is not None:
            op.output = self._made_here(tensor, index, [f for f in inputs if isinstance(f, Facts)])
        if name in DETAILED:
            first = next((a for a in args if isinstance(a, torch.Tensor)), None)
            for facts, value in ((op.output, tensor), (self._made.get(id(first)), first)):
                if facts is not None and value is not None:
                    _detail(facts, value, self.trace.batch)
        self.trace.ops.append(op)

    def _made_here(self, tensor: torch.Tensor, index: int, inputs: list[Facts]) -> Facts:
        with torch._C.DisableTorchFunction():
            from_params = any(f.from_params for f in inputs)
            cut = None
            if from_params and not tensor.requires_grad:  # cut where an input was, else here (detach, no_grad)
                cut = next((f.cut_at for f in inputs if f.cut_at is not None), index)
            facts = Facts(tuple(tensor.shape), tensor.is_floating_point(), tensor.requires_grad, from_params, index,
                          cut, _finite(tensor))
            if tensor.requires_grad and tensor.grad_fn is not None:
                op = index
                tensor.register_hook(lambda g, op=op: self._reached(op, g))
        self._made[id(tensor)] = facts
        self._kept.append(tensor)
        return facts

    def _reached(self, index: int, grad: torch.Tensor) -> None:
        self.trace.ops[index].got_gradient = True

    def _facts(self, t: torch.Tensor) -> Facts:
        known = self._made.get(id(t))
        if known is not None:
            return known
        with torch._C.DisableTorchFunction():
            param = id(t) in self._params and t.requires_grad  # a frozen parameter is a constant
            facts = Facts(tuple(t.shape), t.is_floating_point(), t.requires_grad, param, None, None,
                          _finite(t))
        self._made[id(t)] = facts
        self._kept.append(t)
        return facts

    def _read(self, value: Any) -> list[Facts | float | int | None]:
        """An argument as `Op.inputs` holds it: a tensor's facts, each tensor of a list (torch.cat's),
        a Python number, or None."""
        if isinstance(value, torch.Tensor):
            return [self._facts(value)]
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
            return [self._facts(v) for v in value]
        return [value if isinstance(value, (int, float)) and not isinstance(value, bool) else None]


def _finite(t: torch.Tensor) -> bool:
    with torch._C.DisableTorchFunction():
        return not t.is_floating_point() or t.numel() == 0 or bool(torch.isfinite(t.detach()).all())


def _detail(facts: Facts, t: torch.Tensor, batch: int) -> None:
    """`facts.largest` and `facts.smallest`, and `facts.varies` for a batch-leading tensor: whether its
    samples differ."""
    if not t.is_floating_point() or t.numel() == 0 or not facts.finite:
        return
    with torch._C.DisableTorchFunction():
        data = t.detach()
        facts.largest, facts.smallest = float(data.max()), float(data.min())
        if batch >= 2 and data.dim() and data.shape[0] == batch:
            flat = data.reshape(batch, -1)
            facts.varies = bool((flat != flat[:1]).any())


def _plain(kwargs: dict) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if isinstance(v, (int, float, str, bool, type(None)))}


def traced(model: nn.Module, batch: int, step: Any) -> Trace:
    """Run `step()` (a forward, the objective and a backward) under the trace; its trace."""
    mode = CodeTrace(model, batch)
    try:
        with mode:
            step()
    finally:
        mode.close()
    return mode.trace
