"""torchinfo's own test suite run against this package (``peer_suites.py`` runs it).

The tests and their expected-output files come from torchinfo's sdist, downloaded at run time
(1.7.0: the last sdist that ships ``tests/``; 1.7.1 and 1.8.0 ship none). Each test function
runs as written, with its ``summary`` wrapped: the wrapper hooks the model to catch the inputs
torchinfo builds, calls torchinfo itself (so the test goes on as written), then calls this
package's ``summary`` on the same model with those inputs. The figures the test expects (its
``.out`` tables and its literal asserts) are compared with the package's.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import os
import sys
import traceback
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from peer_outputs import (
    Case,
    Check,
    compare_figure,
    literal_asserts,
    parse_block,
    parse_rows,
    split_blocks,
)
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

TESTS_VERSION = "1.7.0"
TEST_MODULES = (
    "torchinfo_test",
    "exceptions_test",
    "torchinfo_xl_test",
    "half_precision_test",
    "gpu_test",
)
_ASSERTED = {"total_params": "total_params", "trainable_params": "trainable_params"}


@dataclass
class Call:
    """One ``summary`` call a peer test made: the model, the inputs torchinfo built."""

    model: Any
    kwargs: dict[str, Any]
    inputs: tuple[tuple[Any, ...], dict[str, Any]] | None = None
    stdout: str = ""
    peer_error: BaseException | None = None
    package: Any = None  # AnalysisReport, or the exception the package raised
    reference_macs: list[int] | None = None
    layer_reference: dict[int, list[int]] = field(default_factory=dict)  # by id(module)
    unique_parameters: dict[str, int] = field(default_factory=dict)
    truth: dict[str, list[Any]] = field(default_factory=dict)  # torch_truth
    translated: dict[str, Any] = field(default_factory=dict)  # see _translate
    generated: Any = None  # the package's report from its own generated inputs, or an error
    plain_error: BaseException | None = None  # a plain forward's error, when the package raised


class _Missing(types.ModuleType):
    """Stands for an optional dependency that is not installed: importing it works, using
    it raises, so only the tests that need it fail (and are listed as not runnable)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)  # module introspection (inspect, hasattr) goes on
        raise ModuleNotFoundError(f"{self.__name__} is not installed (needed: {name})")


_NORMS = (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm)
# MACs per output element of a linear interpolation, the package's table
# (analysis/module_formulas/upsample.py, used for functional interpolation too)
_INTERPOLATION_MACS = {"linear1d": 1, "bilinear2d": 3, "trilinear3d": 7, "bicubic2d": 20}


class _Interpolations(TorchDispatchMode):
    """Counts the output elements of interpolation kernels, by MACs per output element."""

    def __init__(self) -> None:
        super().__init__()
        self.macs = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__.removeprefix("upsample_").removeprefix("_upsample_")
        if name.removesuffix("_aa") in _INTERPOLATION_MACS and isinstance(out, torch.Tensor):
            self.macs += _INTERPOLATION_MACS[name.removesuffix("_aa")] * out.numel()
        return out


def reference_macs(
    model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[int], dict[int, list[int]]]:
    """[torch's FlopCounterMode products / 2 (eval, no_grad, oneDNN and SDPA fast paths off),
    norm-affine output elements, interpolation MACs], and per module path [products / 2,
    norm-affine elements inside it]. The affine and interpolation counts are MACs by the
    package's documented convention (a norm's affine 1 MAC per element, interpolation per
    output element) where torch counts no product."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    flags = [(m, m.training) for m in model.modules()]
    affine: dict[int, int] = {}

    def count(module: nn.Module, _: Any, output: Any) -> None:
        if module.weight is not None and module.bias is not None:
            affine[id(module)] = affine.get(id(module), 0) + output.numel()

    handles = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, _NORMS)]
    try:
        model.eval()
        with (
            torch.backends.mkldnn.flags(enabled=False),
            sdpa_kernel(SDPBackend.MATH),
            torch.no_grad(),
            FlopCounterMode(display=False) as counter,
            _Interpolations() as interpolations,
        ):
            model(*args, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
        for module, flag in flags:
            module.training = flag
    total = [int(counter.get_total_flops()) // 2, sum(affine.values()), interpolations.macs]
    return total, _by_module(model, counter.get_flop_counts(), affine)


def _by_module(
    model: nn.Module, counts: dict[str, dict[Any, int]], affine: dict[int, int]
) -> dict[int, list[int]]:
    """Per module (by identity: a shared module has one entry whatever its names): torch's
    products / 2 inside it over all its calls, and the norm-affine elements inside it."""
    root = type(model).__name__
    products: dict[int, int] = {}
    for fqn, ops in counts.items():
        if fqn == root or fqn.startswith(root + "."):
            with contextlib.suppress(AttributeError, RuntimeError):  # a ScriptModule: none
                module = model.get_submodule(fqn.removeprefix(root).removeprefix("."))
                products[id(module)] = max(products.get(id(module), 0), sum(ops.values()) // 2)
    return {
        id(m): [products.get(id(m), 0), sum(affine.get(id(c), 0) for c in m.modules())]
        for m in model.modules()
    }


def _tensors(value: Any, depth: int = 0) -> set[tuple[int, ...]]:
    """Shapes of every tensor in an output: sequences, mappings, objects' attributes."""
    if isinstance(value, torch.Tensor):
        return {tuple(value.shape)}
    if depth > 4:
        return set()
    items: Any = ()
    if isinstance(value, list | tuple):
        items = value
    elif isinstance(value, dict):
        items = value.values()
    elif hasattr(value, "__dict__"):
        items = vars(value).values()
    return set().union(*(_tensors(v, depth + 1) for v in items)) if items else set()


