"""nmt.training.ddp.teardown: the ranks destroy the process group in turn, and rank 0 (the
one that hosts the store when a job is started without torchrun) leaves last."""

import socket
import subprocess
import sys
import textwrap

from conftest import REPO

WORKER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import torch.distributed as dist
    from nmt.training.ddp import teardown
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mark = Path(sys.argv[1])  # rank 1 writes it once its group is destroyed
    if rank == 1:  # rank 1 is slow to tear down: rank 0 must wait for it, not leave
        destroy = dist.destroy_process_group
        dist.destroy_process_group = lambda: (time.sleep(1.0), destroy(),
                                              mark.write_text("down"))
    teardown(rank, 2)
    # the order is read from the file, not from clocks: rank 0 must find rank 1 torn down
    print(f"rank {rank} leaves; rank 1 down: {mark.exists()}", flush=True)
    assert not dist.is_initialized()
""")


def test_ranks_tear_down_in_turn_and_rank_0_leaves_last(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    mark = str(tmp_path / "rank1_down")
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), mark],
            cwd=REPO,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "WORLD_SIZE": "2",
                "RANK": str(r),
                "PYTHONPATH": str(REPO),
                "PATH": "/usr/bin:/bin",
            },
        )
        for r in (0, 1)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    assert outs[0][0].strip().endswith("rank 1 down: True"), (
        f"rank 0 left before rank 1 had torn down: {outs[0][0]}"
    )
