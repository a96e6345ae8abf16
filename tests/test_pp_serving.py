"""Pipeline-parallel serving as the engines run it (``EngineProfile.overlaps_pipeline_stages``).

TensorRT-LLM (``PyExecutor._executor_loop_pp``: ``pp_size`` micro-batches in flight, ``get_max_num_sequences`` =
``pp_size · max_batch_size``), vLLM (V0: ``pipeline_parallel_size`` virtual engines, each with
``num_gpu_blocks // pp`` KV blocks) and SGLang (``event_loop_pp``) keep pp micro-batches in flight over pp stages;
llama.cpp's layer split runs its GPUs one after another. The physics checked here, against hand-derived bounds:
one micro-batch's iteration is never shorter than the serial sum of its stages (and so never shorter than one GPU
holding every layer); the pipelined replica's throughput never beats pp times the serial one's nor the roofline of
its slowest stage (the last: its layers' weights and the output head, read once per micro-batch); pp = 1 is what it
was, whatever the engine; the simulator's pp schedulers per replica reach the steady state's throughput.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.catalog import get_gpu
from scaleright.errors import InputError
from scaleright.estimate.engines import ENGINES, get_engine
from scaleright.estimate.infer import scheduler_batch_cap, steady_state
from scaleright.estimate.iteration import IterationModel
from scaleright.serve.simulate import simulate

# Llama 3.1 70B (Meta's model card / config.json): 70,553,706,496 parameters, vocabulary 128,256, hidden 8,192,
# embedding and output head untied
LLAMA70_PARAMS, VOCAB, HIDDEN = 70_553_706_496, 128_256, 8_192
ENGINE_NAMES = ("trtllm", "vllm", "sglang", "llama.cpp")


def _serial(engine: str):
    """The engine's profile with its pipeline stages run one after another (one micro-batch in flight)."""
    return dataclasses.replace(get_engine(engine), overlaps_pipeline_stages=False)


@pytest.fixture(scope="module")
def h100():
    return get_gpu("h100-sxm")


def test_each_engine_keeps_the_micro_batches_its_scheduler_does():
    """TensorRT-LLM, vLLM and SGLang: pp micro-batches in flight; llama.cpp: one batch through the GPUs in turn."""
    assert {n: ENGINES[n].micro_batches_in_flight(8) for n in ENGINE_NAMES} == {
        "trtllm": 8, "vllm": 8, "sglang": 8, "llama.cpp": 1}  # fmt: skip
    assert all(ENGINES[n].micro_batches_in_flight(1) == 1 for n in ENGINE_NAMES)


def test_the_schedulers_caps_hold_per_micro_batch():
    """TensorRT-LLM admits ``pp · max_batch_size`` sequences and spends ``max_num_tokens`` per micro-batch
    iteration: 8 × 2048 = 16384; at 2048 / 128 tokens one micro-batch's budget of 8192 tokens holds
    ⌊8192 · 128 / 2175⌋ = 482 sequences of the steady state, eight hold 3856."""
    assert scheduler_batch_cap(input_len=128, output_len=128, max_batch_size=2048, micro_batches=8) == 16384
    assert scheduler_batch_cap(input_len=2048, output_len=128, max_batch_size=2048, max_num_tokens=8192,
                               micro_batches=8) == 8 * 482  # fmt: skip
    assert scheduler_batch_cap(input_len=2048, output_len=128, max_num_tokens=8192) == 482


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_pp_1_is_unchanged_whatever_the_engine_does_with_stages(llama_8b, h100, engine):
    """At pp = 1 there is one stage: the flag changes nothing, in the iteration tables, the steady state and the
    simulator (same seed, same requests: identical to the last bit)."""
    a = IterationModel(llama_8b, gpu=h100, engine=engine, max_rows=512)
    b = IterationModel(llama_8b, gpu=h100, engine=_serial(engine), max_rows=512)
    assert a.micro_batches == b.micro_batches == 1
    assert a._fixed == b._fixed and a._head == b._head
    sa = steady_state(a, batch=np.array([1.0, 7.0, 64.0]), input_len=300, output_len=100)
    sb = steady_state(b, batch=np.array([1.0, 7.0, 64.0]), input_len=300, output_len=100)
    assert all(np.array_equal(sa[k], sb[k]) for k in sa)
    if engine == "llama.cpp":
        return  # bf16 on llama.cpp's profile simulates as well, but one engine's run suffices for the simulator
    ra = simulate(llama_8b, gpu=h100, rate=20, requests=300, engine=engine, seed=4)
    rb = simulate(llama_8b, gpu=h100, rate=20, requests=300, engine=_serial(engine), seed=4)
    assert ra.tpot_ms == rb.tpot_ms and ra.ttft_ms == rb.ttft_ms and ra.output_tokens_per_s == rb.output_tokens_per_s


