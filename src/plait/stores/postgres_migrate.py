"""Running one migration of the PostgreSQL store without stalling searches for long.

A statement that needs a strong table lock (``ALTER TABLE``'s ``ACCESS EXCLUSIVE``, an
index build's ``SHARE``, ``LOCK TABLE … EXCLUSIVE``) waits for every transaction already
holding a conflicting lock — a search's ``REPEATABLE READ`` matrix load, a report, a session
left idle in a transaction — and while it waits in PostgreSQL's lock queue every *new*
request for a conflicting lock queues behind it: behind a waiting ``ACCESS EXCLUSIVE`` on
``plait_collections``, every search's first read of the collection. Without a bound that
lasted as long as the oldest open reader (review 5, finding 5).

:func:`apply_migration` runs each migration's transaction under ``SET LOCAL lock_timeout``
(:data:`DEFAULT_LOCK_TIMEOUT`): a lock not granted within it aborts the attempt (the whole
transaction rolls back: nothing of the migration is half applied), the queue behind it
drains, and the migration is tried again after a pause that doubles each time
(:data:`FIRST_PAUSE`, at most :data:`MAX_PAUSE`), at most ``attempts`` times
(:data:`DEFAULT_ATTEMPTS`). So a search waits at most ``lock_timeout`` per attempt. Past
the last attempt :class:`~plait.errors.StoreConflictError` says which migration could not
take its locks and which sessions had transactions open (retry once they finish).
"""

from __future__ import annotations

import logging
import time

import psycopg

from plait.errors import StoreConflictError

__all__ = ["DEFAULT_ATTEMPTS", "DEFAULT_LOCK_TIMEOUT", "FIRST_PAUSE", "MAX_PAUSE", "apply_migration"]

log = logging.getLogger(__name__)

#: Seconds one attempt of a migration waits for a table lock.
DEFAULT_LOCK_TIMEOUT = 1.0
#: Attempts of one migration before :func:`apply_migration` gives up.
DEFAULT_ATTEMPTS = 8
#: Seconds between the first two attempts (doubled after each failed one) and at most.
FIRST_PAUSE = 0.25
MAX_PAUSE = 8.0

# Sessions with a transaction open in this database (what a migration waits for), oldest first.
_OPEN = (
    "SELECT pid, state, now() - xact_start FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL "
    "ORDER BY xact_start LIMIT 5"
)


def apply_migration(
    conn: psycopg.Connection,
    number: int,
    statement: str,
    *,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    attempts: int = DEFAULT_ATTEMPTS,
) -> None:
    """Run migration ``number`` (``statement``) and record it in ``plait_schema_version``,
    in one transaction whose lock waits last at most ``lock_timeout`` seconds; retried
    with a growing pause, at most ``attempts`` times (see the module's docstring).
    ``conn`` is in autocommit mode."""
    if lock_timeout <= 0 or attempts < 1:
        raise ValueError(f"lock_timeout must be > 0 and attempts >= 1, got {lock_timeout}, {attempts}")
    pause = FIRST_PAUSE
    for attempt in range(1, attempts + 1):
        try:
            with conn.transaction():
                conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{int(lock_timeout * 1000)}ms",))
                conn.execute(statement)
                conn.execute("INSERT INTO plait_schema_version (version) VALUES (%s)", (number,))
            return
        except psycopg.errors.LockNotAvailable:
            if attempt == attempts:
                break
            log.warning(
                "plait schema migration %s waited %.1f s for a table lock (attempt %s of %s): "
                "rolled back, retrying in %.2f s", number, lock_timeout, attempt, attempts, pause,
            )
            time.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE)
    sessions = conn.execute(_OPEN).fetchall()
    held = ", ".join(f"pid {r[0]} ({r[1]}, open {r[2]})" for r in sessions) or "none left now"
    raise StoreConflictError(
        f"plait schema migration {number} could not take its table locks within {lock_timeout:g} s, "
        f"{attempts} times: other transactions hold them (sessions with a transaction open: {held}). "
        "Nothing of it was applied and searches went on; end those transactions "
        "(pg_stat_activity) or retry when they finish"
    )
