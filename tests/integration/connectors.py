# SPDX-License-Identifier: BSD-3-Clause
"""Scheduler-loop simulations of vLLM and SGLang driving embgw.vllm and
embgw.sglang against real gateways, for the integration tests.

    connectors.py vllm-lang   SOCKET --dir D [--tp 2]
    connectors.py vllm-enc    SOCKET --dir D
    connectors.py sglang-lang SOCKET --dir D [--tp 2]
    connectors.py sglang-enc  SOCKET --dir D --part-of 0|1

Each language side runs its scheduler in this process and one process per
TP rank, and calls the adapters exactly as the engine does (the method
names, their order and arguments, the states it expects):

vLLM (vllm/v1/core/sched/scheduler.py, vllm/v1/worker/
ec_connector_model_runner_mixin.py): per step, for each waiting request
ensure_cache_available(request, num_computed_tokens), then per item
has_cache_item(identifier) and update_state_after_alloc(request, index),
then build_connector_meta(scheduler_output); on every rank
bind_connector_metadata(meta), start_load_caches(encoder_cache),
get_finished(finished_req_ids), build_connector_worker_meta(),
clear_connector_metadata(); the ranks' worker metadata aggregate()d into
update_connector_output(output); request_finished(request) at the end.

SGLang (disaggregation/decode.py's queues): per rank, receiver(mgr,
bootstrap_addr, bootstrap_room), init(prefill_dp_rank), poll() until
WaitingForInput, send_metadata(kv_indices, aux_index), poll() until
Success or Failed, the polls reduced across the TP group with MIN before
any rank acts on them; failure_exception() raises.

The phases (both engines): requests of 1..50,000 tokens, the same content
twice in flight, an abort, a failure on one rank retried with attempt + 1
on every rank and at the encoder, a re-queue, a repeat of the same content
(served from the gateway's content cache where the client has one), and
a rank killed while its room is open. Each process prints one line of
key=value results (`vllm-lang: ...` and so on) and exits 0 when every
check held. Files in --dir sequence the two sides.
"""
import argparse
import collections
import multiprocessing as mp
import os
import signal
import sys
import time
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
import embgw  # noqa: E402
from embgw import KVPoll, _engines  # noqa: E402
from embgw import sglang as esg  # noqa: E402
from embgw import vllm as evl  # noqa: E402
from engine import expected, same  # noqa: E402

DEADLINE_S = float(os.environ.get("EMBGW_IT_DEADLINE_S", "120"))
T0 = time.monotonic()


def note(fmt, *args):
    """A timestamped line in the process's log (what happened when)."""
    print("%7.3f " % (time.monotonic() - T0) + fmt % args, flush=True)
HIDDEN = None       # the pool's, from the first client


def tokens(name):
    """An item's token count is in its name: img-<n>-<tag>."""
    return int(name.split("-")[1])


def item_data(name, hidden, dtype):
    return expected(_engines.room_id(name) >> 1, tokens(name), hidden,
                    dtype)[0]


def touch(d, name):
    open(os.path.join(d, name), "w").close()


def wait_file(d, name, timeout_s=DEADLINE_S):
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(os.path.join(d, name)):
        if time.monotonic() > deadline:
            raise TimeoutError("no %s within %.0f s" % (name, timeout_s))
        time.sleep(0.05)


def content():
    return _engines.content_key("x") is not None


# ======================================================================
# vLLM
# ======================================================================
V_ITEMS = {"one": "img-1-one", "big": "img-50000-big", "dup": "img-4096-dup",
           "abort": "img-2000-abort", "retry": "img-3000-retry"}
V_HOLD = "img-50000-hold"


def vllm_config(socket, producer, tp, **extra):
    cfg = types.SimpleNamespace(
        is_ec_producer=producer, is_ec_consumer=not producer,
        ec_connector="EmbgwECConnector",
        ec_connector_module_path="embgw.vllm",
        ec_connector_extra_config=dict(socket=socket, port="p0", peer=1,
                                       **extra))
    cfg.get_from_extra_config = \
        lambda k, d=None: cfg.ec_connector_extra_config.get(k, d)
    return types.SimpleNamespace(
        ec_transfer_config=cfg,
        parallel_config=types.SimpleNamespace(tensor_parallel_size=tp))


