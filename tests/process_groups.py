"""Waiting on the process groups the CLI tests start (a command and its local cluster's workers)."""
from __future__ import annotations

import os
import time


def wait_for_group_to_end(pgid) -> None:
    """Return once no process of group ``pgid`` is left; AssertionError after 120 s."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError("worker processes outlived the command")
