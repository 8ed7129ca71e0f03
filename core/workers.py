"""Worker processes that end with the process that started them.

A ``ProcessPoolExecutor`` worker waits on a queue whose writing end it holds itself (the queue is
passed to it whole), so when the process that started it is killed (SIGKILL, the OOM killer, a
deploy) it never reads an end of file: it sleeps on, holding its models (~160 MiB a spaCy worker,
~80 MiB an embedder) until the machine restarts. Each worker here watches its parent instead and
exits once it is gone. Workers are spawned, not forked: clean processes, not copies of one that
runs threads — so a program that starts them guards its entry point (``if __name__ == "__main__"``).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor

#: how often a worker looks for its parent, in seconds
PARENT_CHECK_S = 1.0


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """``workers`` spawned worker processes that exit when this process is gone."""
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_exit_with, initargs=(os.getpid(),))


def _exit_with(parent: int) -> None:
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(0)  # orphaned: nothing of a worker's outlives the work it was given

    threading.Thread(target=watch, name="wayfinder-parent-watch", daemon=True).start()