def vllm_request(rid, names):
    feats, off = [], 10
    for n in names:
        feats.append(types.SimpleNamespace(
            identifier=n, mm_position=types.SimpleNamespace(
                offset=off, length=tokens(n))))
        off += tokens(n) + 10
    r = types.SimpleNamespace(request_id=rid, mm_features=feats,
                              external=set(), local=set())
    r.get_num_encoder_embeds = lambda i: r.mm_features[i].mm_position.length
    return r


def vllm_worker(rank, pipe, socket, tp):
    """One TP rank's model runner: the mixin's calls, each step."""
    os.environ["EMBGW_TP_RANK"] = str(rank)
    w = evl.EmbgwECConnector(vllm_config(socket, False, tp, deadline_s=60),
                             evl.ECConnectorRole.WORKER)
    cache = {}
    aborted = set()
    while True:
        msg = pipe.recv()
        if msg is None:
            break
        meta, finished, free, fail_once = msg
        for h in free:                  # scheduler_output.free_encoder_...
            cache.pop(h, None)
        w.bind_connector_metadata(meta)
        w.start_load_caches(cache)
        for h in fail_once:             # this rank's room fails once
            wi = w._rooms.get(h)
            if wi is not None and h not in aborted:
                wi.r.abort()
                aborted.add(h)
        _, got = w.get_finished(finished)
        wm = w.build_connector_worker_meta()
        w.clear_connector_metadata()
        checks = {}
        for h in got or ():
            t = cache[h]
            checks[h] = same(t, item_data(h, t.shape[1], t.dtype))
        pipe.send((wm, checks))
    w.shutdown()


class VllmLanguage:
    """The scheduler process with its TP workers."""

    def __init__(self, a):
        self.a = a
        self.sched = evl.EmbgwECConnector(
            vllm_config(a.socket, False, a.tp, deadline_s=a.item_deadline),
            evl.ECConnectorRole.SCHEDULER)
        ctx = mp.get_context("fork")
        self.pipes, self.procs = [], []
        for r in range(a.tp):
            mine, theirs = ctx.Pipe()
            p = ctx.Process(target=vllm_worker,
                            args=(r, theirs, a.socket, a.tp))
            p.start()
            self.pipes.append(mine)
            self.procs.append(p)
        self.waiting = collections.deque()
        self.running = {}
        self.loaded = collections.defaultdict(set)   # mm_hash -> ranks
        self.bad = 0
        self.finished = set()
        self.free = []
        self.fail_once = {}     # rank -> items
        self.fetched = collections.defaultdict(list)  # mm_hash -> attempts
        self.failed = collections.defaultdict(list)   # mm_hash -> Reports

    def submit(self, req):
        self.waiting.append(req)

    def step(self, live=None):
        """One engine step. @return the aggregated worker metadata."""
        live = range(self.a.tp) if live is None else live
        for req in list(self.waiting):
            if not self.sched.ensure_cache_available(req, 0):
                continue        # deferred: skipped this step
            self.waiting.remove(req)
            for i, f in enumerate(req.mm_features):
                if self.sched.has_cache_item(f.identifier):
                    self.sched.update_state_after_alloc(req, i)
                    req.external.add(f.identifier)
                else:
                    req.local.add(f.identifier)  # vLLM runs the encoder
            self.running[req.request_id] = req
        out = types.SimpleNamespace(finished_req_ids=set(self.finished))
        meta = self.sched.build_connector_meta(out)
        for f in meta.fetch:
            self.fetched[f.mm_hash].append(f.attempt)
        for r in live:
            self.pipes[r].send((meta, set(self.finished), self.free,
                                self.fail_once.get(r, set())))
        self.free, self.finished = [], set()
        agg = None
        for r in live:
            wm, checks = self.pipes[r].recv()
            for h, ok in checks.items():
                self.loaded[h].add(r)
                self.bad += not ok
            if wm is not None:
                agg = wm if agg is None else agg.aggregate(wm)
        for h, ranks in (agg.reports if agg else {}).items():
            self.failed[h] += [p for p in ranks.values()
                               if p.state == KVPoll.Failed]
        self.sched.update_connector_output(types.SimpleNamespace(
            finished_sending=None, finished_recving=None,
            ec_connector_worker_meta=agg))
        return agg

    def done(self, req):
        """Every item of req is in every rank's cache (or ran locally)."""
        return all(n in req.local or len(self.loaded[n]) == self.a.tp
                   for n in (f.identifier for f in req.mm_features))

    def finish(self, req):
        self.running.pop(req.request_id, None)
        self.sched.request_finished(req)
        self.finished.add(req.request_id)

    def run_until(self, pred, what, timeout_s=DEADLINE_S, live=None):
        deadline = time.monotonic() + timeout_s
        while not pred():
            if time.monotonic() > deadline:
                raise TimeoutError("%s: not within %.0f s (items %s)"
                                   % (what, timeout_s, self.sched._items))
            self.step(live)
            time.sleep(0.02)

    def stop(self, live=None):
        for r in (range(self.a.tp) if live is None else live):
            self.pipes[r].send(None)
        for p in self.procs:
            p.join(30)


