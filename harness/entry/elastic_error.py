"""The one line a refused command prints, handed to plain `torchrun` as well.

torchrun's agent ends a failed job with its own report, whose root cause reads "To enable
traceback see: ..." unless the failed rank left the error file the agent names for it
(`TORCHELASTIC_ERROR_FILE`); with that file, the report quotes the harness's line instead.
"""
from __future__ import annotations

import json
import os
import time

ERROR_FILE = "TORCHELASTIC_ERROR_FILE"


def tell_torchrun(line: str) -> None:
    """Write `line` where torchrun's agent reads this rank's failure; nothing outside torchrun."""
    path = os.environ.get(ERROR_FILE)
    if not path:
        return
    record = {"message": {"message": line, "extraInfo": {"timestamp": str(int(time.time()))}}}
    try:
        with open(path, "w") as f:
            json.dump(record, f)
    except OSError:  # a full disk: the console line stands alone, as without torchrun
        return
