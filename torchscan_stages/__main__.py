"""``python -m torchscan_stages COMMAND ...``: a thin dispatcher over ``commands/``.

Each command is imported only when asked for, so ``--help`` stays fast.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "summary": "print the cost table of an embedded model and write its AnalysisReport",
    "render": "render saved reports to one offline HTML page",
    "compare": "compare two saved reports; exit non-zero when an owner threshold is violated",
    "history": "committed metrics over git history: steps, a JSON report, a page, bisect",
}


def _usage() -> str:
    lines = ["usage: python -m torchscan_stages COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<9} {text}" for name, text in COMMANDS.items()]
    lines += [
        "",
        "the cached pipeline (Hydra + DVC; README 'The pipeline', docs/pipeline.md):",
        "  dvc repro                                    every stage; a rerun measures nothing",
        "  python -m torchscan_stages.stages.NAME --help  one stage: what it reads and writes",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:  # a command is required: say so and fail, as git and pip do
        print(_usage(), file=sys.stderr)
        return 2
    if args[0] in {"-h", "--help"}:
        print(_usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    from ._signals import Terminated, ending_signals_raise

    try:  # Ctrl-C or SIGTERM: one line and the shell's code, no traceback (130, 143)
        with ending_signals_raise(redeliver=False):
            module = importlib.import_module(f"torchscan_stages.commands.{name}")
            result: int = module.main(rest)
    except KeyboardInterrupt:
        print(f"{name}: interrupted by SIGINT (Ctrl-C); nothing was written", file=sys.stderr)
        return 130
    except Terminated as ended:
        print(f"{name}: {ended}; nothing was written", file=sys.stderr)
        return ended.exit_code
    return result


if __name__ == "__main__":
    raise SystemExit(main())