def torch_truth(model: nn.Module, inputs: tuple[Any, Any] | None) -> dict[str, list[Any]]:
    """What torch itself says per module type: output tensor shapes of each call (forward
    hooks) and the parameter counts of each module (its own, and its subtree's)."""
    truth: dict[str, list[Any]] = {}
    for module in model.modules():
        own = sum(p.numel() for p in module.parameters(recurse=False))
        tree = sum(p.numel() for p in module.parameters())
        truth.setdefault(type(module).__name__, []).append(("params", {own, tree}))
    if inputs is None:
        return truth

    def hook(module: nn.Module, _: Any, output: Any) -> None:
        truth.setdefault(type(module).__name__, []).append(("shapes", _tensors(output)))

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    flags = [(m, m.training) for m in model.modules()]
    try:
        model.eval()
        with torch.no_grad():
            model(*inputs[0], **inputs[1])
    finally:
        for handle in handles:
            handle.remove()
        for module, flag in flags:
            module.training = flag
    return truth


def _unique_parameters(model: nn.Module) -> dict[str, int]:
    """Counted straight from torch (``parameters()`` yields a shared tensor once)."""
    params = [p for p in model.parameters() if not nn.parameter.is_lazy(p)]
    trainable = sum(p.numel() for p in params if p.requires_grad)
    total = sum(p.numel() for p in params)
    return {"total_params": total, "trainable_params": trainable, "frozen": total - trainable}


def _run_package(call: Call) -> None:
    from torchscan_stages import summary as package_summary

    sink = io.StringIO()
    if call.inputs is None and call.peer_error is not None:
        call.translated = _translate(call.kwargs)
    try:
        if call.translated:
            call.package = _run_translated(call, package_summary, sink)
        elif call.inputs is None:
            call.package = package_summary(call.model, file=sink)
        else:
            args, kwargs = call.inputs
            call.package = package_summary(call.model, args=args, kwargs=kwargs, file=sink)
    except Exception as error:  # the benchmark classifies every failure
        call.package = error
        call.plain_error = _plain_error(call)
    if not isinstance(call.package, Exception) and not call.translated:
        call.generated = _run_generated(call)
    if isinstance(call.model, nn.Module):
        call.unique_parameters = _unique_parameters(call.model)
        scripted = isinstance(call.model, torch.jit.ScriptModule)  # no hooks: no truth
        if not isinstance(call.package, Exception) and not scripted:
            with contextlib.suppress(Exception):  # the package's result is judged anyway
                call.truth = torch_truth(call.model, call.inputs)
        if call.inputs is not None and not isinstance(call.package, Exception):
            with contextlib.suppress(Exception):
                call.reference_macs, call.layer_reference = reference_macs(call.model, *call.inputs)


_TORCH_DTYPES = {torch.FloatTensor: torch.float32, torch.LongTensor: torch.long}


def _run_generated(call: Call) -> Any:
    """The same call through the package's generated inputs, where torchinfo's ``input_size``
    has a batch of 1 (the package adds that batch itself): its figures must be the same."""
    from torchscan_stages import crawl_module

    kwargs = call.kwargs
    given = kwargs.get("args", ())
    size = kwargs.get("input_size", given[0] if given else None)
    if size is None or "input_data" in kwargs or "batch_dim" in kwargs or len(given) > 1:
        return None
    shapes = [size] if size and isinstance(size[0], int) else list(size)
    if not shapes or any(not s or s[0] != 1 for s in shapes):
        return None
    extra = {k: v for k, v in kwargs.items() if k not in _TORCHINFO_OPTIONS}
    dtypes = [_TORCH_DTYPES.get(d, d) for d in kwargs.get("dtypes") or []]
    try:
        return crawl_module(
            call.model,
            [tuple(s[1:]) for s in shapes] if len(shapes) > 1 else tuple(shapes[0][1:]),
            kwargs=extra or None,
            dtype=(dtypes if len(dtypes) > 1 else dtypes[0]) if dtypes else None,
        )
    except Exception as error:  # judged with the rest
        return error


