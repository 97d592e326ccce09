"""The serving dashboard (lib.widgets.dashboard, notebook 10): an Engine on the real model stepped tick by tick while
requests arrive; its frames account for every request, block and token, every request gets generate's tokens,
and the three tiers (table and figure, plotly step-through, live widget) draw the same frames."""
import math

import pytest

import lib
from lib.blocks import blocks_for
from lib.serving import start_server
from lib.tokenizer import UnknownCharacterError
from lib.widgets import dashboard as D

SMALL = dict(n_requests=6, max_new_tokens=10, max_prompt=16)  # a short run: the checks hold for any


@pytest.fixture(scope="module")
def lm():
    return lib.load_demo("lm")


@pytest.fixture(scope="module")
def run(lm):
    return D.EngineRun(*lm, **SMALL)


@pytest.fixture(scope="module")
def frames(run):
    return run.run()


def test_every_request_gets_the_tokens_generate_gives_it_alone(lm, run, frames):
    """Arriving over time, sharing the system prompt's blocks, fed in chunks under the budget, preempted when the
    pool runs dry: each request's text is greedy generate's for its prompt alone."""
    model, tok = lm
    last = frames[-1]
    assert len(last.finished) == SMALL["n_requests"] == len(set(last.finished))
    for rid in last.finished:
        s = run.engine.request(rid)
        alone = lib.generate(model, s.prompt, s.max_tokens).new_tokens[0].tolist()
        assert s.tokens == alone, f"request {rid}"
        assert last.texts[rid] == tok.decode(alone)


def test_frames_account_for_every_request_block_and_token(run, frames):
    bs, n_blocks = run.settings["block_size"], run.settings["n_blocks"]
    seen = set()
    for f in frames:
        assert len(f.owners) == n_blocks and f.block_size == bs
        queues = [*f.waiting, *f.preempted, *f.running, *f.finished]
        assert len(queues) == len(set(queues)), f"tick {f.tick}: a request in two queues"
        seen |= set(f.arrived)
        assert set(queues) == seen, f"tick {f.tick}: the queues hold exactly the requests that arrived"
        assert len(f.rows) <= run.settings["max_batch"]
        assert f.prefill_tokens + f.decode_tokens == sum(n for _, n in f.rows.values()) <= f.budget
        assert set(f.rows) <= set(f.running) | set(f.finished_now)
        owners = {r for who in f.owners for r in who}
        assert owners <= set(f.running), f"tick {f.tick}: a block held by a request that is not running"
        for r in f.running:  # each running request holds at least the blocks its prompt's first chunk needs
            assert sum(r in who for who in f.owners) >= 1, f"tick {f.tick}: request {r} runs without a block"
        assert f.shared_blocks == sum(len(who) > 1 for who in f.owners)
    assert all(not who for who in frames[-1].owners), "every block is back in the pool at the end"
    assert max(f.shared_blocks for f in frames) >= 1, "the system prompt's full blocks were shared"
    assert frames[-1].prefix_hit_blocks >= 1


def test_requests_arrive_at_their_poisson_times(lm, run, frames):
    due = [a.at for a in lib.serving.arrivals(lm[1], SMALL["n_requests"], run.settings["rate"], run.settings["seed"],
                                              system_prompt=D.SYSTEM_PROMPT, max_prompt=SMALL["max_prompt"],
                                              max_new_tokens=SMALL["max_new_tokens"])]
    tick_of = {r: f.tick for f in frames for r in f.arrived}
    assert [tick_of[r] for r in sorted(tick_of)] == [math.ceil(at) for at in due]


def test_a_tight_pool_preempts_and_the_queue_grows_with_the_rate(lm):
    calm = D.EngineRun(*lm, rate=0.05, **SMALL).run()
    busy_run = D.EngineRun(*lm, rate=1.5, n_blocks=16, **SMALL)
    busy = busy_run.run()
    assert max(len(f.waiting) for f in busy) > max(len(f.waiting) for f in calm)
    assert any(f.preempted_now for f in busy), "16 blocks for 6 requests: someone is preempted"
    assert all(not f.preempted_now for f in calm)
    # a prefix hit is counted when a request is admitted with cached blocks, not at every try that found no room
    admissions = sum(len(f.admitted) for f in busy)
    assert 0 < busy[-1].prefix_hit_blocks <= admissions * max(blocks_for(len(s.prompt) + s.max_tokens, 8)
                                                             for s in map(busy_run.engine.request, busy[-1].finished))


