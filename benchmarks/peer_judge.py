"""Judging one torchinfo test call: the package's report against the figures the test expects.

A figure that differs is re-judged once against what torch itself says about the same model
and inputs (``parameters()`` for counts, FlopCounterMode's products for MACs): when the
package equals torch and the peer does not, the difference is the peer's convention and the
note carries the arithmetic; otherwise the check stays ``wrong``.
"""

from __future__ import annotations

import traceback
from typing import Any

import torch
from peer_outputs import Case, Check, Row, compare_figure

_PARAMS = (
    ("total_params", "parameters", "total_params"),
    ("assert_total_params", "parameters", "total_params"),
    ("trainable_params", "trainable_parameters", "trainable_params"),
    ("assert_trainable_params", "trainable_parameters", "trainable_params"),
    ("non_trainable_params", "frozen_parameters", "frozen"),
)
_MACS = ("mult_adds", "assert_total_mult_adds", "mult_adds_rounded")


def one_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:160] if text else ''}"


def classify_error(
    error: BaseException, peer_raised: bool, plain: BaseException | None = None
) -> tuple[str, str]:
    """refused: a one-line ValueError/TypeError from the package, or the model's own error
    passed on unchanged (the contract: the same type and message as a plain forward of the
    same inputs raises) where the peer failed too; anything else crashed."""
    frames = traceback.extract_tb(error.__traceback__)
    innermost = frames[-1].filename if frames else ""
    if any("/tests/fixtures/" in f.filename for f in frames):
        same = plain is not None and (type(plain), str(plain)) == (type(error), str(error))
        if peer_raised and same:
            return "refused", "the model's own error, as a plain forward raises it"
        return "crashed", "the model failed under the package only"
    ours = "torchscan_stages" in innermost
    single = "\n" not in str(error).strip()
    if ours and single and isinstance(error, ValueError | TypeError | NotImplementedError):
        note = "peer refused too" if peer_raised else "peer accepted this input"
        return "refused", note
    return "crashed", f"raised at {innermost}:{frames[-1].lineno if frames else '?'}"


def _param_checks(case: Case, call: Any, expected: dict[str, Any]) -> None:
    totals = call.package.totals
    for key, field, torch_key in _PARAMS:
        if key not in expected:
            continue
        metric = getattr(totals, field)
        check = compare_figure(key, expected[key], metric.value, metric.status)
        if check.verdict == "partial":
            check.note += f"; {_diagnostics(call.package)}"
        torch_count = call.unique_parameters.get(torch_key)
        if check.verdict == "wrong" and metric.value == torch_count:
            check.verdict = "right"
            check.note = (
                f"torch's parameters() hold {torch_count}; the peer shows {expected[key]:.0f} "
                f"(difference {expected[key] - torch_count:+.0f}: its convention)"
            )
        case.checks.append(check)


def _mac_checks(case: Case, call: Any, expected: dict[str, Any]) -> None:
    if call.inputs is None:
        return  # no forward ran: the peer prints 0 mult-adds, the package says unavailable
    macs = call.package.totals.macs
    for key in _MACS:
        if key not in expected:
            continue
        if key == "mult_adds_rounded" and "mult_adds" in case_keys(case):
            continue  # the exact column already compared
        tolerance = expected.get("mult_adds_unit", 1.0) * 0.005 if key.endswith("rounded") else 0
        check = compare_figure(key, expected[key], macs.value, macs.status, tolerance)
        inexact = check.verdict == "right" and check.got != check.expected  # within rounding
        if (check.verdict == "wrong" or inexact) and call.reference_macs is not None:
            check.verdict = "wrong"  # right again only if torch's figures give it exactly
            _rejudge_macs(check, call.reference_macs)
            if inexact and check.verdict == "right":
                check.note = check.note.split(";")[0] + "; equal to the peer's printed figure"
                check.rounded = True  # within its rounding: no difference to report
        elif check.verdict == "partial":
            check.note += f"; {_diagnostics(call.package)}"
        case.checks.append(check)


