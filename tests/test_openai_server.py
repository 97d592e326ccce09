"""The OpenAI-compatible endpoint on the serving engine (lib.serving.start_server), on loopback with a free port:
the official openai client's calls; a load of concurrent streamed requests of mixed lengths with clients that go
away mid-stream and requests that are wrong in every way a client can make them wrong; each one gets a clear HTTP
error or a complete answer, greedy answers are lib.generate's, nothing is lost or answered twice, every block is
back in the pool, and the server is gone after the test. Bounded: a few hundred requests of a few tokens."""
import asyncio
import json
import socket
import statistics
import time

import httpx
import pytest

import lib
from lib.serving import start_server

N_STREAMS = 200  # concurrent streamed requests
DISCONNECT_EVERY = 10  # every 10th client goes away after its first chunk
PROMPTS = ["ROMEO.\n", "JULIET.\nO Romeo, Romeo", "To be, or not to be", "Friends, Romans, countrymen",
           "床前明月光，", "春眠不觉晓，", "Shall I compare thee", "ROMEO.\nBut soft", "白日依山尽，", "Now is the winter"]


@pytest.fixture(scope="module")
def lm():
    return lib.load_demo("lm")


@pytest.fixture(scope="module")
def server(lm):
    """A server on a free port of 127.0.0.1, small enough to preempt under the load, stopped after the module."""
    model, tok = lm
    with start_server(model, tok, port=0, max_batch=32, block_size=4, n_blocks=24) as s:
        yield s
    assert not s._thread.is_alive() and not s.loop._thread.is_alive()
    with pytest.raises(OSError):  # nobody listens there any more
        socket.create_connection(("127.0.0.1", s.port), timeout=1).close()


@pytest.fixture(scope="module")
def expected(lm):
    """Each prompt's greedy continuation by lib.generate (the longest any request asks for)."""
    model, tok = lm
    return {p: tok.decode(lib.generate(model, [tok.bos_id] + tok.encode(p), 6).new_tokens[0].tolist())
            for p in PROMPTS}