def vllm_lang(a):
    L = VllmLanguage(a)
    s = L.sched
    res = {}
    I = V_ITEMS  # noqa: E741 (short: indexed on almost every line)
    reqs = {"r1": [I["one"]], "r2": [I["big"]], "r3": [I["dup"]],
            "r3b": [I["dup"]], "r4": [I["abort"]], "r5": [I["retry"]]}
    reqs = {k: vllm_request(k, v) for k, v in reqs.items()}
    # rank 1's room of the retry item fails once: every rank drops that
    # attempt and fetches attempt + 1
    L.fail_once = {1: {I["retry"]}}
    # the encoder's data is made: from here on each side answers within
    # the gateways' bootstrap deadline
    wait_file(a.dir, "ready0")
    for r in reqs.values():
        L.submit(r)
    L.step()            # the fetches go out; rank 1 aborts its retry room
    res["rooms_dup"] = len(L.fetched[I["dup"]])
    # the user cancels r4 while its item is on its way
    L.finish(reqs["r4"])
    L.waiting.remove(reqs["r4"])
    # the scheduler combines rank 1's failure: attempt 1 on every rank
    L.run_until(lambda: s._items[I["retry"]].attempt == 1, "the retry")
    L.step()
    touch(a.dir, "go")  # the encoder runs now
    others = [reqs[k] for k in ("r1", "r2", "r3", "r3b", "r5")]
    L.run_until(lambda: all(r.request_id in L.running and L.done(r)
                            for r in others), "phase 1")
    res["local"] = sum(len(r.local) for r in others)
    res["retry_attempt"] = s._items[I["retry"]].attempt
    res["retry_reasons"] = "|".join(
        "a%d/r%d:%s" % (at, rk, why)
        for at, rk, _, why in s._items[I["retry"]].failures)
    for k in ("r1", "r3", "r3b", "r5"):
        L.finish(reqs[k])
    # r2 is preempted: its encoder output leaves the workers' caches and
    # it waits again
    L.free = [I["big"]]
    L.loaded[I["big"]] = set()
    r2 = reqs.pop("r2")
    L.running.pop("r2")
    r2.external, r2.local = set(), set()
    L.submit(r2)
    L.run_until(lambda: "r2" in L.running and L.done(r2), "re-queue")
    res["requeue"] = "cache" if r2.external else "local"
    L.finish(r2)
    # the same image in a new request, after the first ones finished;
    # without a content cache nobody sends it again: the item's deadline
    # passes and vLLM runs the encoder
    s.deadline_s = 10.0
    r6 = vllm_request("r6", [I["dup"]])
    L.loaded[I["dup"]] = set()
    L.submit(r6)
    L.run_until(lambda: "r6" in L.running and L.done(r6), "repeat")
    it = s._items.get(I["dup"])
    res["repeat"] = ("cached" if it is not None and it.cached
                     else "local" if r6.local else "transfer")
    L.finish(r6)
    # a rank killed while its room is open: the others see Failed, at
    # the latest at the gateways' bootstrap deadline (a rank killed before
    # it opened its room): the item's deadline must not pass first
    s.deadline_s = 60.0
    touch(a.dir, "phase2")
    wait_file(a.dir, "held")
    rk = vllm_request("r7", [V_HOLD])
    L.submit(rk)
    L.step()
    L.step()
    time.sleep(1)
    os.kill(L.procs[1].pid, signal.SIGKILL)
    L.procs[1].join()
    seen = L.failed[V_HOLD]
    L.run_until(lambda: seen, "the survivor's Failed", live=[0])
    res["killed"] = "%s(%d)" % (seen[0].reason.replace(" ", "_"),
                                seen[0].code)
    L.finish(rk)
    L.step(live=[0])
    touch(a.dir, "end")
    L.stop(live=[0])
    s.shutdown()
    ok = (L.bad == 0 and res["rooms_dup"] == 1 and res["local"] == 0 and
          res["retry_attempt"] == 1 and
          res["requeue"] == ("cache" if content() else "local") and
          res["repeat"] == ("cached" if content() else "local"))
    print("vllm-lang: ok=%d bad=%d content=%s %s" % (
        ok, L.bad, "yes" if content() else "no",
        " ".join("%s=%s" % kv for kv in sorted(res.items()))), flush=True)
    return ok