def _rejudge_macs(check: Check, reference: list[int]) -> None:
    """Right when the package equals torch's products plus its own documented element-wise
    MACs (norm affine, interpolation); the note writes the arithmetic, and what is left is the
    peer's convention."""
    products, affine, interpolation = reference
    if check.got == products:
        why = f"= torch FlopCounterMode products / 2 = {products}"
    elif check.got == products + affine + interpolation:
        why = (
            f"= torch products / 2 {products} + norm affine {affine} + interpolation "
            f"{interpolation} (the package's element-wise MACs)"
        )
    else:
        check.note = f"torch products / 2 {products}, affine {affine}, interp {interpolation}"
        return
    check.verdict = "right"
    gap = f"{(check.expected or 0) - (check.got or 0):+.0f}"
    check.note = f"{why}; peer - package = {gap} (the peer's convention or blind spot)"


def case_keys(case: Case) -> set[str]:
    return {c.name for c in case.checks}


def _diagnostics(report: Any) -> str:
    codes = sorted({d.code for d in report.diagnostics if d.severity != "info"})
    return "diagnostics: " + (", ".join(codes) or "none")


def _independent_checks(case: Case, call: Any, why: str) -> None:
    """No figure from the peer for this call: check what torch itself says."""
    totals = call.package.totals
    if call.unique_parameters:
        count = call.unique_parameters["total_params"]
        check = compare_figure("torch_params", count, totals.parameters.value, "complete")
        check.note = why
        case.checks.append(check)
    if call.reference_macs is not None:
        macs = totals.macs
        check = compare_figure("torch_macs", sum(call.reference_macs), macs.value, macs.status)
        check.note = why if check.verdict != "partial" else f"{why}; {_diagnostics(call.package)}"
        case.checks.append(check)


def _tensor_shapes(meta: Any) -> set[tuple[int, ...]]:
    """Every tensor shape in a recorded value (tuples, dicts, objects by attribute)."""
    if meta is None:
        return set()
    found = {tuple(meta.shape)} if meta.kind == "tensor" and meta.shape is not None else set()
    for item in meta.items or []:
        found |= _tensor_shapes(item)
    return found


def _subtree_params(report: Any, path: str) -> int:
    first = [r for r in report.layers if r.call_index == 0]
    inside = [r for r in first if not path or r.path == path or r.path.startswith(path + ".")]
    return sum(r.params.parameters - r.params.shared_parameters for r in inside)


def _row_checks(case: Case, call: Any, rows: list[Row]) -> None:
    """Each table row the peer expects (type, output shapes, Param #) must be some record of
    the same type in the package's report. A row no record matches is the peer's own
    convention when torch itself (forward hooks, ``parameters()``) has no such module either,
    partial where the report says it could not record inside a TorchScript module, and wrong
    otherwise."""
    report = call.package
    by_type: dict[str, list[Any]] = {}
    for record in report.layers:
        by_type.setdefault(record.type, []).append(record)
    scripted = any(d.code == "torchscript_module" for d in report.diagnostics)
    for name in ("row_shapes", "row_params"):
        total, missing, peer_only = 0, list[str](), list[str]()
        for row in rows:
            wanted = _row_wants(row, name)
            if wanted is None:
                continue
            total += 1
            if _package_has(report, by_type.get(row.type, []), name, wanted):
                continue
            label = f"{row.type}={wanted}"
            truth = [v for kind, v in call.truth.get(row.type, []) if kind == name[4:]]
            in_torch = any(_covers(v, wanted, name) for v in truth)
            (missing if in_torch or not call.truth else peer_only).append(label)
        if not total:
            continue
        verdict = "right" if not missing else ("partial" if scripted else "wrong")
        notes = []
        if missing:
            notes.append("no record: " + ", ".join(missing[:4]))
        if peer_only:
            notes.append("torch has none either (peer's figure): " + ", ".join(peer_only[:4]))
        matched = total - len(missing) - len(peer_only)
        case.checks.append(Check(name, total, matched, verdict, "; ".join(notes)))


def _layer_checks(case: Case, call: Any) -> None:
    """Every called module's MACs (its records summed over calls) against torch's products
    inside it, plus the norm-affine MACs the package counts there: an independent check of the
    per-layer figures the peer's table prints in its own convention."""
    report, reference = call.package, call.layer_reference
    scripted = isinstance(call.model, torch.jit.ScriptModule)  # its records: the root only
    if not reference or call.reference_macs[2] or scripted:  # interpolation: not per module
        return
    modules: dict[int, list[Any]] = {}
    for record in report.layers:
        if record.path:
            module = call.model.get_submodule(record.path)
            modules.setdefault(id(module), []).append(record)
    total, wrong = 0, []
    for key, records in modules.items():
        macs = [r.metrics.macs for r in records]
        if len({r.depth for r in records}) > 1 or any(m.status != "complete" for m in macs):
            continue  # re-entered (nested calls) or not complete: the totals judge those
        products, affine = reference[key]
        got = sum(m.value for m in macs)
        total += 1
        if got not in (products, products + affine):
            wrong.append(f"{records[0].path}={got} (torch {products} + affine {affine})")
    if total:
        note = "; ".join(wrong[:3])
        verdict = "wrong" if wrong else "right"
        case.checks.append(Check("layer_macs", total, total - len(wrong), verdict, note))


