"""The project's working tree copied into a scratch directory for a throw-away git repository.

Both the pipeline benchmark and the end-to-end DVC tests reproduce the pipeline in such a
copy, never in the checkout itself (its ``.dvc/cache``, reports and lock file stay as they
are). Tracked and untracked-but-not-ignored files are copied; pipeline outputs are not.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

OUTPUTS = ("reports/", "metrics/", "plots/", "dvc.lock", "dvc_plots/")


def copy_working_tree(root: Path, target: Path) -> None:
    """Copy ``root``'s working tree (as git sees it, outputs excluded) into ``target``."""
    names = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=root,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, names):
        source = root / name
        if source.is_file() and not name.startswith(OUTPUTS):
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