def vllm_enc(a):
    cfg = vllm_config(a.socket, True, 1, consumer_tp=a.tp, max_attempts=2,
                      deadline_s=60)
    sched = evl.EmbgwECConnector(cfg, evl.ECConnectorRole.SCHEDULER)
    w = evl.EmbgwECConnector(cfg, evl.ECConnectorRole.WORKER)
    c = w.client()
    data = {n: item_data(n, c.hidden_size, c.torch_dtype)
            for n in V_ITEMS.values()}
    touch(a.dir, "ready0")
    wait_file(a.dir, "go")
    cache = {}
    sends = {}
    # the duplicate item is encoded for two requests: one room; the
    # small items first, so that the rooms the language side opened
    # before "go" (the retry's attempt 1) meet their sender long before
    # the bootstrap deadline, however slow the big item's copy is
    for n in sorted(V_ITEMS.values(), key=tokens) + [V_ITEMS["dup"]]:
        assert not sched.has_cache_item(n)
        cache[n] = data[n]
        w.save_caches(cache, n)
        sends.update(w._sends)
    deadline = time.monotonic() + DEADLINE_S
    while w.has_pending_push_work() and time.monotonic() < deadline:
        w.get_finished(set())
        time.sleep(0.02)
    res = {}
    for n, snd in sends.items():
        st = snd.s.poll()
        res[n] = "%s/a%d%s" % (st.name, snd.attempt,
                               "".join("/%d" % f[1] for f in snd.failures))
    # phase 2: a room held open (not committed) while a rank is killed
    wait_file(a.dir, "phase2")
    hold = _engines.open_sender(c, V_HOLD, 0, a.tp, tokens(V_HOLD),
                                content())
    touch(a.dir, "held")
    deadline = time.monotonic() + DEADLINE_S
    while hold.poll() not in _engines.TERMINAL and \
            time.monotonic() < deadline:
        c.wait(100)
    code, reason = _engines.failure(hold)
    wait_file(a.dir, "end")
    w.shutdown()
    sched.shutdown()
    ok = (res[V_ITEMS["one"]].startswith("Success/a0") and
          res[V_ITEMS["big"]].startswith("Success/a0") and
          res[V_ITEMS["dup"]].startswith("Success/a0") and
          res[V_ITEMS["retry"]].startswith("Success/a1") and
          res[V_ITEMS["abort"]].startswith("Failed") and
          hold.poll() == KVPoll.Failed)
    print("vllm-enc: ok=%d sends=%d %s held=%s(%d)" % (
        ok, len(sends), " ".join("%s=%s" % (n, res[n]) for n in sorted(res)),
        reason.replace(" ", "_"), code), flush=True)
    return ok


# ======================================================================
# SGLang
# ======================================================================
# plain requests: room id -> tokens; multi-part: request id -> parts
S_ROOMS = {"one": (0x5101 << 32) | 1, "big": (0x5102 << 32) | 50000,
           "abort": (0x5103 << 32) | 2000, "retry": (0x5104 << 32) | 3000}
S_HOLD = (0x5105 << 32) | 20000
S_PARTS = [500, 2000, 1500]         # parts 0 and 2 from encoder 0, 1 from 1
S_MM = "mm1"
S_CONTENTS = ["img-%d-mmc%d" % (n, i) for i, n in enumerate(S_PARTS)]


def room_data(room, hidden, dtype):
    return expected(room, room & 0xffffffff, hidden, dtype)[0]


