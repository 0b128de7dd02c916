"""One rank of a run: set up, then execute the plan's cases in order.

:func:`main` runs in every rank process (forked by :mod:`.zygote` for the
local launcher; ``python -m collspec.conformance.rank PLAN LAUNCH_DIR START``
started by :mod:`.guard` for the others). Set-up: load the backend class, initialise torch.distributed
(gloo on the CPU, nccl for ``cuda``) and instantiate the class, as the
plug-in protocol promises. Rendezvous is torch's ``env://`` (``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), exactly as under torchrun;
the local launcher instead names a store on 127.0.0.1 (``COLLSPEC_STORE``)
that rank 0 serves on a socket the coordinator bound (``COLLSPEC_STORE_FD``).

Then, from case START on: build the guarded buffers (:mod:`.buffers`), call
the backend (the method :meth:`~.collectives.Collective.route` names: unequal
blocks go to the ``_v`` methods), save every buffer's bits for the
coordinator to judge, and meet the other ranks at a barrier on a separate
gloo group, so that one case never bleeds into the next. Every case ends
with one ``done`` event per rank:

- ``ok``: the call returned;
- ``unsupported``: the method is missing, or raised NotImplementedError or
  TypeError;
- ``n/a``: unequal blocks and the class has no ``_v`` method for them;
- ``error``: any other exception, with its text (the traceback goes to the
  rank's log). The rank then goes on to the barrier and the next case like
  the others: the coordinator fails the case and, when every rank got this
  far, restarts nothing. A peer left waiting in the collective for the rank
  that raised never reaches the barrier; the coordinator's deadline ends
  that (see :mod:`.runner`).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from datetime import timedelta

from . import events, resolve
from .procs import die_with_parent
from ..spec.errors import CollspecError


def main(argv: list[str]) -> int:
    plan_path, launch_dir, start = argv[0], argv[1], int(argv[2])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    die_with_parent()
    emit = events.Writer(launch_dir, rank)
    with open(plan_path) as handle:
        plan = json.load(handle)
    try:
        backend_class = resolve.load(plan["target"])
    except CollspecError as error:
        emit("fatal", usage=True, error=str(error))
        return 2
    import torch.distributed as dist

    _initialise(dist, plan, rank, world)
    harness = dist.new_group(backend="gloo")
    try:
        backend = backend_class(rank, world)
    except Exception as error:  # the user's constructor: any failure is theirs to read
        emit("fatal", usage=False, error=_describe(error))
        return 1
    emit("ready", pid=os.getpid())
    run = _time_cases if plan.get("timing") else _check_cases
    run(backend, plan, start, rank, world, launch_dir, emit, lambda: dist.barrier(group=harness))
    emit("finished")
    dist.destroy_process_group()
    return 0


def _initialise(dist, plan: dict, rank: int, world: int) -> None:
    # Longer than the coordinator waits for a case, so that a hang is the
    # coordinator's to report (it names the ranks), not torch's timeout.
    timeout = timedelta(seconds=plan["setup_timeout"] + 2 * plan["timeout"])
    kind = "gloo"
    if plan["device"] == "cuda":
        import torch

        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
        kind = "nccl"
    store = os.environ.get("COLLSPEC_STORE")
    if store is None:
        dist.init_process_group(kind, init_method="env://", rank=rank, world_size=world, timeout=timeout)
        return
    host, port = store.rsplit(":", 1)
    listen_fd = os.environ.get("COLLSPEC_STORE_FD") if rank == 0 else None
    tcp = dist.TCPStore(
        host, int(port), world, is_master=listen_fd is not None, timeout=timeout, wait_for_workers=False,
        master_listen_fd=int(listen_fd) if listen_fd is not None else None,
    )
    dist.init_process_group(kind, store=tcp, rank=rank, world_size=world, timeout=timeout)


def _describe(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def _prepare(case, world: int, rank: int, device: str):
    """The case's guarded buffers as tensors, and the input and output views into them."""
    from .buffers import initial_images, inside, layout_of
    from .tensors import to_torch

    layout = layout_of(case, world, rank)
    tensors = {name: to_torch(image, device) for name, image in initial_images(case, world, rank).items()}

    def view(v):
        return tensors[v.storage][inside(v, case.dtype)]

    return layout, tensors, view(layout.input), view(layout.output)


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _method(backend, collective, case, world: int):
    """The backend call that runs ``case``, or (None, status, reason) when there is none."""
    name, call = collective.route(case.count, world)
    if callable(getattr(backend, name, None)):
        return call, None, None
    if name != collective.method:
        return None, "n/a", (f"a count of {case.count} does not split evenly over {world} ranks: unequal blocks go to "
                             f"{name}, which the backend does not define")
    return None, "unsupported", f"the backend has no {name} method"


def _check_cases(backend, plan, start, rank, world, launch_dir, emit, barrier) -> None:
    """Run cases START.. and save their buffers (see the module text)."""
    from .cases import Case
    from .collectives import COLLECTIVES
    from .tensors import to_numpy

    for index in range(start, len(plan["cases"])):
        case = Case.from_json(plan["cases"][index])
        emit("start", case=index)
        call, status, reason = _method(backend, COLLECTIVES[case.collective], case, world)
        if call is None:
            emit("done", case=index, status=status, reason=reason)
            barrier()
            continue
        layout, tensors, input_view, output_view = _prepare(case, world, rank, plan["device"])
        failure = _attempt(lambda: call(backend, input_view, output_view, case), plan)
        if failure is None:
            with open(events.buffers_path(launch_dir, index, rank), "wb") as handle:
                for name in layout.storages:
                    handle.write(to_numpy(tensors[name]).tobytes())
            emit("done", case=index, status="ok")
        else:
            emit("done", case=index, status=failure[0], reason=failure[1])
        barrier()


def _time_cases(backend, plan, start, rank, world, launch_dir, emit, barrier) -> None:
    """Time ``iters`` back-to-back calls of every case after ``warmup`` calls (nccl-tests' loop)."""
    from .cases import Case
    from .collectives import COLLECTIVES

    timing = plan["timing"]
    for index in range(start, len(plan["cases"])):
        case = Case.from_json(plan["cases"][index])
        emit("start", case=index)
        run, status, reason = _method(backend, COLLECTIVES[case.collective], case, world)
        if run is None:
            emit("done", case=index, status=status, reason=reason)
            barrier()
            continue
        _, _, input_view, output_view = _prepare(case, world, rank, plan["device"])
        # two barriers per case on every rank, whatever happens, so that the ranks stay in step
        failure = _attempt(lambda: [run(backend, input_view, output_view, case) for _ in range(timing["warmup"])], plan)
        barrier()
        began = time.perf_counter()
        failure = failure or _attempt(lambda: [run(backend, input_view, output_view, case) for _ in range(timing["iters"])], plan)
        seconds = (time.perf_counter() - began) / timing["iters"]
        if failure:
            emit("done", case=index, status=failure[0], reason=failure[1])
        else:
            emit("done", case=index, status="ok", seconds=seconds)
        barrier()


def _attempt(calls, plan) -> tuple[str, str] | None:
    """Run ``calls``; None if they returned, else (status, reason) as in the module text.

    Any exception but NotImplementedError and TypeError is the backend's own
    failure: this case fails and the run goes on."""
    try:
        calls()
        _sync(plan["device"])
    except (NotImplementedError, TypeError) as error:
        return "unsupported", _describe(error)
    except Exception as error:
        traceback.print_exc()
        return "error", _describe(error)
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
