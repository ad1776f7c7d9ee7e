"""What a Python process pays to import torch with and without bytecode: the reason every
install compiles it (.ci/install --compile-bytecode) and make keeps a bytecode prefix.

"Without" is what the CI host did before: no .pyc to read (an empty PYTHONPYCACHEPREFIX)
and none written (PYTHONDONTWRITEBYTECODE=1), so each process compiles what it imports.
Each side runs ``--repeats`` fresh children, interleaved; the figure is the children's CPU
seconds (user + system), median of the repeats.

    .venv/bin/python benchmarks/bench_import.py [--repeats 3] [--module torch] [--doc PAGE]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from doc_sections import write_section


def child_cpu_s(module: str, env: dict[str, str]) -> float:
    """CPU seconds of one fresh interpreter that imports ``module`` and exits."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", f"import {module}"], env=env, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--module", default="torch")
    parser.add_argument("--doc", type=Path, default=None)
    args = parser.parse_args()
    with_bytecode = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONPYCACHE")}
    with_bytecode.pop("PYTHONDONTWRITEBYTECODE", None)
    sides: dict[str, list[float]] = {"with bytecode": [], "without bytecode": []}
    with tempfile.TemporaryDirectory(prefix="no_pyc_") as empty:
        without = {**with_bytecode, "PYTHONPYCACHEPREFIX": empty, "PYTHONDONTWRITEBYTECODE": "1"}
        child_cpu_s(args.module, with_bytecode)  # warm the page cache for both sides
        for _ in range(args.repeats):
            sides["with bytecode"].append(child_cpu_s(args.module, with_bytecode))
            sides["without bytecode"].append(child_cpu_s(args.module, without))
    med = {name: statistics.median(values) for name, values in sides.items()}
    text = (
        "## Importing torch with and without bytecode\n\n"
        f"Run: {time.strftime('%Y-%m-%dT%H:%M:%S+00:00', time.gmtime())} by "
        f"`python benchmarks/bench_import.py --repeats {args.repeats}`: CPU seconds of a "
        f"fresh interpreter running `import {args.module}`, median of {args.repeats}, "
        "interleaved: **"
        f"{med['with bytecode']:.2f} s with bytecode, {med['without bytecode']:.2f} s "
        f"without** ({med['without bytecode'] / med['with bytecode']:.2f}x; every value: "
        + ", ".join(f"{n} {[round(v, 2) for v in vals]}" for n, vals in sides.items())
        + ").\n\n"
    )
    print(text)
    if args.doc is not None:
        write_section(args.doc, "bench_import", text)


if __name__ == "__main__":
    main()