def test_the_official_client_lists_the_model_and_completes(server, lm, expected):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)
    assert [m.id for m in client.models.list().data] == ["lm"]
    r = client.completions.create(model="lm", prompt=PROMPTS[0], max_tokens=6, temperature=0)
    assert r.choices[0].text == expected[PROMPTS[0]] and r.choices[0].finish_reason == "length"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (len(PROMPTS[0]) + 1, 6)
    chunks = list(client.completions.create(model="lm", prompt=PROMPTS[4], max_tokens=6, temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == expected[PROMPTS[4]]
    assert [c.choices[0].finish_reason for c in chunks][-1] == "length"
    seeded = [client.completions.create(model="lm", prompt=PROMPTS[2], max_tokens=6, temperature=1.0, top_p=0.9,
                                        seed=7).choices[0].text for _ in range(2)]
    assert seeded[0] == seeded[1]  # the same seed, the same draws
    cut = expected[PROMPTS[0]][3:5]
    r = client.completions.create(model="lm", prompt=PROMPTS[0], max_tokens=6, temperature=0, stop=[cut])
    assert r.choices[0].text == expected[PROMPTS[0]][:expected[PROMPTS[0]].index(cut)]
    assert r.choices[0].finish_reason == "stop"
    with pytest.raises(openai.BadRequestError, match=r"max_tokens=9999 passes the context window"):
        client.completions.create(model="lm", prompt=PROMPTS[0], max_tokens=9999)
    with pytest.raises(openai.NotFoundError, match=r"the model 'gpt-4' does not exist; this server serves 'lm'"):
        client.completions.create(model="gpt-4", prompt=PROMPTS[0])


BAD = [  # (body, status, what the error message says)
    (b'{"model": "lm", "prompt": "hi",', 400, "the request body is not valid JSON"),
    (b'["lm", "hi"]', 400, "the request body must be a JSON object"),
    (json.dumps({"model": "lm", "prompt": "hi", "n": 2, "echo": True}), 400,
     "unrecognized request argument(s) supplied: n, echo; this server takes model, prompt, max_tokens"),
    (json.dumps({"model": "lm", "prompt": "hi", "max_tokens": 600}), 400,
     "max_tokens=600 passes the context window: the model holds max_seq_len=512 tokens and the prompt takes 3"),
    (json.dumps({"model": "lm", "prompt": "hi", "max_tokens": 0}), 400, "max_tokens must be an integer >= 1, got 0"),
    (json.dumps({"model": "lm", "prompt": "hello ☃"}), 400, "1 character(s) not in the vocabulary: '☃' (U+2603 SNOWMAN)"),
    (json.dumps({"model": "lm", "prompt": ""}), 400, "prompt is empty"),
    (json.dumps({"model": "lm", "prompt": "x" * 600}), 400, "the prompt is 601 tokens long"),
    (json.dumps({"model": "lm", "prompt": ["a", "b"]}), 400, "prompt must be a non-empty string"),
    (json.dumps({"model": "lm", "prompt": "hi", "temperature": -1}), 400, "temperature must be a finite number >= 0"),
    (json.dumps({"model": "lm", "prompt": "hi", "stream": "yes"}), 400, "stream must be True or False"),
    (json.dumps({"model": "lm", "prompt": "hi", "stop": ["a"] * 5}), 400, "stop must be null, a non-empty string"),
    (json.dumps({"prompt": "hi"}), 400, "you must provide a model parameter"),
    (json.dumps({"model": "davinci", "prompt": "hi"}), 404, "the model 'davinci' does not exist"),
]


async def _stream(client, url, i, out):
    """One streamed request; every DISCONNECT_EVERY-th client leaves after its first chunk."""
    prompt, n = PROMPTS[i % len(PROMPTS)], 1 + i % 6
    body = {"model": "lm", "prompt": prompt, "max_tokens": n, "temperature": 0, "stream": True}
    t0, text, reasons, done, leave = time.perf_counter(), [], [], 0, i % DISCONNECT_EVERY == 3
    async with client.stream("POST", url + "/v1/completions", json=body) as resp:
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        async for line in resp.aiter_lines():
            if not line:
                continue
            assert line.startswith("data: "), line
            if line == "data: [DONE]":
                done += 1
                continue
            chunk = json.loads(line[6:])
            assert "error" not in chunk, chunk
            text.append(chunk["choices"][0]["text"])
            reasons.append(chunk["choices"][0]["finish_reason"])
            if leave:
                out["left"] += 1
                return  # the context manager closes the connection mid-stream
    out["answers"].append((prompt, n, "".join(text), [r for r in reasons if r], done, time.perf_counter() - t0))


async def _bad(client, url, body, status, message, out):
    resp = await client.post(url + "/v1/completions", content=body, headers={"Content-Type": "application/json"})
    error = resp.json()["error"]
    assert resp.status_code == status and message in error["message"], (body, resp.status_code, error)
    assert set(error) == {"message", "type", "param", "code"}
    out["errors"] += 1


async def _load(url):
    out = {"answers": [], "left": 0, "errors": 0}
    limits = httpx.Limits(max_connections=N_STREAMS + len(BAD), max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=60.0, limits=limits) as client:
        jobs = [_stream(client, url, i, out) for i in range(N_STREAMS)]
        jobs += [_bad(client, url, *bad, out) for bad in BAD for _ in range(2)]
        t0 = time.perf_counter()
        await asyncio.gather(*jobs)
        out["seconds"] = time.perf_counter() - t0
    return out


def test_load_and_faults(server, lm, expected):
    """N_STREAMS concurrent streamed requests (1 to 6 tokens, ten prompts that share blocks), a tenth of the
    clients leaving mid-stream, each kind of bad request twice, all at once."""
    before = dict(server.loop.answered)
    out = asyncio.run(_load(server.url))
    deadline = time.monotonic() + 30
    while server.engine.has_unfinished() and time.monotonic() < deadline:  # the last aborts land within a step
        time.sleep(0.05)
    answers = out["answers"]
    assert out["left"] == N_STREAMS // DISCONNECT_EVERY and len(answers) == N_STREAMS - out["left"]
    assert out["errors"] == 2 * len(BAD)
    for prompt, n, text, reasons, done, _ in answers:  # complete, once, and generate's
        assert reasons == ["length"] and done == 1 and text == expected[prompt][:n], (prompt, n, text)
    answered = {rid: why for rid, why in server.loop.answered.items() if rid not in before}
    assert len(answered) == N_STREAMS  # every accepted request finished or was aborted, exactly once
    assert sum(why == "length" for why in answered.values()) >= len(answers)
    assert not server.engine.has_unfinished() and server.engine.pool.allocator.n_used == 0  # no block leaked
    assert not server.loop._queues  # nobody left waiting
    seconds = sorted(a[-1] for a in answers)
    res = server.engine.result()
    print(f"\nload: {N_STREAMS} streamed requests at once ({out['left']} clients left mid-stream) + "
          f"{out['errors']} bad ones in {out['seconds']:.1f} s; latency p50 {statistics.median(seconds):.2f} s, "
          f"p99 {seconds[int(0.99 * (len(seconds) - 1))]:.2f} s; engine: {res.steps} passes, "
          f"{res.preemptions} preemptions, {res.prefix_hit_blocks} prefix-cache block hits, blocks in use now: "
          f"{server.engine.pool.allocator.n_used}")


def test_the_terminal_client_asks_every_prompt_at_once_and_gets_generate_s_answers(server, lm, capsys):
    """tools.openai_client (what make gpu-check points at a real vllm serve) against the course's server: eight
    concurrent greedy requests, each answered with the tokens generate gives it alone."""
    pytest.importorskip("openai")
    from tools import openai_client

    assert openai_client.main(["--url", server.url + "/v1", "--model", "lm", "--wait", "10"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(openai_client.PROMPTS) + 1 and out[-1].endswith("all answered")
    model, tok = lm
    for prompt, line in zip(openai_client.PROMPTS, out):
        ids = [tok.bos_id] + tok.encode(prompt)
        want = tok.decode(lib.generate(model, ids, 24).new_tokens[0].tolist())
        assert line.split(" -> ")[1].rsplit("  (", 1)[0] == repr(want), prompt


def test_the_terminal_client_says_when_no_server_answers():
    pytest.importorskip("openai")
    from tools import openai_client

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SystemExit, match=r"no server answered at http://127.0.0.1:\d+/v1/ within 1 s"):
        openai_client.main(["--url", f"http://127.0.0.1:{port}/v1", "--wait", "1"])