@settings(max_examples=40, deadline=None)
@given(pp=st.sampled_from((2, 4, 8)), engine=st.sampled_from(("trtllm", "vllm", "sglang")),
       prefill=st.integers(0, 4096), decode=st.integers(0, 1024), ctx=st.floats(0, 8192),
       in_flight=st.integers(1, 8))  # fmt: skip
def test_a_micro_batch_iteration_is_never_shorter_than_its_stages_in_turn(llama_70b, h100, pp, engine, prefill,
                                                                          decode, ctx, in_flight):  # fmt: skip
    """Latency: with any number of micro-batches in flight an iteration lasts at least the serial sum of its pp
    stages (the one-micro-batch model), and that at least what one GPU holding every layer takes (the same work
    plus the activation hops)."""
    if prefill + decode == 0:
        return
    in_flight = min(in_flight, pp)
    piped = IterationModel(llama_70b, gpu=h100, pp=pp, engine=engine, max_rows=0)
    serial = IterationModel(llama_70b, gpu=h100, pp=pp, engine=engine, max_rows=0, micro_batches=1)
    one_gpu = IterationModel(llama_70b, gpu=h100, pp=1, engine=engine, max_rows=0)
    kw = dict(prefill_tokens=prefill, decode_batch=decode, decode_context_tokens=decode * ctx,
              prefill_pairs=prefill * (prefill + 1) / 2, prefill_kv_tokens=prefill, prefill_seqs=1 if prefill else 0)
    t_piped = float(piped.times_s(**kw, in_flight=in_flight))
    t_serial = float(serial.times_s(**kw))
    assert t_piped >= t_serial * (1 - 1e-12)
    assert t_serial >= float(one_gpu.times_s(**kw)) * (1 - 1e-12)


