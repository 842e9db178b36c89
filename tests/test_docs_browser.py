"""The docs site as a reader sees it: built strictly, then opened in a real browser
(Debian's chromium, headless), which runs the theme's scripts before the page is read."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.browser


def _chromium() -> str:
    path = shutil.which("chromium")
    if not path:
        pytest.fail("chromium is not installed: scripts/test installs Debian's chromium "
                    "(apt-get install chromium); browser tests fail rather than skip", pytrace=False)
    return path


def _browse(chromium: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1300,1000",
                           *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
                   cwd=REPO, check=True, capture_output=True, timeout=300)
    return out


@pytest.mark.parametrize("page, heading", [("index.html", "citebot"), ("security/index.html", "Security"),
                                           ("getting-started/index.html", "Getting started")])
def test_each_page_renders_its_heading_and_the_whole_navigation(site, page, heading):
    dom = _browse(_chromium(), "--dump-dom", (site / page).as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert f">{heading}" in html
    # The navigation the theme draws: every top-level section, and the decision records.
    for entry in ("Getting started", "The Slack app", "Deploying", "Architecture", "Evaluation", "Glossary",
                  "Stems beside words"):
        assert entry in html, entry


def test_a_screenshot_of_the_security_page_is_kept(site, tmp_path):
    shot = tmp_path / "security.png"
    result = _browse(_chromium(), f"--screenshot={shot}", (site / "security" / "index.html").as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a drawn page, not a blank one
    artefacts = REPO / ".artefacts"
    artefacts.mkdir(exist_ok=True)
    shutil.copy(shot, artefacts / "docs-security.png")
