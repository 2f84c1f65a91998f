# SPDX-License-Identifier: BSD-3-Clause
"""What a client sees once it lost the gateway (doc/client.md, "Trust"):
views used after Client.close() read zeros instead of killing the process
(run in a subprocess, so that a SIGSEGV fails the test instead of ending
pytest), and a client whose lease ran out finds out on release(), poll()
and views() before it acts on data."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import embgw
from embgw import KVPoll

AFTER_CLOSE = """
import sys, numpy as np, embgw
mode = sys.argv[2]
c = embgw.Client(sys.argv[1], "lang0" if mode == "language" else "enc0")
if mode == "language":
    r = c.recv_room(700)
    r.wait(embgw.KVPoll.Success)
else:
    r = c.send_room(701, 300)
    r.wait(embgw.KVPoll.WaitingForInput)
views = r.views()
tensors = r.tensors()
pool = c.pool["embedding"]
fill = c.pool["fill_ids"]
before = int(np.count_nonzero(views[0]))
c.close()
try:
    r.views()
    print("views() did not raise")
    sys.exit(1)
except ConnectionResetError as e:
    print("views() raised:", e)
# reads and writes through views made before close(): zeros, no fault
total = sum(int(np.count_nonzero(v)) for v in views)
total += int(tensors[0].abs().sum() != 0)
total += int(np.count_nonzero(pool[:1000])) + int(np.count_nonzero(fill[:1000]))
if pool.flags.writeable:
    pool[:10] = 1
    views[0][:] = 2
print("before", before, "after", total, flush=True)
del views, tensors, pool, fill
import gc; gc.collect()
print("done", flush=True)
"""


@pytest.mark.parametrize("mode", ["language", "encode"])
def test_views_after_close_do_not_crash(fake_gateway, mode):
    fake = fake_gateway("--mode", mode, "--port",
                        "lang0" if mode == "language" else "enc0")
    p = subprocess.run([sys.executable, "-c", AFTER_CLOSE, fake.path, mode],
                       capture_output=True, text=True, timeout=60,
                       env=os.environ)
    assert p.returncode == 0, "exit %d\n%s%s" % (p.returncode, p.stdout,
                                                 p.stderr)
    assert "views() raised: " in p.stdout and "closed" in p.stdout
    # the views held data before close() and hold none after it
    line = [x for x in p.stdout.splitlines() if x.startswith("before")][0]
    _, before, _, after = line.split()
    assert mode == "encode" or int(before) > 0
    assert int(after) == 0
    assert "done" in p.stdout


def test_lost_lease_found_on_every_path(fake_gateway):
    fake = fake_gateway("--lease-ms", 300)
    c = embgw.Client(fake.path, "lang0")
    r = c.recv_room(700)
    assert r.wait(KVPoll.Success) == KVPoll.Success
    views = r.views()
    assert np.count_nonzero(views[0]) > 0
    # the engine stops calling the library for longer than the lease
    fake.expect("given up (lease expired")
    time.sleep(0.1)
    with pytest.raises(ConnectionResetError, match="lease expired"):
        r.release()
    with pytest.raises(ConnectionResetError):
        r.views()
    with pytest.raises(ConnectionResetError):
        c.progress()
    # the mapping is revoked: the views made before hold no pool bytes
    assert sum(int(np.count_nonzero(v)) for v in views) == 0
    c.close()
