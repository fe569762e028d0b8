"""Run a device harness in parts, each in its own child process, and merge what they write
(standalone: the standard library and NumPy only, so it runs on a GPU machine without warpsim;
copy it beside the harness that imports it).

A part that faults (a bad kernel kills its CUDA context), exits non-zero or runs past
``timeout`` loses only itself: its return code (-999 for a timeout) and the tail of its stderr
go to the merged file's ``log``, and the other parts are kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Callable, Iterable, Sequence

import numpy as np

#: the return code logged for a part stopped at its timeout
TIMEOUT_RC = -999


def run_parts(parts: Iterable[tuple[object, Sequence[str], str]], path: str, *,
              timeout: float | None = None, log_tail: int = 600, print_tail: int = 300,
              key: Callable[[object, str], str] | None = None) -> dict:
    """Run each ``(name, argv, part)``: ``python argv...`` in a child process, which writes the
    ``.npz`` file ``part``; merge the arrays of the parts that exited 0 (``key(name, array_key)``
    renames them; default: as they are) and write them with ``log`` (a one-element array of JSON:
    ``{name: {"rc", "stderr"}}``, stderr's last ``log_tail`` characters) to ``path``
    (``np.savez_compressed``).  Prints ``name rc stderr-tail`` per part as it ends.  Returns the
    log."""
    merged, log = {}, {}
    for name, argv, part in parts:
        try:
            r = subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                               timeout=timeout)
            rc, err = r.returncode, r.stderr
        except subprocess.TimeoutExpired:
            rc, err = TIMEOUT_RC, "timeout"
        log[name] = {"rc": rc, "stderr": err[-log_tail:]}
        print(name, rc, err[-print_tail:].replace("\n", " | "), flush=True)
        if rc == 0:
            with np.load(part) as z:
                merged.update({(key(name, k) if key else k): z[k] for k in z.files})
            os.remove(part)
    merged["log"] = np.array([json.dumps(log)])
    np.savez_compressed(path, **merged)
    return log
