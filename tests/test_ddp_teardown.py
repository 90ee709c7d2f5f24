"""nmt.training.ddp.teardown: the ranks destroy the process group in turn, and rank 0 (the
one that hosts the store when a job is started without torchrun) leaves last."""

import socket
import subprocess
import sys
import textwrap

from conftest import REPO

WORKER = textwrap.dedent("""
    import sys, time
    import torch.distributed as dist
    from nmt.training.ddp import teardown
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    stamp = []  # rank 1: when its group was destroyed, before it hands the turn on
    if rank == 1:  # rank 1 is slow to tear down: rank 0 must wait for it, not leave
        destroy = dist.destroy_process_group
        dist.destroy_process_group = lambda: (time.sleep(1.0), destroy(),
                                              stamp.append(time.monotonic()))
    teardown(rank, 2)
    down = stamp[0] if stamp else time.monotonic()  # rank 0: when it leaves
    print(f"rank {rank} down at {down:.3f}", flush=True)
    assert not dist.is_initialized()
""")


def test_ranks_tear_down_in_turn_and_rank_0_leaves_last(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    procs = [subprocess.Popen([sys.executable, str(script)], cwd=REPO, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                                   "WORLD_SIZE": "2", "RANK": str(r), "PYTHONPATH": str(REPO),
                                   "PATH": "/usr/bin:/bin"})
             for r in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    down = [float(out.split()[-1]) for out, _ in outs]
    assert down[0] >= down[1], f"rank 0 left before rank 1 had torn down: {down}"
