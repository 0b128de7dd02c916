"""Small MSCCL programs written out by hand for the msccl tests.

``PAIR`` is a two-GPU all-reduce in place: each GPU sends the chunk the
other owns, reduces what it receives into its own chunk, then sends that
and receives the other's result. ``program(...)`` builds any file from
(gpu, [(send, recv, chan, [step attributes...]), ...]) tuples.
"""

from __future__ import annotations


def step(s, kind, srcbuf="i", srcoff=0, dstbuf="i", dstoff=0, cnt=1, depid=-1, deps=-1, hasdep=0, **extra):
    attrs = dict(s=s, type=kind, srcbuf=srcbuf, srcoff=srcoff, dstbuf=dstbuf, dstoff=dstoff, cnt=cnt, depid=depid, deps=deps, hasdep=hasdep, **extra)
    return "<step " + " ".join(f'{k}="{v}"' for k, v in attrs.items()) + "/>"


def nop(s, depid=-1, deps=-1):
    return step(s, "nop", "i", -1, "o", -1, 0, depid, deps)


def program(gpus, ngpus=None, chunks=2, coll="allreduce", sizes=(2, 0, 0), algo_extra="", inplace=1, outofplace=0, proto="Simple", nchannels=1):
    """``gpus``: list of (gpu id, [(send, recv, chan, [step lines])]); ``sizes``: (i, o, s) chunks per GPU."""
    ngpus = len(gpus) if ngpus is None else ngpus
    lines = [
        f'<algo name="t" proto="{proto}" nchannels="{nchannels}" nchunksperloop="{chunks}" ngpus="{ngpus}" coll="{coll}" '
        f'inplace="{inplace}" outofplace="{outofplace}" minBytes="0" maxBytes="0"{algo_extra}>'
    ]
    for gid, tbs in gpus:
        lines.append(f'  <gpu id="{gid}" i_chunks="{sizes[0]}" o_chunks="{sizes[1]}" s_chunks="{sizes[2]}">')
        for tid, (send, recv, chan, steps) in enumerate(tbs):
            lines.append(f'    <tb id="{tid}" send="{send}" recv="{recv}" chan="{chan}">')
            lines += ["      " + s for s in steps]
            lines.append("    </tb>")
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"


def pair_steps(me: int):
    other = 1 - me
    return [step(0, "s", srcoff=other, dstoff=other), step(1, "rrc", srcoff=me, dstoff=me), step(2, "s", srcoff=me, dstoff=me), step(3, "r", srcoff=other, dstoff=other)]


PAIR = program([(0, [(1, 1, 0, pair_steps(0))]), (1, [(0, 0, 0, pair_steps(1))])])
