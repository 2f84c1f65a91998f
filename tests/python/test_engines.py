# SPDX-License-Identifier: BSD-3-Clause
"""embgw.vllm's scheduler side and the engine adapters' shapes, without a
gateway: the ranks' reports are made here as the workers would make them
(the integration cases vllm-connector and sglang-connector drive both
adapters against real gateways)."""
import inspect
import types

import pytest

from embgw import KVPoll, _engines
from embgw import sglang as esg
from embgw import vllm as evl


def config(tp=2, **extra):
    cfg = types.SimpleNamespace(
        is_ec_producer=False, is_ec_consumer=True,
        ec_connector_extra_config=dict({"socket": "/nonexistent.sock"},
                                       **extra))
    return types.SimpleNamespace(
        ec_transfer_config=cfg,
        parallel_config=types.SimpleNamespace(tensor_parallel_size=tp))


def request(rid, *hashes):
    feats = [types.SimpleNamespace(
        identifier=h, mm_position=types.SimpleNamespace(offset=0, length=8))
        for h in hashes]
    return types.SimpleNamespace(request_id=rid, mm_features=feats,
                                 get_num_encoder_embeds=lambda i: 8)


def reports(h, attempt, *states, loaded=False):
    return types.SimpleNamespace(ec_connector_worker_meta=evl
                                 .EmbgwECWorkerMetadata({h: {
                                     r: evl.Report(attempt, int(s),
                                                   -1020 if s == KVPoll.Failed
                                                   else 0, "aborted",
                                                   loaded=loaded)
                                     for r, s in enumerate(states)}}))


@pytest.fixture
def sched():
    return evl.EmbgwECConnector(config(max_attempts=3),
                                evl.ECConnectorRole.SCHEDULER)


def test_base_shape():
    """The methods vLLM's ECConnectorBase has, with their arguments."""
    want = {"start_load_caches": ["encoder_cache", "kwargs"],
            "save_caches": ["encoder_cache", "mm_hash", "kwargs"],
            "get_finished": ["finished_req_ids"],
            "has_cache_item": ["identifier"],
            "ensure_cache_available": ["request", "num_computed_tokens"],
            "update_state_after_alloc": ["request", "index"],
            "build_connector_meta": ["scheduler_output"],
            "update_connector_output": ["connector_output"],
            "request_finished": ["request"],
            "bind_connector_metadata": ["connector_metadata"],
            "clear_connector_metadata": [],
            "build_connector_worker_meta": []}
    for name, args in want.items():
        got = list(inspect.signature(
            getattr(evl.EmbgwECConnector, name)).parameters)[1:]
        assert got == args, name


def test_sglang_shape():
    """SGLang's BaseKVSender / BaseKVReceiver signatures."""
    sig = lambda f: list(inspect.signature(f).parameters)[1:]  # noqa: E731
    assert sig(esg.EmbgwKVReceiver.init) == ["prefill_dp_rank"]
    assert sig(esg.EmbgwKVReceiver.send_metadata) == [
        "kv_indices", "aux_index", "state_indices", "decode_prefix_len"]
    assert sig(esg.EmbgwKVSender.init) == ["num_kv_indices", "aux_index"]
    assert sig(esg.EmbgwKVSender.send) == [
        "kv_indices", "state_indices", "token_position_offset"]
    assert sig(esg.EmbgwKVSender.__init__)[:6] == [
        "mgr", "bootstrap_addr", "bootstrap_room", "dest_tp_ranks",
        "pp_rank", "req_has_disagg_prefill_dp_rank"]
    assert esg.create_part_req_id("r", 2) == "r_local_part_2"
    assert esg.part_room("r", 0) != esg.part_room("r", 1)


def test_room_ids():
    assert _engines.room_id("a") == _engines.room_id(b"a") != 0
    assert _engines.room_id("a", 1) != _engines.room_id("a")


