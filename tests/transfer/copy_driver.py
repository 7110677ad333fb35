"""Run by test_copy_resume: copy a collection and stop dead after some sources.

``python copy_driver.py SOURCE TARGET STOP_AFTER [BATCH SCHEMA]``: after ``STOP_AFTER``
sources are written it prints ``STOPPED <n> <chunks>`` and sleeps, so the test can
SIGKILL it mid-copy. With ``BATCH`` and ``SCHEMA``, TARGET is a PostgreSQL DSN opened in
that schema and the copy writes batches of about ``BATCH`` chunks.
"""

from __future__ import annotations

import sys
import time

from plait.copying import copy_collection
from plait.stores import open_store
from plait.stores.base import Store


def main() -> None:
    source, stop_after = open_store(sys.argv[1]), int(sys.argv[3])
    batch = 2000
    if len(sys.argv) > 4:
        from plait.stores.postgres import PostgresStore

        batch = int(sys.argv[4])
        target: Store = PostgresStore(sys.argv[2], schema=sys.argv[5])
    else:
        target = open_store(sys.argv[2])

    def progress(done: int, total: int, chunks: int) -> None:
        if done == stop_after:
            sys.stdout.write(f"STOPPED {done} {chunks}\n")
            sys.stdout.flush()
            time.sleep(600)

    copy_collection(source, target, "kb", progress=progress, batch_chunks=batch)


if __name__ == "__main__":
    main()
