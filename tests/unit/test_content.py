"""lab/content.py is the one place that knows where kflab's content lives (the clone, or the
copy a wheel carries); tests/integration/test_packaging.py covers the installed wheel."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab import content
from lab.errors import LabError
from tests.conftest import REPO


@pytest.fixture
def fresh_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """content.root() is cached: clear it around a test that moves the package."""
    content.root.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    content.root.cache_clear()


def test_a_clone_uses_its_own_top_level_folders() -> None:
    assert content.root() == REPO
    assert content.scenarios_dir() == REPO / "scenarios"
    assert content.site_playbook() == REPO / "playbooks" / "site.yml"
    assert content.versions_file().is_file() and content.overlays_dir().is_dir()
    assert (content.vagrant_dir() / "Vagrantfile.j2").is_file()
    assert content.import_root() == REPO  # `python -c "import lab"` from here finds this lab


def test_the_packaged_copy_wins_over_a_source_tree(fresh_root: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    packaged = tmp_path / "lab" / "_content"
    (packaged / "manifests").mkdir(parents=True)
    (packaged / "manifests" / "versions.yaml").write_text("schema: 1\n")
    fresh_root.setattr(content, "PACKAGED", packaged)
    assert content.root() == packaged
    assert content.scenarios_dir() == packaged / "scenarios"


def test_an_install_without_content_says_how_to_fix_it(fresh_root: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    package = tmp_path / "site-packages" / "lab"
    package.mkdir(parents=True)
    fresh_root.setattr(content, "PACKAGE", package)
    fresh_root.setattr(content, "PACKAGED", package / "_content")
    with pytest.raises(LabError) as err:
        content.root()
    assert str(package) in str(err.value) and "reinstall" in str(err.value)


def test_no_module_guesses_the_repository_from_its_own_path() -> None:
    """Content paths come from lab/content.py, never from `Path(__file__).parents[N]`."""
    offenders = [f"{p.relative_to(REPO)}:{n}" for p in (REPO / "lab").rglob("*.py")
                 if p.name != "content.py"
                 for n, line in enumerate(p.read_text().splitlines(), 1)
                 if re.search(r"__file__.*(\.parents\[|\.parent\.parent)", line)]
    assert not offenders