_TORCHINFO_OPTIONS = {
    "args",
    "input_size",
    "input_data",
    "batch_dim",
    "cache_forward_pass",
    "col_names",
    "col_width",
    "depth",
    "device",
    "dtypes",
    "mode",
    "row_settings",
    "verbose",
}


def _plain_error(call: Call) -> BaseException | None:
    """What a plain eval ``no_grad`` forward of the same inputs raises (None: it runs)."""
    if call.inputs is None or not isinstance(call.model, nn.Module):
        return None
    flags = [(m, m.training) for m in call.model.modules()]
    try:
        call.model.eval()
        with torch.no_grad():
            call.model(*call.inputs[0], **call.inputs[1])
    except Exception as error:  # the model's own failure, kept for comparison
        return error
    finally:
        for module, flag in flags:
            module.training = flag
    return None


def _translate(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A call torchinfo refused before any forward, in the package's terms: ``input_size``
    as ``input_shape``, ``input_data`` as ``args``/``kwargs`` (its display options have no
    package argument, so a call with only those translates to nothing)."""
    given = kwargs.get("args", ())
    size = kwargs.get("input_size", given[0] if given else None)
    data = kwargs.get("input_data", given[1] if len(given) > 1 else None)
    out: dict[str, Any] = {}
    if size is not None:
        out["input_shape"] = size
    if isinstance(data, dict):
        out["kwargs"] = data
    elif data is not None:
        out["args"] = tuple(data) if isinstance(data, list | tuple) else (data,)
    return out


def _run_translated(call: Call, package_summary: Callable[..., Any], sink: io.StringIO) -> Any:
    """Run the translated call, catching the inputs the package generates (for torch's
    reference figures beside it)."""

    def catch(_: nn.Module, a: tuple[Any, ...], k: dict[str, Any]) -> None:
        if call.inputs is None:
            call.inputs = (a, dict(k))

    handle = call.model.register_forward_pre_hook(catch, with_kwargs=True)
    try:
        return package_summary(call.model, **call.translated, file=sink)
    finally:
        handle.remove()


def _recorder(real: Callable[..., Any], calls: list[Call]) -> Callable[..., Any]:
    def summary(model: Any, *args: Any, **kwargs: Any) -> Any:
        call = Call(model=model, kwargs={"args": args, **kwargs})
        calls.append(call)
        handle = None
        if isinstance(model, nn.Module) and not isinstance(model, torch.jit.ScriptModule):

            def catch(_: nn.Module, a: tuple[Any, ...], k: dict[str, Any]) -> None:
                if call.inputs is None:
                    call.inputs = (a, dict(k))

            handle = model.register_forward_pre_hook(catch, with_kwargs=True)
        sink = io.StringIO()
        try:
            with contextlib.redirect_stdout(sink):
                return real(model, *args, **kwargs)
        except BaseException as error:
            call.peer_error = error
            raise
        finally:
            call.stdout = sink.getvalue()
            if handle is not None:
                handle.remove()
            if call.inputs is None and isinstance(model, torch.jit.ScriptModule):
                call.inputs = _inputs_from_data(kwargs)
            if call.inputs is None and kwargs.get("cache_forward_pass"):
                call.inputs = _cached_inputs(calls[:-1], model)
            _run_package(call)

    return summary


def _cached_inputs(earlier: list[Call], model: Any) -> tuple[Any, Any] | None:
    """torchinfo's ``cache_forward_pass`` reuses an earlier call's forward (same model class,
    same inputs in the peer's tests), so no hook sees one: take that call's inputs."""
    for call in reversed(earlier):
        if type(call.model) is type(model) and call.inputs is not None:
            return call.inputs
    return None


def _inputs_from_data(kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """torchinfo's rule for ``input_data`` where no hook can see the call (a scripted model)."""
    data = kwargs.get("input_data")
    if isinstance(data, torch.Tensor):
        return (data,), {}
    if isinstance(data, list | tuple):
        return tuple(data), {}
    return None


@contextlib.contextmanager
def _suite_on_path(root: Path) -> Iterator[None]:
    """Import the peer's ``tests`` package from the unpacked sdist, run in its folder (its
    tests open ``tests/test_output/...`` relative to it), and leave nothing behind."""
    saved_path, saved_cwd = list(sys.path), os.getcwd()
    saved_modules = {k: v for k, v in sys.modules.items() if k == "tests" or k.startswith("tests.")}
    for name in saved_modules:
        del sys.modules[name]
    missing = [n for n in ("torchvision",) if importlib.util.find_spec(n) is None]
    for name in missing:
        sys.modules[name] = _Missing(name)
    sys.path.insert(0, str(root))
    os.chdir(root)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        sys.path[:] = saved_path
        for name in [k for k in sys.modules if k == "tests" or k.startswith("tests.")]:
            del sys.modules[name]
        sys.modules.update(saved_modules)
        for name in missing:
            sys.modules.pop(name, None)


def _skip_reason(function: Any, owner: Any) -> str:
    marks = [*getattr(owner, "pytestmark", []), *getattr(function, "pytestmark", [])]
    for mark in marks:
        if mark.name == "skipif" and mark.args and mark.args[0]:
            return "its own skip mark: " + str(mark.kwargs.get("reason", ""))
        if mark.name == "skip":
            return "its own skip mark: " + str(mark.kwargs.get("reason", ""))
    return ""


def _test_functions(module: Any) -> Iterator[tuple[str, Callable[[], Any], str]]:
    for name, value in inspect.getmembers(module):
        if name.startswith("test_") and inspect.isfunction(value):
            yield name, value, _skip_reason(value, None)
        elif name.startswith("Test") and inspect.isclass(value):
            for method_name, method in inspect.getmembers(value, inspect.isfunction):
                if method_name.startswith("test_"):
                    bound = getattr(value(), method_name)
                    yield method_name, bound, _skip_reason(method, value)


def run_suite(root: Path) -> list[Case]:
    """Every test of every module of the peer's suite, each ``summary`` call one case."""
    cases: list[Case] = []
    with _suite_on_path(root):
        import torchinfo

        for module_name in TEST_MODULES:
            source = (root / "tests" / f"{module_name}.py").read_text(encoding="utf-8")
            asserts = literal_asserts(source)
            try:
                module = importlib.import_module(f"tests.{module_name}")
            except Exception as error:
                cases.append(_not_runnable(module_name, f"import failed: {error!r}"))
                continue
            for name, function, skip in _test_functions(module):
                test = f"{module_name}::{name}"
                if skip:
                    cases.append(_not_runnable(test, skip))
                    continue
                calls: list[Call] = []
                setattr(module, "summary", _recorder(torchinfo.summary, calls))  # noqa: B010
                setattr(module, "verify_output_str", lambda *_: None)  # noqa: B010 - its text diff
                peer_failure = _run_test(function)
                blocks = _expected_blocks(root, name)
                cases.extend(_judge_test(test, calls, blocks, asserts.get(name, []), peer_failure))
    return cases


def _run_test(function: Callable[[], Any]) -> str:
    try:
        function()
    except BaseException as error:  # a peer assert that failed is recorded
        frame = traceback.extract_tb(error.__traceback__)[-1]
        return f"{type(error).__name__} at line {frame.lineno}: {str(error)[:120]}"
    return ""


def _expected_blocks(root: Path, test_name: str) -> list[str]:
    path = root / "tests" / "test_output" / f"{test_name.removeprefix('test_')}.out"
    return split_blocks(path.read_text(encoding="utf-8")) if path.exists() else []


def _not_runnable(test: str, reason: str) -> Case:
    return Case("torchinfo", test, 0, error=reason, verdict="not_runnable")


def _judge_test(
    test: str,
    calls: list[Call],
    blocks: list[str],
    asserts: list[tuple[int, str, int]],
    peer_failure: str,
) -> list[Case]:
    from peer_judge import judge_call

    printing = [i for i, c in enumerate(calls) if c.stdout.strip()]
    aligned = len(printing) == len(blocks)
    expected: dict[int, dict[str, Any]] = {}
    if aligned:
        for index, block in zip(printing, blocks, strict=True):
            expected[index] = {**parse_block(block), "rows": parse_rows(block)}
    for index, attribute, value in asserts:
        if attribute in _ASSERTED or attribute == "total_mult_adds":
            expected.setdefault(index, {})[f"assert_{attribute}"] = value
    cases = []
    for index, call in enumerate(calls):
        case = judge_call(test, index, call, expected.get(index, {}))
        if not aligned and blocks:
            case.checks.append(
                Check("output_file", len(blocks), len(printing), "not_runnable", "blocks != calls")
            )
        if peer_failure and index == len(calls) - 1:
            case.error = (case.error + "; " if case.error else "") + f"peer: {peer_failure}"
        cases.append(case.finish())
    if not calls:
        reason = f"no summary call ran ({peer_failure})" if peer_failure else "no summary call"
        cases.append(Case("torchinfo", test, 0, error=reason, verdict="not_runnable"))
    return cases


__all__ = ["Call", "Case", "Check", "compare_figure", "run_suite"]
