"""Run by test_copy_resume: copy a collection and stop dead after some sources.

``python copy_driver.py SOURCE TARGET STOP_AFTER``: after ``STOP_AFTER`` sources are
written it prints ``STOPPED <n>`` and sleeps, so the test can SIGKILL it mid-copy.
"""

from __future__ import annotations

import sys
import time

from plait.copying import copy_collection
from plait.stores import open_store


def main() -> None:
    source, target, stop_after = open_store(sys.argv[1]), open_store(sys.argv[2]), int(sys.argv[3])

    def progress(done: int, total: int, chunks: int) -> None:
        if done == stop_after:
            sys.stdout.write(f"STOPPED {done} {chunks}\n")
            sys.stdout.flush()
            time.sleep(600)

    copy_collection(source, target, "kb", progress=progress)


if __name__ == "__main__":
    main()