def test_bad_settings_say_what_is_allowed(lm):
    with pytest.raises(ValueError, match=r"n_blocks=3 is too small.*give n_blocks >= \d+"):
        D.EngineRun(*lm, n_blocks=3, **SMALL)
    with pytest.raises(ValueError, match="rate"):
        D.EngineRun(*lm, rate=0, **SMALL)
    with pytest.raises(UnknownCharacterError):
        D.EngineRun(*lm, **SMALL).send("naïve €")


def test_the_three_tiers_draw_the_same_frames(frames):
    table = D.engine_table(frames)
    assert len(table.splitlines()) == 2 + sum(bool(f.arrived or f.admitted or f.preempted_now or f.finished_now)
                                              for f in frames)
    assert len(D.engine_table(frames, every_tick=True).splitlines()) == 2 + len(frames)
    fig = D.plot_engine(frames)
    assert len(fig.axes) == 3
    pf = D.engine_figure(frames)
    assert [fr.name for fr in pf.frames] == [str(f.tick) for f in frames]
    assert len(pf.layout.sliders[0].steps) == len(frames)
    k = max(range(len(frames)), key=lambda i: frames[i].used_blocks)
    texts = pf.frames[k].data[0].text
    assert sum(bool(x) and x != "·" for x in texts) == frames[k].used_blocks
    assert sum(x.startswith("×") for x in texts) == frames[k].shared_blocks
    assert pf.frames[k].data[1].x[0] == frames[k].prefill_tokens
    assert pf.frames[k].data[2].x[0] == frames[k].decode_tokens


def test_the_live_dashboard_opens_at_work_steps_back_and_restarts(lm):
    w = D.ServingDashboard(*lm)
    s = w.state()
    assert s["waiting"] and len(s["running"]) >= 2 and s["shared_blocks"] >= 1, "opens on the engine at work"
    assert f"#{s['running'][0]}" in s["html"]
    tick = s["tick"]
    assert w.next() == len(w.frames) - 1 and w.state()["tick"] == tick + 1  # the engine ran one more step
    w.back()
    assert w.state()["tick"] == tick and w.state()["html"] == s["html"]
    w.next()
    assert w.state()["tick"] == tick + 1 and len(w.frames) == tick + 2  # along the ticks kept: no new step
    w.play.value += 1  # Play's tick in the browser
    assert w.state()["tick"] == tick + 2
    w.set(rate=1.5)
    assert w.values["rate"] == 1.5 and w.rate_box.value == 1.5
    with pytest.raises(ValueError, match="too small"):
        w.set(n_blocks=4)
    assert w.values["n_blocks"] == D.SETTINGS["n_blocks"]
    w.size_box.value = 4  # through a slider: a new run, blocks of 4 tokens
    assert w.values["block_size"] == 4 and w.run.engine.pool.block_size == 4 and w.problem.value == ""
    w.blocks_box.value = 12  # too few blocks of 4 for the longest request: the problem is said, the run kept
    assert "too small" in w.problem.value and w.values["n_blocks"] == D.SETTINGS["n_blocks"]
    with pytest.raises(ValueError, match="unknown control"):
        w.set(colour=1)


def test_a_prompt_typed_in_the_box_arrives_at_the_next_tick(lm):
    w = D.ServingDashboard(*lm)
    n = len(w.run.prompts)
    w.prompt_box.value = "ROMEO."
    f = w.frames[w.slider.value]
    assert len(w.run.prompts) == n + 1 and f.arrived == (n,) and w.run.prompts[n] == "ROMEO."
    assert w.prompt_box.value == "" and w.problem.value == ""
    w.prompt_box.value = "naïve €"
    assert "not in the vocabulary" in w.problem.value or "vocabulary" in w.problem.value
    assert len(w.run.prompts) == n + 1


def test_a_watcher_keeps_the_frames_of_the_engine_behind_the_endpoint(lm):
    httpx = pytest.importorskip("httpx")
    model, tok = lm
    watcher = D.Watcher(tok)
    with start_server(model, tok, port=0, on_step=watcher, max_batch=4, block_size=8, n_blocks=32) as server:
        for prompt in ("ROMEO.\n", "JULIET.\n"):
            r = httpx.post(server.url + "/v1/completions", json=dict(model="lm", prompt=prompt, max_tokens=5,
                                                                    temperature=0), timeout=60)
            assert r.status_code == 200, r.text
        assert server.loop.watch_error is None
    frames = watcher.frames
    assert [r for f in frames for r in f.arrived] == [0, 1] and frames[-1].finished == (0, 1)
    assert frames[-1].texts[1] == r.json()["choices"][0]["text"]  # what the client got is what the frames show
    assert frames[-1].prompts == {0: "ROMEO.\n", 1: "JULIET.\n"}
    assert all(not who for who in frames[-1].owners)
    assert D.engine_table(frames) and len(D.engine_figure(frames).frames) == len(frames)
