"""All-reduce that, on empty buffers, starts two helpers (one inheriting its environment,
one scrubbing it in a session of its own) and then never returns.

Used to end a run with a signal while a case hangs: the helpers' process ids and a
``hanging.<rank>`` file go to ``$COLLSPEC_ZOO_PIDS``."""

import os
import subprocess
import sys
import time

import torch.distributed as dist

SLEEP = "import time; time.sleep(600)"


class HangsWithChildren:
    def __init__(self, rank, world_size):
        self.rank = rank

    def all_reduce(self, tensor, op="sum"):
        if tensor.numel() == 0:
            folder = os.environ["COLLSPEC_ZOO_PIDS"]
            helpers = [subprocess.Popen([sys.executable, "-c", SLEEP], stdin=subprocess.DEVNULL),
                       subprocess.Popen([sys.executable, "-c", SLEEP], env={}, start_new_session=True, stdin=subprocess.DEVNULL)]
            with open(os.path.join(folder, f"helpers.{self.rank}"), "w") as handle:
                handle.write(" ".join(str(h.pid) for h in helpers))
            open(os.path.join(folder, f"hanging.{self.rank}"), "w").close()
            time.sleep(3600)  # bug: never returns
        dist.all_reduce(tensor)