def sglang_rank(rank, pipe, socket, tp):
    """One TP rank's scheduler: decode.py's pre-allocation and transfer
    queues, one call each per step, told the group's reduced polls."""
    mgr = esg.EmbgwKVManager(types.SimpleNamespace(engine_rank=rank), None,
                             types.SimpleNamespace(tp_size=tp),
                             socket=socket, port="p0", peer=1)
    c = mgr.client()
    rows = sum(n & 0xffffffff for n in S_ROOMS.values()) + \
        (S_HOLD & 0xffffffff)
    mgr.register_buffer(torch.zeros(rows, c.hidden_size,
                                    dtype=c.torch_dtype))
    free_row = [0]
    recv = {}           # key -> receiver or MultiPartReceiver
    dest = {}
    while True:
        msg = pipe.recv()
        if msg is None:
            break
        op, arg = msg
        out = None
        if op == "open":
            for key, spec in arg:
                if spec[0] == "plain":
                    r = esg.EmbgwKVReceiver(mgr, "embgw", spec[1])
                    r.init(0)
                else:
                    r = esg.MultiPartReceiver(mgr, spec[1], spec[2],
                                              contents=spec[3])
                recv[key] = r
        elif op == "fail":          # this rank's room fails once
            r = recv[arg]
            (r._rx[1] if isinstance(r, esg.MultiPartReceiver)
             else r._conn).abort()
        elif op == "poll":
            out = {k: (r.part_states() if isinstance(
                r, esg.MultiPartReceiver) else int(r.poll()))
                for k, r in recv.items()}
        elif op == "act":           # the reduced states
            out = {}
            for k, st in arg.items():
                r = recv[k]
                if isinstance(r, esg.MultiPartReceiver):
                    bad = [i for i, s in enumerate(st) if s == KVPoll.Failed]
                    if bad:
                        note("rank %d %s parts %s failed: %s", rank, k, bad,
                             [_engines.failure(r._rx[i]) for i in bad])
                        r.retry(bad)
                    out[k] = int(r.poll())
                    continue
                if st == KVPoll.WaitingForInput and k not in dest:
                    n = r.room & 0xffffffff     # known from the request
                    idx = torch.arange(free_row[0], free_row[0] + n)
                    free_row[0] += n
                    dest[k] = idx
                    r.send_metadata(idx.numpy(), aux_index=len(dest))
                elif st == KVPoll.Failed and r.attempt == 0 and \
                        k not in ("abort", "hold"):
                    note("rank %d %s attempt 0 failed: %s", rank, k,
                         _engines.failure(r._conn))
                    r.retry()       # every rank: attempt 1, same rows
            out = out or None
        elif op == "abort":
            recv[arg].abort()
        elif op == "check":         # key -> (ok, cached, why)
            out = {}
            for k, r in recv.items():
                if isinstance(r, esg.MultiPartReceiver):
                    ok = r.status == esg.WaitingImageRequestStatus.SUCCESS
                    if ok:
                        emb = r.get_embedding(is_concat=True)["image"]
                        want = torch.cat([
                            item_data(n, c.hidden_size, c.torch_dtype)
                            for n in S_CONTENTS])
                        ok = same(emb, want)
                    out[k] = (ok, all(r.cached()), r.error_msg or "",
                              list(r.attempts))
                    continue
                try:
                    r.failure_exception()
                    why = ""
                except embgw.EmbeddingTransferError as e:
                    why = "%s(%d)" % (e.reason.replace(" ", "_"), e.code)
                ok = r.poll() == KVPoll.Success and same(
                    mgr.buffer[dest[k]],
                    room_data(r.room, c.hidden_size, c.torch_dtype))
                out[k] = (ok, r.cached, why, [r.attempt])
        pipe.send(out)
    mgr.close()


class SglangLanguage:
    def __init__(self, a):
        self.a = a
        ctx = mp.get_context("fork")
        self.pipes, self.procs = [], []
        for r in range(a.tp):
            mine, theirs = ctx.Pipe()
            p = ctx.Process(target=sglang_rank,
                            args=(r, theirs, a.socket, a.tp))
            p.start()
            self.pipes.append(mine)
            self.procs.append(p)
        self.live = list(range(a.tp))

    def call(self, op, arg=None, ranks=None):
        ranks = self.live if ranks is None else ranks
        for r in ranks:
            self.pipes[r].send((op, arg))
        return [self.pipes[r].recv() for r in ranks]

    def step(self):
        """poll on every rank, MIN across the group (SGLang's
        poll_and_all_reduce), then every rank acts on the same states."""
        polls = self.call("poll")
        red = {}
        for k in polls[0]:
            vals = [p[k] for p in polls]
            red[k] = [min(x) for x in zip(*vals)] \
                if isinstance(vals[0], list) else min(vals)
        self.call("act", red)
        return red

    def run_until(self, keys, timeout_s=DEADLINE_S):
        deadline = time.monotonic() + timeout_s
        while True:
            red = self.step()
            if all(k in red and self.terminal(red[k]) for k in keys):
                return red
            if time.monotonic() > deadline:
                raise TimeoutError("not terminal within %.0f s: %s"
                                   % (timeout_s, red))
            time.sleep(0.02)

    @staticmethod
    def terminal(st):
        if isinstance(st, list):    # every part in, or the request failed
            return len(set(st)) == 1 and st[0] in (KVPoll.Success,
                                                   KVPoll.Failed)
        return st in (KVPoll.Success, KVPoll.Failed)


