"""The optional extras carry what the upstream images carry (issue 23, points 3 and 4)."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _extras() -> dict[str, list[str]]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    return data["project"]["optional-dependencies"]


def test_tf_extra_has_tensorboard_of_the_same_release() -> None:
    """tensorflow 2.21 no longer depends on tensorboard, while the upstream TFJob images
    (and their tf.summary writers) have it."""
    tf = _extras()["tf"]
    tf_version = next(r.split("==")[1].split(";")[0].strip() for r in tf
                      if r.startswith("tensorflow-cpu=="))
    board = next(r for r in tf if r.startswith("tensorboard"))
    minor = ".".join(tf_version.split(".")[:2])
    assert board.startswith(f"tensorboard=={minor}."), board


def test_xgboost_is_below_3_as_on_kserve() -> None:
    """KServe v0.16's xgbserver runs xgboost 2.1; 3.x cannot read the binary model.bst."""
    pins = [r for r in _extras()["local"] if r.startswith(("xgboost-cpu", "xgboost"))]
    assert pins and all(">=2.1,<3" in r for r in pins), pins


def test_the_readme_and_install_page_name_every_extra() -> None:
    """A learner finds each extra where the install is explained (the sdk extra was missing:
    issue 33 Why 7)."""
    readme = (REPO / "README.md").read_text()
    install = (REPO / "docs" / "install.md").read_text()
    for extra in _extras():
        if extra != "dev":  # for contributors: docs/install.md
            assert f"`{extra}`" in readme, extra
        assert f"`{extra}`" in install, extra
