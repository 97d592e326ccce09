"""The serving engine stepped by hand (lib.serving.Engine): requests that arrive at different steps, share a
prefix, are preempted (by recompute or swap), fed in chunks, stopped or aborted, every one gets the tokens
lib.generate gives it alone; the events and snapshots account for every token and block; requests arriving at a
rate (arrivals, run_arrivals, rate_sweep) are counted right on both clocks."""
import pytest

import lib
from lib.serving import (CLOCKS, FINISH_REASONS, Engine, LoadPoint, arrivals, demo_requests, pass_seconds,
                         poisson_arrivals, rate_sweep, run_arrivals)
from lib.serving.scheduler import Status


@pytest.fixture(scope="module")
def prompts(chat):
    """Ten prompts of the chat toy that share a system prompt after <s> (three full blocks of 2 tokens)."""
    tok = chat[1]
    shared = tok.encode("人工智能")
    return [r.prompt[:1] + shared + r.prompt[1:] for r in demo_requests(tok, n=10, seed=3)]


def alone(model, prompt, n, eos_id=None, **kw):
    out = lib.generate(model, prompt, n, eos_id=eos_id, **kw).new_tokens[0].tolist()
    return out[:out.index(eos_id) + 1] if eos_id in out else out


def run(engine, prompts, n=12, per_step=2, **kw):
    """Add ``per_step`` prompts before each step until all arrived, step until all are done; the events."""
    events, rids = [], []
    while len(rids) < len(prompts) or engine.has_unfinished():
        for p in prompts[len(rids):len(rids) + per_step]:
            rids.append(engine.add_request(p, n, **kw))
        events.append(engine.step())
    return rids, events


@pytest.mark.parametrize("kw", [dict(preemption="recompute"), dict(preemption="swap"),
                                dict(max_num_batched_tokens=6), dict(policy="static")])
def test_requests_arriving_at_different_steps_get_the_tokens_of_generate(chat, prompts, kw):
    """Greedy, two requests arriving before each step, a pool too small for all of them (preemption) and a
    shared system prompt (prefix caching): each request's tokens are generate's for it alone."""
    model, tok = chat
    engine = Engine(model, tok, max_batch=4, eos_id=tok.eos_id, block_size=2, n_blocks=24, prefix_cache=True, **kw)
    rids, events = run(engine, prompts)
    res = engine.result()
    assert [engine.request(rid).tokens for rid in rids] == [alone(model, p, 12, tok.eos_id) for p in prompts]
    assert res.prefix_hit_blocks > 0 and engine.pool.allocator.n_used == 0  # every block back in the pool
    if kw.get("policy") != "static":
        assert res.preemptions > 0
    assert sorted({s.arrival_step for s in res.records}) == list(range(5))  # they did arrive at different steps
    assert all(e.prefill_tokens + e.decode_tokens <= kw.get("max_num_batched_tokens", 10 ** 9) for e in events)


def test_sampled_requests_get_the_tokens_of_generate_with_their_seed(chat, prompts):
    """Each request draws with its own generator, once per token it makes: the tokens of generate with the same
    seed, whatever its neighbours in the batch draw, through preemptions and chunked prefill."""
    model, tok = chat
    engine = Engine(model, tok, max_batch=4, block_size=2, n_blocks=24, max_num_batched_tokens=6)
    settings = [dict(temperature=0.9, top_p=0.9, seed=i) if i % 3 else dict() for i in range(len(prompts))]
    rids = []
    for p, s in zip(prompts, settings):
        rids.append(engine.add_request(p, 10, **s))
        engine.step()
    while engine.has_unfinished():
        engine.step()
    assert engine.result().preemptions > 0
    for rid, p, s in zip(rids, prompts, settings):
        assert engine.request(rid).tokens == alone(model, p, 10, **s)


def test_events_account_for_every_token_admission_and_finish(chat, prompts):
    model, tok = chat
    engine = Engine(model, tok, max_batch=3, eos_id=tok.eos_id, block_size=2, n_blocks=20, prefix_cache=True)
    rids, events = run(engine, prompts, per_step=3)
    made = {rid: [] for rid in rids}
    for e in events:
        for rid, ids in e.tokens.items():
            made[rid] += ids
    assert made == {rid: engine.request(rid).tokens for rid in rids}
    finished = [rid for e in events for rid in e.finished]
    assert sorted(finished) == rids  # each finished once
    assert all(reason in FINISH_REASONS for e in events for reason in e.finished.values())
    admitted = sum(len(e.admitted) for e in events)
    preempted = sum(len(e.preempted) for e in events)
    assert preempted == engine.result().preemptions > 0 and admitted == len(rids) + preempted
    assert [e.step for e in events] == list(range(len(events)))
    assert sum(e.prefill_tokens for e in events) == engine.result().prefill_tokens
    assert [e.prefill_tokens + e.decode_tokens for e in events] == engine.result().fed_tokens
    idle = engine.step()  # nothing left: no pass
    assert idle.idle and idle.step == len(events) and engine.result().steps == len(events)


