"""Whether a checkout is dirty under ordinary conditions (issue 45, item 5): a real git checkout with an untracked
file beside its tracked ones. The rule (provenance.git_state): dirty when a tracked file differs from HEAD or an
untracked file lies where the outputs are made from (src/, conf/, experiments/, paper/); an untracked file
elsewhere, or an ignored one, changes no output and leaves it clean."""

from __future__ import annotations

import subprocess

import pytest

from scalestudy.provenance import git_commit, git_state

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgsign=false"]
TRACKED = {"README.md": "readme\n", "src/pkg/mod.py": "X = 1\n", "conf/figure/f.yaml": "a: 1\n",
           ".gitignore": "__pycache__/\n/.venv/\n"}  # fmt: skip


@pytest.fixture()
def checkout(tmp_path):
    """A committed checkout of TRACKED files."""
    for name, text in TRACKED.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "c"], cwd=tmp_path, check=True)
    return tmp_path


def head(repo) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()


def add(repo, name: str, text: str = "new\n") -> None:
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text(text)


def test_a_clean_checkout_is_not_dirty_from_its_root_or_a_subfolder(checkout):
    assert git_state(checkout) == {"commit": head(checkout), "dirty": False}
    assert git_commit(checkout / "src" / "pkg") == head(checkout)


@pytest.mark.parametrize("name", ["notes.txt", "scratch/plot.py", "tests/test_x.py", "docs/draft.md"])
def test_an_untracked_file_outside_the_outputs_inputs_leaves_it_clean(checkout, name):
    add(checkout, name)
    assert git_state(checkout)["dirty"] is False
    assert git_commit(checkout / "src") == head(checkout)  # the same asked from a subfolder


@pytest.mark.parametrize("name", [".venv/bin/python", "src/pkg/__pycache__/mod.cpython-311.pyc"])
def test_an_ignored_file_leaves_it_clean_even_among_the_inputs(checkout, name):
    add(checkout, name)
    assert git_state(checkout)["dirty"] is False


@pytest.mark.parametrize(
    "name", ["src/pkg/extra.py", "conf/figure/figure-99.yaml", "experiments/reference/x/data.csv", "paper/t.tex.j2"]
)
def test_an_untracked_file_where_the_outputs_are_made_from_makes_it_dirty(checkout, name):
    add(checkout, name)
    assert git_state(checkout) == {"commit": head(checkout), "dirty": True}
    assert git_commit(checkout / "src" / "pkg") == head(checkout) + "-dirty"  # paths are the checkout's, not cwd's


def test_an_untracked_file_in_an_untracked_input_folder_makes_it_dirty(checkout):
    add(checkout, "src/newpkg/a b.py")  # git shows the folder only (src/newpkg/), with a space in the name inside
    assert git_state(checkout)["dirty"] is True


@pytest.mark.parametrize("how", ["changed", "staged", "deleted", "changed-outside-inputs"])
def test_a_tracked_change_makes_it_dirty_beside_an_untracked_file(checkout, how):
    add(checkout, "notes.txt")  # an untracked file that alone leaves it clean
    target = checkout / ("README.md" if how == "changed-outside-inputs" else "src/pkg/mod.py")
    if how == "deleted":
        target.unlink()
    else:
        target.write_text("X = 2\n")
    if how == "staged":
        subprocess.run([*GIT, "add", str(target)], cwd=checkout, check=True)
    assert git_state(checkout)["dirty"] is True
