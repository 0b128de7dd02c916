"""``collspec conform`` as one rank of a job an existing launcher started
(``--launcher external``, or detected): the options of that mode and its run."""

from __future__ import annotations

import sys
from dataclasses import replace


def configure(parser) -> None:
    group = parser.add_argument_group("as a rank of a job started by srun, mpirun or torchrun (--launcher external)")
    group.add_argument("--rank", type=int, metavar="K", help="this process's rank (default: the launcher's variables)")
    group.add_argument("--local-rank", type=int, metavar="K", help="its rank on its node (default: the launcher's)")
    group.add_argument("--master-addr", metavar="HOST", help="rank 0's host, where it serves the job's store")
    group.add_argument("--master-port", type=int, metavar="PORT", help="the store's port (default: MASTER_PORT, else from the job id)")
    group.add_argument("--rendezvous", metavar="file:PATH",
                       help="rank 0 writes its address to PATH, a path every rank reaches (mpirun across nodes)")
    group.add_argument("--resume", metavar="REPORT", help="start after the last finished case of REPORT (a merged or partial report)")


def external(args) -> bool:
    """Whether this run is a rank of an external job: asked for, or started by a launcher (world > 1)."""
    from ..conformance import cluster_env

    if args.launcher is not None:
        return args.launcher == "external"
    if args.rank is not None:
        return True
    launcher = cluster_env.detect()
    if launcher is None:
        return False
    try:
        return cluster_env.placement().world > 1
    except Exception:  # noqa: BLE001 - undecidable variables: not a job of ours
        return False


def run(args) -> int:
    from ..conformance import cluster_env, conform, external, report_merge, resolve
    from ..conformance.cases import parse_counts
    from ..conformance.output import Progress
    from ..spec.errors import CollspecError
    from .conform import _split

    place = cluster_env.placement(args.rank, args.world_size, args.local_rank, args.master_addr, args.master_port,
                                  args.rendezvous)
    if args.world_size is not None and args.world_size != place.world:
        raise CollspecError(f"--world-size {args.world_size}: the launcher started {place.world} ranks")
    spec = resolve.parse(args.backend, args.device)
    if spec.library is not None:
        raise CollspecError(f"--backend {spec.text} starts its ranks under its own mpiexec; under --launcher external use "
                            "gloo, nccl, a built-in algorithm or your class")
    if args.algorithm:
        raise CollspecError("--algorithm: only MPI backends have algorithms to force")
    conform._check_options(replace(spec, device="cpu"), place.world, args.timeout, None, _split(args.collective),
                           _split(args.dtype), _split(args.op))
    if spec.device == "cuda":
        import torch

        if torch.cuda.device_count() <= place.local_rank and torch.cuda.device_count() != 1:
            raise CollspecError(f"--device cuda: local rank {place.local_rank} on {place.host} has no GPU of its own "
                                f"({torch.cuda.device_count()} visible)")
    mode = "quick" if args.quick else "full" if args.full else "default"
    cases = conform.select(place.world, mode, args.repeat, args.seed, _split(args.collective), _split(args.dtype),
                           _split(args.op), parse_counts(args.sizes))
    start, earlier, table = 0, [], {}
    if args.resume:
        start, earlier, table = report_merge.resume_point(args.resume, cases)
    settings = {"mode": mode, "launcher": "external", "detected": place.launcher, "rendezvous": place.rendezvous,
                "seed": args.seed, "repeat": args.repeat, "timeout": args.timeout}
    if args.resume:
        settings["resumed_from"] = {"report": args.resume, "case": start}
    job = external.Job(spec, cases, args.timeout, settings, args.json, args.junit, args.strict,
                       conform.parse_expect(getattr(args, "expect", None)), start=start, earlier=earlier,
                       earlier_table=table, quiet=place.rank != 0 or args.json == "-")
    stream = sys.stderr if args.json == "-" else sys.stdout
    progress = Progress(stream)
    if place.rank == 0:
        print(f"collspec conform {args.backend}: {len(cases) - start} cases on {place.world} ranks ({mode}), as a job "
              f"started by {place.launcher} (store at {place.rendezvous})"
              + (f", resuming after case {start}" if start else ""), file=stream, flush=True)
        progress.start(len(cases) - start)
    result = external.run(job, place, progress if place.rank == 0 else (lambda outcome: None))
    progress.close()
    if place.rank != 0:
        print(f"collspec conform: rank {place.rank} on {place.host}: {result.summary()}", file=stream)
    return result.report().exit_code