def test_a_snapshot_shows_the_queues_the_pool_by_owner_and_the_texts(chat, prompts):
    model, tok = chat
    engine = Engine(model, tok, max_batch=3, eos_id=tok.eos_id, block_size=2, n_blocks=20, prefix_cache=True,
                    max_num_batched_tokens=8)
    for p in prompts:
        engine.add_request(p, 12)
    seen_shared = seen_preempted = False
    while engine.has_unfinished():
        engine.step()
        snap = engine.snapshot()
        held = {rid: engine.request(rid).table.blocks for rid in snap.running}
        assert snap.owners == [[rid for rid in snap.running if b in held[rid]] for b in range(20)]
        assert snap.used_blocks == engine.pool.allocator.n_used
        assert snap.prefill_tokens + snap.decode_tokens <= snap.budget == 8
        assert set(snap.waiting) | set(snap.preempted) == {s.rid for s in engine.scheduler.waiting}
        assert all(engine.request(rid).status is Status.FINISHED for rid in snap.finished)
        assert snap.texts == {rid: tok.decode(engine.request(rid).tokens) for rid in range(len(prompts))}
        seen_shared |= bool(snap.shared_blocks)
        seen_preempted |= bool(snap.preempted)
    assert seen_shared and seen_preempted
    assert snap.prefix_hit_blocks == engine.result().prefix_hit_blocks > 0


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_abort_frees_a_request_waiting_running_or_swapped_out(chat, prompts, preemption):
    model, tok = chat
    engine = Engine(model, tok, max_batch=4, block_size=2, n_blocks=16, preemption=preemption)
    rids = [engine.add_request(p, 12) for p in prompts]
    aborted = set()
    while engine.has_unfinished():
        engine.step()
        for s in list(engine.scheduler.waiting)[:1] + engine.scheduler.running[-1:]:
            if engine.request(s.rid).tokens and s.rid % 3 == 0:  # one that ran: running, or back in the queue
                assert engine.abort(s.rid)
                aborted.add(s.rid)
    assert aborted and engine.pool.allocator.n_used == 0 and not engine.pool._on_cpu
    assert engine.scheduler.cpu_blocks == 0
    assert {rid for rid in rids if engine.finish_reason(rid) == "abort"} == aborted
    assert not engine.abort(rids[1])  # finished already: nothing to do
    with pytest.raises(KeyError, match=r"no request has rid=99; the engine has 10 \(rids 0 .. 9\)"):
        engine.abort(99)


def test_a_stop_sequence_ends_a_request_where_generate_makes_it(chat, prompts):
    model, tok = chat
    full = alone(model, prompts[0], 12)
    stop = full[3:5]
    engine = Engine(model, tok, block_size=2)
    rid = engine.add_request(prompts[0], 12, stop=[[full[0], 999 % tok.vocab_size, 7], stop])
    while engine.has_unfinished():
        engine.step()
    end = next(i for i in range(2, 13) if full[i - 2:i] == stop)  # where the stop sequence first ends
    assert engine.request(rid).tokens == full[:end] and engine.finish_reason(rid) == "stop"
    assert engine.pool.allocator.n_used == 0


def test_add_request_errors(chat):
    model, tok = chat
    engine = Engine(model, tok, block_size=4, n_blocks=5)
    with pytest.raises(ValueError, match=r"a prompt of 3 tokens leaves room for at most 62 new token\(s\) in the "
                                         r"context window \(max_seq_len=64\), but max_new_tokens=70"):
        engine.add_request([1, 5, 6], 70)
    with pytest.raises(ValueError, match=r"a request may need 9 blocks of 4 tokens \(prompt \+ max_new_tokens\) "
                                         r"but the pool has n_blocks=5; give n_blocks >= 9"):
        engine.add_request([1, 5], 32)
    with pytest.raises(ValueError, match=r"prompt_ids"):
        engine.add_request([], 3)
    with pytest.raises(ValueError, match=r"temperature must be a finite number >= 0"):
        engine.add_request([1, 5], 3, temperature=-1)
    with pytest.raises(ValueError, match=r"stop\[0\]"):
        engine.add_request([1, 5], 3, stop=[[]])
    assert engine.add_request([1, 5], 3, rid=7) == 7 and engine.add_request([1, 5], 3) == 8
    with pytest.raises(ValueError, match=r"rid=7 is taken already; leave rid=None for the next free id"):
        engine.add_request([1, 5], 3, rid=7)
    with pytest.raises(ValueError, match=r"policy='dynamic' is not supported; allowed: static, continuous"):
        Engine(model, policy="dynamic")
    assert not engine.step().idle and engine.finish_reason(7) is None


def test_the_real_model_serves_held_out_text_arriving_over_time(lm_small):
    """lm, the real model: four held-out prompts after one system prompt, arriving at different steps in a pool
    that preempts; every request gets generate's tokens and the system prompt's blocks are computed once."""
    model, tok, reqs = lm_small
    engine = Engine(model, tok, max_batch=3, block_size=4, n_blocks=34, prefix_cache=True)
    rids, _ = run(engine, [a.prompt for a in reqs], n=6, per_step=2)
    assert engine.result().preemptions > 0 and engine.result().prefix_hit_blocks >= 3 * 8
    assert [engine.request(r).tokens for r in rids] == [alone(model, a.prompt, 6) for a in reqs]