def sglang_lang(a):
    L = SglangLanguage(a)
    res = {}
    for n in range(2):      # the encoders' data is made
        wait_file(a.dir, "ready%d" % n)
    specs = [(k, ("plain", room)) for k, room in S_ROOMS.items()]
    specs.append(("mm", ("multi", S_MM, [(1, "image")] * len(S_PARTS),
                         S_CONTENTS if content() else None)))
    L.call("open", specs)
    note("go")
    touch(a.dir, "go")
    # the encoders have opened every room and written half of three of
    # them: rank 1's room of one request and of one part fails, and the
    # user cancels a third request
    for n in range(2):
        wait_file(a.dir, "opened%d" % n)
    L.call("fail", "retry", ranks=[1])
    L.call("fail", "mm", ranks=[1])
    L.call("abort", "abort")
    # every rank moves the failed room and part to attempt 1 (the encoders
    # see theirs fail and do the same), then the encoders write the rest
    deadline = time.monotonic() + DEADLINE_S
    while not all(ch["retry"][3] == [1] and ch["mm"][3][1] == 1
                  for ch in L.call("check")):
        if time.monotonic() > deadline:
            raise TimeoutError("the ranks did not retry")
        L.step()
        time.sleep(0.02)
    touch(a.dir, "failed")
    L.run_until([k for k, _ in specs])
    checks = L.call("check")
    bad = 0
    for k, _ in specs:
        for rank, ch in enumerate(checks):
            ok, cached, why, attempts = ch[k]
            want = k != "abort"
            bad += ok != want
            if k == "abort":
                res["abort_r%d" % rank] = why
        res["attempts_" + k] = "/".join(str(x) for x in checks[0][k][3])
    if content():       # the same items again: from the gateway's cache
        L.call("open", [("mm2", ("multi", "mm2",
                                 [(1, "image")] * len(S_PARTS),
                                 S_CONTENTS))])
        L.run_until(["mm2"], timeout_s=30)
        checks = L.call("check")
        res["repeat"] = "cached" if all(ch["mm2"][1] for ch in checks) \
            else "transfer"
        bad += sum(not ch["mm2"][0] for ch in checks)
    else:
        res["repeat"] = "unsupported"
    # a rank killed while a room is open
    touch(a.dir, "phase2")
    wait_file(a.dir, "held")
    L.call("open", [("hold", ("plain", S_HOLD))])
    L.step()
    time.sleep(1)
    os.kill(L.procs[1].pid, signal.SIGKILL)
    L.procs[1].join()
    L.live = [0]
    L.run_until(["hold"])
    res["killed"] = L.call("check")[0]["hold"][2]
    touch(a.dir, "end")
    L.call("abort", "hold")
    for r in L.live:
        L.pipes[r].send(None)
    L.procs[0].join(30)
    ok = (bad == 0 and res["attempts_retry"] == "1" and
          res["attempts_mm"] == "0/1/0" and res["killed"] != "" and
          all(res["abort_r%d" % r] for r in range(a.tp)) and
          res["repeat"] in ("cached", "unsupported"))
    print("sglang-lang: ok=%d bad=%d content=%s %s" % (
        ok, bad, "yes" if content() else "no",
        " ".join("%s=%s" % kv for kv in sorted(res.items()))), flush=True)
    return ok


