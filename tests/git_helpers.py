"""Real git repositories for tests, built with the git CLI (no global config involved)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo``; fail the test with git's stderr when it fails."""
    done = subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **_ENV}, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout.strip()


def write(repo: Path, files: dict[str, str | bytes]) -> None:
    for relative, content in files.items():
        path = repo / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def make_repo(path: Path, files: dict[str, str | bytes], *, message: str = "init") -> Path:
    """A new repository at ``path`` with ``files`` committed on branch ``main``."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    write(path, files)
    commit_all(path, message)
    return path


def commit_all(repo: Path, message: str) -> str:
    """Stage everything (deletions too), commit, return the commit id."""
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-gpg-sign", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")
