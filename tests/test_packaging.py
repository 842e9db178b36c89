"""What the wheel (and so the image) carries: citebot's own packages, never the test support."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from tests.conftest import REPO


def test_the_wheel_leaves_out_the_test_stand_ins(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path), str(REPO)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("citebot-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {n.split("/")[0] for n in names if n.endswith(".py")}
    assert packages == {"bot", "ingest", "search"}
    assert "bot/slack/server.py" in names and "ingest/pipeline.py" in names
    assert [n for n in names if n.startswith("bot/testing/")] == []