@settings(max_examples=30, deadline=None)
@given(pp=st.sampled_from((2, 4, 8)), rows=st.integers(1, 2048), ctx=st.integers(0, 8192))
def test_the_simulators_tables_are_the_array_path_with_pp_in_flight(llama_70b, h100, pp, rows, ctx):
    """``time_s`` (the tables the simulator reads, with the closed form of the shared stages) equals
    ``times_s`` with pp micro-batches in flight, for decode and fused prefill iterations."""
    m = IterationModel(llama_70b, gpu=h100, pp=pp, engine="trtllm", max_rows=4096)
    assert m.micro_batches == pp
    for kw in (dict(decode_batch=rows, decode_context_tokens=rows * ctx),
               dict(prefill_tokens=rows, prefill_pairs=rows * (rows + 1) / 2, prefill_kv_tokens=rows, prefill_seqs=1,
                    decode_batch=3, decode_context_tokens=3 * ctx)):  # fmt: skip
        assert m.time_s(**kw) == pytest.approx(float(m.times_s(**kw)), rel=1e-9)
        run = m.decode_run(rows, rows * ctx)
        assert run.total_s(1) == pytest.approx(m.time_s(decode_batch=rows, decode_context_tokens=rows * ctx), rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(pp=st.sampled_from((2, 4, 8)), batch=st.integers(1, 4096), i_len=st.integers(1, 4096),
       o_len=st.integers(1, 4096))  # fmt: skip
def test_pipelined_throughput_stays_under_pp_times_serial_and_the_last_stages_roofline(llama_70b, h100, pp, batch,
                                                                                       i_len, o_len):  # fmt: skip
    """Throughput: at the same concurrency the pipelined replica never beats pp times the serial one; and every
    micro-batch iteration makes the last stage read its share of the layers and the whole output head, so over a
    cycle of pp micro-batches of B / pp sequences (B tokens) that stage reads W_layers + pp · W_head bytes at no more
    than the datasheet bandwidth: tokens/s ≤ B · HBM / (W_layers + pp · W_head) (hand-derived from Llama 3.1 70B's
    published parameter count, bf16 weights and head)."""
    piped = IterationModel(llama_70b, gpu=h100, pp=pp, engine="trtllm", max_rows=0)
    serial = IterationModel(llama_70b, gpu=h100, pp=pp, engine="trtllm", max_rows=0, micro_batches=1)
    tp_piped = float(steady_state(piped, batch=batch, input_len=i_len, output_len=o_len)["output_tokens_per_s"])
    tp_serial = float(steady_state(serial, batch=batch, input_len=i_len, output_len=o_len)["output_tokens_per_s"])
    assert tp_piped <= pp * tp_serial * (1 + 1e-9)
    w_head = VOCAB * HIDDEN * 2.0
    w_layers = (LLAMA70_PARAMS - 2 * VOCAB * HIDDEN) * 2.0
    assert tp_piped <= batch * h100.hbm_bandwidth_tb_per_s * 1e12 / (w_layers + pp * w_head)


def test_pipelined_tpot_does_not_drop_below_the_serial_stages(llama_70b, h100):
    """TPOT is one micro-batch's iteration: at the same micro-batch it is at least the serial sum of the stages,
    so TPOT at concurrency B with pp in flight is at least the serial replica's at B / pp (not a pp-th of it)."""
    for pp in (2, 4, 8):
        piped = IterationModel(llama_70b, gpu=h100, pp=pp, engine="trtllm", max_rows=0)
        serial = IterationModel(llama_70b, gpu=h100, pp=pp, engine="trtllm", max_rows=0, micro_batches=1)
        b = np.array([8.0, 64.0, 512.0])
        t_piped = steady_state(piped, batch=b * pp, input_len=1024, output_len=256)["tpot_s"]
        t_serial = steady_state(serial, batch=b, input_len=1024, output_len=256)["tpot_s"]
        assert np.all(t_piped >= t_serial * (1 - 1e-12))


def test_micro_batches_other_than_1_or_pp_are_refused(llama_70b, h100):
    with pytest.raises(InputError, match=r"micro_batches=3 not allowed at pp=4; allowed: 1 .* or 4"):
        IterationModel(llama_70b, gpu=h100, pp=4, engine="trtllm", max_rows=0, micro_batches=3)
    m = IterationModel(llama_70b, gpu=h100, pp=4, engine="trtllm", max_rows=0)
    with pytest.raises(InputError, match=r"in_flight must lie in \[1, pp\(4\)\]"):
        m.times_s(decode_batch=4, in_flight=5)


@pytest.mark.parametrize("batch", [16, 128])
def test_the_simulators_micro_batch_schedulers_reach_the_steady_state(llama_8b, h100, batch):
    """pp = 2 on vLLM's profile: ``serve.simulate`` runs two schedulers on the replica, each with half its KV blocks;
    ``batch`` closed-loop clients (lognormal outputs, so they do not move in lock-step) reach the steady state of two
    micro-batches of batch / 2 within 6 %, and the result still describes one replica of two GPUs."""
    sim = simulate(llama_8b, gpu=h100, gpus=2, pp=2, concurrency=batch, input_len=512, output_len=128,
                   requests=max(60 * batch, 200), engine="vllm", output_dist="lognormal", length_cv=0.3)  # fmt: skip
    model = IterationModel(llama_8b, gpu=h100, pp=2, engine="vllm", max_rows=0)
    ss = steady_state(model, batch=batch, input_len=512, output_len=128)
    assert float(ss["output_tokens_per_s"]) == pytest.approx(sim.output_tokens_per_s, rel=0.06)
    assert float(ss["tpot_s"]) * 1e3 == pytest.approx(sim.tpot_ms["mean"], rel=0.06)
    assert sim.replicas == 1 and sim.layout["replicas"] == 1


def test_the_simulator_pipelines_only_where_the_engine_does(llama_8b, h100):
    """Under a backlog two micro-batches in flight serve more than one batch through the stages in turn, at most
    twice as much; the KV cache of the replica is the same (split, not duplicated); a request alone is not
    served faster than the stages in turn allow."""
    kw = dict(gpu=h100, gpus=2, pp=2, input_len=512, output_len=128, engine="trtllm", seed=1)
    piped = simulate(llama_8b, concurrency=512, requests=3000, **kw)
    serial = simulate(llama_8b, concurrency=512, requests=3000, **{**kw, "engine": _serial("trtllm")})
    assert serial.output_tokens_per_s < piped.output_tokens_per_s <= 2 * serial.output_tokens_per_s
    assert abs(piped.kv_blocks_per_replica - serial.kv_blocks_per_replica) < 2
    alone_p = simulate(llama_8b, rate=0.05, requests=20, **kw)
    alone_s = simulate(llama_8b, rate=0.05, requests=20, **{**kw, "engine": _serial("trtllm")})
    assert alone_p.tpot_ms["p50"] >= alone_s.tpot_ms["p50"] * (1 - 1e-12)


def test_a_fleet_pool_pipelines_as_simulate_does(llama_8b, h100):
    """A pool of one pp = 2 TensorRT-LLM replica (``serve.fleet``: ``PipelinedReplica``, two schedulers) drains a
    backlog of 1500 requests at the rate ``serve.simulate`` finds for the same layout, engine and router (its
    schedulers straight in the cluster) within 3 %; the same pool with its stages in turn is slower, by less than
    half; its GPUs are never more than busy."""
    from scaleright.serve.fleet import PoolSpec, ServiceSpec, run_fleet
    from scaleright.serve.kernel import Environment
    from scaleright.serve.replica import SchedulerConfig
    from scaleright.serve.simulate import build_model, kv_blocks_per_replica

    n, i_len, o_len = 1500, 256, 64
    cfg = dict(max_num_seqs=256, max_num_batched_tokens=8192)
    sim = simulate(llama_8b, gpu=h100, gpus=2, pp=2, rate=1e4, requests=n, input_len=i_len, output_len=o_len,
                   engine="trtllm", router="least-outstanding", **cfg)  # fmt: skip

    def fleet(micro_batches):
        model = build_model(llama_8b, gpu=h100, pp=2, engine="trtllm", micro_batches=micro_batches, **cfg)
        blocks = kv_blocks_per_replica(llama_8b, model, gpu=h100, tp=1, pp=2, ep=1, precision="bf16", **cfg)
        pool = PoolSpec("pool", model, SchedulerConfig(**cfg), blocks, 2, replicas=1)
        arrivals = np.arange(n) / 1e4
        svc = ServiceSpec("s", arrivals, np.full(n, i_len), np.full(n, o_len), tiers=["pool"])
        return run_fleet(Environment(0), [pool], [svc])

    piped, serial = fleet(None), fleet(1)
    rate_p, rate_s = piped.services["s"]["requests_per_s"], serial.services["s"]["requests_per_s"]
    assert piped.services["s"]["requests"] == n
    assert rate_p == pytest.approx(sim.requests_per_s, rel=0.03)
    assert rate_s < rate_p <= 2 * rate_s
    assert 0 < piped.pools["pool"]["gpu_utilisation"] <= 1 + 1e-9


def test_the_chrome_trace_names_each_micro_batch_scheduler_of_its_replica(llama_8b, h100):
    r = simulate(llama_8b, gpu=h100, gpus=4, pp=2, rate=5, requests=20, engine="trtllm", chrome_trace=True)
    names = [e["args"]["name"] for e in r.chrome_trace["traceEvents"] if e["ph"] == "M"]
    assert names == ["replica 0 micro-batch 0", "replica 0 micro-batch 1", "replica 1 micro-batch 0",
                     "replica 1 micro-batch 1"]  # fmt: skip
    assert r.replicas == 2
