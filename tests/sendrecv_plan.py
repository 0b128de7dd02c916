"""An MSCCL++ plan of a collective collspec has no postcondition for
(``sendrecv``): two GPUs swap i[0] into each other's o[0], signal, wait,
then copy o[0] to o[1]; out of place. Used by test_mscclpp_sendrecv.py and
the hostile inputs (tests/hostile.py)."""

from __future__ import annotations


def gpu(rank: int) -> dict:
    peer = 1 - rank
    return {
        "id": rank, "input_chunks": 1, "output_chunks": 2, "scratch_chunks": 0,
        "channels": [{"channel_type": "memory", "connected_to": [peer]}],
        "remote_buffers": [{"rank": peer, "type": "o", "access_channel_types": ["memory"]}],
        "semaphores": [],
        "threadblocks": [{
            "id": 0,
            "channels": [{"channel_type": "memory", "channel_ids": [0]}],
            "remote_buffer_refs": [{"access_channel_type": "memory", "remote_buffer_ids": [0]}],
            "ops": [
                {"name": "put", "src_buff": [{"type": "i", "index": 0, "size": 1}], "dst_buff": [{"buffer_id": 0, "index": 0, "size": 1}], "channel_type": "memory"},
                {"name": "nop"},
                {"name": "signal", "channel_ids": [0], "channel_type": "memory"},
                {"name": "wait", "channel_ids": [0], "channel_type": "memory"},
                {"name": "nop"},
                {"name": "copy", "src_buff": [{"type": "o", "index": 0, "size": 1}], "dst_buff": [{"type": "o", "index": 1, "size": 1}]},
            ],
        }],
    }


PLAN = {"name": "swap", "collective": "sendrecv", "protocol": "Simple", "inplace": False, "gpus": [gpu(0), gpu(1)]}
