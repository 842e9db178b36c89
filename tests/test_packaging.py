"""What the wheel (and so the image) carries: citebot's own packages, never the test support."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

from tests.conftest import REPO


def test_the_wheel_leaves_out_the_test_stand_ins(tmp_path):
    # Built from a copy of the tracked files: setuptools packs whatever an old build/ holds.
    source = tmp_path / "src"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path / "dist"), str(source)], check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("citebot-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {n.split("/")[0] for n in names if n.endswith(".py")}
    assert packages == {"bot", "ingest", "search"}
    assert "bot/slack/server.py" in names and "ingest/pipeline.py" in names
    assert [n for n in names if n.startswith("bot/testing/")] == []
