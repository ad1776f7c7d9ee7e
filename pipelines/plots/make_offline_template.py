"""Build .dvc/plots/offline.html: DVC's plot page with vega, vega-lite and vega-embed inlined.

DVC's own page loads those three scripts from a CDN and is blank offline. This template
carries them inside the page (BSD-3-Clause, taken from the npm registry with ``npm pack``,
checked against the registry's sha512 integrity below), so ``dvc plots show`` and
``dvc plots diff`` draw with no network. Run it (``make plots-template``) only to change the
pinned versions; the built template is committed.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / ".dvc" / "plots" / "offline.html"
# (package, version, build file, npm dist.integrity)
PACKAGES = (
    ("vega", "5.33.1", "build/vega.min.js",
     "sha512-1fArfVDUqVbb5z8n+/nVQb+VNBzx8svY6CrsyTK4Ujm4yrd9I1auoKxBAPXLCavY1LcrbHUskQbGUP8gXOzyQw=="),
    ("vega-lite", "5.23.0", "build/vega-lite.min.js",
     "sha512-l4J6+AWE3DIjvovEoHl2LdtCUkfm4zs8Xxx7INwZEAv+XVb6kR6vIN1gt3t2gN2gs/y4DYTs/RPoTeYAuEg6mA=="),
    ("vega-embed", "6.29.0", "build/vega-embed.min.js",
     "sha512-PmlshTLtLFLgWtF/b23T1OwX53AugJ9RZ3qPE2c01VFAbgt3/GSNI/etzA/GzdrkceXFma+FDHNXUppKuM0U6Q=="),
)  # fmt: skip
PAGE = """<!DOCTYPE html>
<html>
<head>
    {refresh_tag}
    <meta charset="utf-8">
    <title>DVC plots (offline)</title>
    <!-- DVC's scripts placeholder is left out on purpose: it adds CDN script tags. -->
{inlined}
    <style>table { border-spacing: 15px; }</style>
</head>
<body>
    {plot_divs}
</body>
</html>
"""


def _script(folder: Path, name: str, version: str, member: str, integrity: str) -> str:
    subprocess.run(
        ["npm", "pack", "--silent", f"{name}@{version}"], cwd=folder, check=True,
        capture_output=True,
    )  # fmt: skip
    tarball = folder / f"{name}-{version}.tgz"
    digest = base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
    if f"sha512-{digest}" != integrity:
        raise SystemExit(f"{tarball.name}: sha512 does not match the pinned npm integrity")
    with tarfile.open(tarball) as archive:
        handle = archive.extractfile(f"package/{member}")
        assert handle is not None
        code = handle.read().decode("utf-8")
    if "</script" in code.lower():
        raise SystemExit(f"{name}/{member} contains '</script': it cannot be inlined")
    return f"    <!-- {name} {version} ({member}), BSD-3-Clause -->\n    <script>{code}</script>"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        scripts = [_script(Path(tmp), *package) for package in PACKAGES]
    text = PAGE.replace("{inlined}", "\n".join(scripts))
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET} ({len(text):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