def sglang_enc(a):
    """Encoder `part_of`: 0 sends the plain rooms and parts 0 and 2, 1
    sends part 1; a failed room is retried once (attempt 1)."""
    mgr = esg.EmbgwKVManager(types.SimpleNamespace(engine_rank=0), None,
                             types.SimpleNamespace(tp_size=1),
                             socket=a.socket, port="p0", tp_size=1)
    c = mgr.client()
    jobs = []           # (key, room, content name, tensor)
    if a.part_of == 0:
        for k, room in S_ROOMS.items():
            jobs.append((k, room, None,
                         room_data(room, c.hidden_size, c.torch_dtype)))
    for i, n in enumerate(S_CONTENTS):
        if (i == 1) == (a.part_of == 1):
            jobs.append(("part%d" % i, esg.part_room(S_MM, i), n,
                         item_data(n, c.hidden_size, c.torch_dtype)))
    mgr.register_buffer(torch.cat([t for *_, t in jobs]))
    touch(a.dir, "ready%d" % a.part_of)
    wait_file(a.dir, "go")
    senders, row, held = {}, 0, []
    for k, room, name, t in jobs:
        s = esg.EmbgwKVSender(mgr, "embgw", room, list(range(a.tp)), 0)
        n = t.shape[0]
        note("open %s", k)
        s.init(n)
        half = n // 2       # two chunks, as chunked prefill sends
        s.send(torch.arange(row, row + half).numpy())
        rest = (s, torch.arange(row + half, row + n).numpy(), half)
        if k in ("retry", "abort", "part1"):
            held.append(rest)   # written once the ranks have failed them
        else:
            s.send(rest[1], token_position_offset=half)
        row += n
        senders[k] = s
    touch(a.dir, "opened%d" % a.part_of)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if held and os.path.exists(os.path.join(a.dir, "failed")):
            for s, idx, off in held:
                s.send(idx, token_position_offset=off)
            held = []
        pending = bool(held)
        for k, s in senders.items():
            st = s.poll()
            if st == KVPoll.Failed and s.attempt == 0:
                note("%s attempt 0 failed: %s", k, _engines.failure(s._conn))
                s.retry()
                pending = True
            elif st not in _engines.TERMINAL:
                pending = True
        if not pending:
            break
        c.wait(50)
    res = {}
    for k, s in senders.items():
        try:
            s.failure_exception()
            why = ""
        except embgw.EmbeddingTransferError as e:
            why = "/%d" % e.code
        res[k] = "%s/a%d%s" % (KVPoll(s.poll()).name, s.attempt, why)
    hold_reason = ""
    if a.part_of == 0:
        wait_file(a.dir, "phase2")
        hold = esg.EmbgwKVSender(mgr, "embgw", S_HOLD, list(range(a.tp)), 0)
        hold.init(S_HOLD & 0xffffffff)  # opened, never written
        touch(a.dir, "held")
        deadline = time.monotonic() + DEADLINE_S
        while hold.poll() not in _engines.TERMINAL and \
                time.monotonic() < deadline:
            c.wait(100)
        try:
            hold.failure_exception()
        except embgw.EmbeddingTransferError as e:
            hold_reason = "%s(%d)" % (e.reason.replace(" ", "_"), e.code)
    wait_file(a.dir, "end")
    mgr.close()
    want = {"one": "Success/a0", "big": "Success/a0",
            "retry": "Success/a1", "part0": "Success/a0",
            "part1": "Success/a1", "part2": "Success/a0"}
    ok = all(res[k].startswith(v) for k, v in want.items() if k in res) and \
        (a.part_of == 1 or (res["abort"].startswith("Failed") and
                            hold_reason != ""))
    print("sglang-enc%d: ok=%d %s%s" % (
        a.part_of, ok, " ".join("%s=%s" % kv for kv in sorted(res.items())),
        " held=" + hold_reason if a.part_of == 0 else ""), flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("role", choices=["vllm-lang", "vllm-enc", "sglang-lang",
                                     "sglang-enc"])
    ap.add_argument("socket")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--part-of", type=int, default=0)
    ap.add_argument("--item-deadline", type=float, default=90.0)
    a = ap.parse_args()
    run = {"vllm-lang": vllm_lang, "vllm-enc": vllm_enc,
           "sglang-lang": sglang_lang, "sglang-enc": sglang_enc}[a.role]
    try:
        good = run(a)
    except Exception as e:  # noqa: BLE001 - one line for the test's log
        import traceback
        traceback.print_exc()
        print("%s: ok=0 error=%s" % (a.role, e), flush=True)
        good = False
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