def _generated_check(case: Case, call: Any) -> None:
    """The package's generated inputs (``input_shape``: torchinfo's ``input_size`` less its
    batch of 1) must give the figures of the call with torchinfo's own tensors."""
    generated, report = call.generated, call.package
    if isinstance(generated, BaseException):
        verdict, _ = classify_error(generated, peer_raised=False)
        case.checks.append(Check("generated_input", None, None, verdict, one_line(generated)))
        return
    for name in ("parameters", "macs"):
        ours, theirs = getattr(generated.totals, name), getattr(report.totals, name)
        check = compare_figure(f"generated_{name}", theirs.value or 0, ours.value, ours.status)
        if theirs.status != "complete":
            check.verdict = ours.status if ours.status != "complete" else "partial"
        case.checks.append(check)


def _row_wants(row: Row, name: str) -> Any:
    if name == "row_shapes":
        return set(row.shapes) or None
    digits = row.params.replace(",", "")
    return int(digits) if digits.isdigit() and row.shapes else None  # shown uncalled: no call


def _covers(value: Any, wanted: Any, name: str) -> bool:
    return wanted <= value if name == "row_shapes" else wanted in value


def _package_has(report: Any, records: list[Any], name: str, wanted: Any) -> bool:
    if name == "row_shapes":
        return any(wanted <= _tensor_shapes(r.output) for r in records)
    own = {r.params.parameters for r in records}
    return wanted in own | {_subtree_params(report, r.path) for r in records}


_TAGS = {  # the peer tests whose models the issue names: reuse, packing, structured outputs
    "test_recursive": ["recursive"],
    "test_model_with_args": ["recursive"],
    "test_pack_padded": ["packed", "structured_output"],  # the LSTM returns a PackedSequence
    "test_return_dict": ["structured_output"],  # a dict of tensors
    "test_lstm": ["structured_output"],  # (tensor, (h, c))
    "test_lstm_custom_batch_size": ["structured_output"],
}


def _given(translated: dict[str, Any]) -> str:
    """The translated arguments, tensors shown by their shape."""

    def short(value: Any) -> str:
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            return f"tensor{list(value.shape)}"
        if isinstance(value, tuple | list):
            return "(" + ", ".join(short(v) for v in value) + ")"
        return repr(value)[:60]

    return ", ".join(f"{k}={short(v)}" for k, v in translated.items())


def judge_call(test: str, index: int, call: Any, expected: dict[str, Any]) -> Case:
    case = Case("torchinfo", test, index)
    case.tags = [t for name, tags in _TAGS.items() if test.endswith("::" + name) for t in tags]
    if call.inputs is None and call.peer_error is None:
        case.tags.append("no_input")
    if isinstance(call.package, BaseException):
        case.verdict, note = classify_error(
            call.package, call.peer_error is not None, call.plain_error
        )
        given = _given(call.translated)
        case.error = f"{one_line(call.package)} ({note}{'; given ' + given if given else ''})"
        return case
    if call.peer_error is not None and call.inputs is None and not call.translated:
        case.verdict = "not_runnable"
        case.error = f"torchinfo's own display-option check ({one_line(call.peer_error)})"
        return case
    if call.peer_error is not None:
        given = _given(call.translated)
        why = f"peer refused ({one_line(call.peer_error)}); package accepted {given}".strip()
        _independent_checks(case, call, why)
        if not case.checks:
            case.verdict, case.error = "not_runnable", why
        return case
    if not expected:
        _independent_checks(case, call, "the test prints nothing for this call")
        return case
    _param_checks(case, call, expected)
    _mac_checks(case, call, expected)
    if expected.get("rows"):
        _row_checks(case, call, expected["rows"])
    if call.reference_macs is not None:
        _layer_checks(case, call)
    if call.generated is not None:
        _generated_check(case, call)
    return case