def test_ready_when_every_rank_holds_it(sched):
    r = request("r1", "h")
    assert not sched.ensure_cache_available(r, 0)      # deferred
    meta = sched.build_connector_meta(None)
    assert [(f.mm_hash, f.attempt) for f in meta.fetch] == [("h", 0)]
    sched.update_connector_output(reports("h", 0, KVPoll.Success))
    assert not sched.has_cache_item("h")               # rank 1 not yet
    sched.update_connector_output(reports("h", 0, KVPoll.Success,
                                          KVPoll.Success))
    assert sched.ensure_cache_available(r, 0) and sched.has_cache_item("h")
    sched.update_state_after_alloc(r, 0)
    meta = sched.build_connector_meta(None)
    assert [(ld.mm_hash, ld.attempt, ld.num_tokens) for ld in meta.load] \
        == [("h", 0, 8)]
    sched.update_connector_output(reports("h", 0, KVPoll.Success,
                                          KVPoll.Success, loaded=True))
    assert sched.item_state("h") == evl.Item.LOADED


def test_one_rank_failed_all_retry(sched):
    r = request("r1", "h")
    sched.ensure_cache_available(r, 0)
    sched.build_connector_meta(None)
    sched.update_connector_output(reports("h", 0, KVPoll.Success,
                                          KVPoll.Failed))
    meta = sched.build_connector_meta(None)
    assert meta.drop == {"h": 0}                      # rank 0 lets go too
    assert [(f.mm_hash, f.attempt) for f in meta.fetch] == [("h", 1)]
    # a late word on attempt 0 changes nothing
    sched.update_connector_output(reports("h", 0, KVPoll.Success,
                                          KVPoll.Success))
    assert not sched.has_cache_item("h")
    sched.update_connector_output(reports("h", 1, KVPoll.Success,
                                          KVPoll.Success))
    assert sched.has_cache_item("h")


def test_gives_up_after_max_attempts(sched):
    r = request("r1", "h")
    sched.ensure_cache_available(r, 0)
    for attempt in range(3):
        sched.build_connector_meta(None)
        sched.update_connector_output(reports("h", attempt, KVPoll.Failed))
    assert sched.item_state("h") == evl.Item.DEAD
    assert "attempt 3 of 3" in sched.given_up["h"]
    # vLLM runs the encoder itself: the request goes on, not from here
    assert sched.ensure_cache_available(r, 0)
    assert not sched.has_cache_item("h")
    assert sched.build_connector_meta(None).drop == {"h": 2}


def test_deadline(sched):
    sched.deadline_s = 0.0
    r = request("r1", "h")
    sched.ensure_cache_available(r, 0)
    sched._items["h"].deadline = 0      # long past
    assert sched.ensure_cache_available(r, 0)
    assert "deadline" in sched.given_up["h"]


def test_shared_item_one_room(sched):
    a, b = request("a", "h"), request("b", "h")
    sched.ensure_cache_available(a, 0)
    sched.ensure_cache_available(b, 0)
    assert len(sched.build_connector_meta(None).fetch) == 1
    sched.request_finished(a)
    assert sched.build_connector_meta(None).drop == {}   # b needs it
    sched.request_finished(b)
    assert sched.build_connector_meta(None).drop == {"h": 0}
    # asked for again later: a fresh attempt
    sched.ensure_cache_available(request("c", "h"), 0)
    assert [f.attempt for f in sched.build_connector_meta(None).fetch] == [1]


def test_worker_meta_aggregate():
    a = evl.EmbgwECWorkerMetadata({"h": {0: evl.Report(0, 4)}})
    b = evl.EmbgwECWorkerMetadata({"h": {1: evl.Report(0, 0)},
                                   "g": {1: evl.Report(0, 4)}})
    m = a.aggregate(b)
    assert sorted(m.reports["h"]) == [0, 1] and list(m.reports["g"]) == [1]
    assert list(a.reports["h"]) == [0]      # the parts are left alone


def test_config_errors():
    with pytest.raises(ValueError, match="socket"):
        evl.EmbgwECConnector(config(socket=""), evl.ECConnectorRole.WORKER)
    with pytest.raises(ValueError, match="max_attempts"):
        evl.EmbgwECConnector(config(max_attempts=0),
                             evl.ECConnectorRole.WORKER)