@pytest.fixture(scope="module")
def lm_small():
    model, tok = lib.load_demo("lm")
    return model, tok, arrivals(tok, 4, 1.0, system_prompt="You are a poet. Answer in verse.\n", max_prompt=48,
                                max_new_tokens=6)


# ------------------------------------------------------------------------------------ arrivals over time

def test_poisson_arrivals_are_seeded_and_come_at_the_rate():
    a = poisson_arrivals(2000, 4.0, seed=1)
    assert a == poisson_arrivals(2000, 4.0, seed=1) != poisson_arrivals(2000, 4.0, seed=2)
    assert a[0] == 0 and a == sorted(a)
    assert 0.23 < a[-1] / len(a) < 0.27  # mean gap 1 / rate
    with pytest.raises(ValueError, match=r"rate must be a finite number > 0 \(requests per second\), got 0"):
        poisson_arrivals(3, 0)


def test_arrivals_put_the_system_prompt_after_bos(lm_small):
    _, tok, reqs = lm_small
    shared = tok.encode("You are a poet. Answer in verse.\n")
    assert all(a.prompt[0] == tok.bos_id and a.prompt[1:1 + len(shared)] == shared for a in reqs)
    given = arrivals(tok, 3, 2.0, prompts=["ROMEO.\n"], max_new_tokens=5)
    assert [a.prompt for a in given] == [[tok.bos_id] + tok.encode("ROMEO.\n")] * 3
    assert [a.at for a in given] == poisson_arrivals(3, 2.0) and {a.max_new_tokens for a in given} == {5}
    with pytest.raises(ValueError, match=r"prompts is empty"):
        arrivals(tok, 3, 2.0, prompts=[])


def test_run_arrivals_on_the_predicted_clock_prices_each_pass_by_the_roofline(chat, prompts):
    """Requests far apart never queue: each one's TTFT is the roofline price of its prefill pass alone, and the
    run's tokens/s follows from its lengths; all at once, static batching keeps them waiting longer."""
    model, tok = chat
    apart = [lib.serving.Arrival(10.0 * i, p, 4) for i, p in enumerate(prompts[:4])]
    point = run_arrivals(Engine(model, tok, block_size=2), apart, 0.1, "predicted")
    prefill = [pass_seconds([{(len(p), len(p)): 1}], model.config)[0] for p in prompts[:4]]
    assert point.ttft == pytest.approx(prefill) and set(point.queue) == {0}
    assert point.tokens == 16 and point.requests == 4 and point.steps == 16
    assert point.seconds == pytest.approx(30.0 + point.ttft[-1] + 3 * point.tpot[-1])  # the last one's finish
    together = [lib.serving.Arrival(0.0, p, 2 + 4 * (i % 3)) for i, p in enumerate(prompts)]  # 2, 6, 10 tokens
    st, co = (run_arrivals(Engine(model, tok, policy=x, max_batch=4, block_size=2), together, 100.0, "predicted")
              for x in ("static", "continuous"))
    assert max(st.queue) == max(co.queue) == len(prompts) - 4
    assert sum(st.ttft) > sum(co.ttft) and st.steps > co.steps
    assert co.tokens_per_second > st.tokens_per_second
    row = co.row()
    assert list(row) == ["policy", "rate (req/s)", "clock", "tokens/s", "TTFT mean (ms)", "TTFT p90 (ms)",
                         "TPOT mean (ms)", "TPOT p90 (ms)", "mean queue", "max queue", "prefix hit rate"]
    assert row["policy"] == "continuous" and row["max queue"] == 6 and row["tokens/s"] > 0
    assert row["prefix hit rate"] == 0  # no prefix cache


def test_rate_sweep_gives_one_point_per_policy_and_rate(chat):
    model, tok = chat
    points = rate_sweep(model, tok, [1.0, 1e4], n=6, clock="measured", prompts=["人工", "深度"],
                        max_new_tokens=3, max_batch=2, block_size=2, prefix_cache=True, system_prompt="智能")
    assert [(p.policy, p.rate, p.clock) for p in points] == [(policy, rate, "measured") for policy in
                                                             ("static", "continuous") for rate in (1.0, 1e4)]
    for p in points:
        assert isinstance(p, LoadPoint) and p.requests == 6 and p.tokens == 18 and len(p.ttft) == 6
        assert all(t >= 0 for t in p.ttft + p.tpot) and len(p.queue) == p.steps
        assert p.prefix_hit_tokens > 0 and 0 < p.prefix_hit_rate < 1  # <s> and the system prompt's first token
    with pytest.raises(ValueError, match=r"clock='wall' is not supported; allowed: measured, predicted"):
        rate_sweep(model, tok, [1.0], clock="wall", prompts=["人工"], n=1)
    assert CLOCKS == ("measured", "predicted")
