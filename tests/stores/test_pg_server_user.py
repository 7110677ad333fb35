"""The test servers' system user (:func:`plait.testing.pg.ensure_server_user`).

Regression (this session's first parallel run on a fresh machine): ``pgserver`` creates
the user it runs the server as (when started by root) outside its own lock, so two test
workers starting their first servers at once both ran ``useradd``, and one worker's
servers failed ``initdb``. Measured: with the ``pgserver`` user deleted, a two-worker run
of two PostgreSQL test modules errored 3 times in 3 without the lock, 0 in 3 with it.
That race needs the real user deleted, which a test cannot do beside other workers
using it; this test checks the lock with a throwaway user instead.

A second regression: under ``env -i`` (PATH without /usr/sbin, as in the README's fresh
clone check) ``useradd`` was not found and the user was never created; the tools are
looked up in /usr/sbin and /sbin too (:func:`plait.testing.pg.system_tool`).
"""

from __future__ import annotations

import fcntl
import os
import pwd
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from plait.testing.pg import SERVER_USER_LOCK, ensure_server_user, system_tool

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root creates the server's user")


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def test_the_user_is_created_under_the_lock_and_once() -> None:
    name = f"plait{uuid.uuid4().hex[:8]}"  # a throwaway user, deleted afterwards
    creator = threading.Thread(target=ensure_server_user, args=(name,))
    try:
        with SERVER_USER_LOCK.open("a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)  # another process creating it meanwhile
            creator.start()
            creator.join(0.5)
            assert creator.is_alive() and not _exists(name)  # it waits for the lock
        creator.join(30)
        assert not creator.is_alive() and _exists(name)
        ensure_server_user(name)  # an existing user: nothing to do, no error
        assert Path("/etc/passwd").read_text().count(f"\n{name}:") == 1
    finally:
        creator.join(30)
        subprocess.run([system_tool("userdel"), name], capture_output=True)
