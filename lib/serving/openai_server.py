"""The engine behind an OpenAI-compatible HTTP endpoint on 127.0.0.1: what a user of vLLM talks to
(``vllm serve``), in small. Any OpenAI client works against it:

    server = lib.serving.start_server(model, tokenizer, port=0)      # a free port; server.url
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none")
    for chunk in client.completions.create(model="lm", prompt="ROMEO.\\n", max_tokens=32, stream=True):
        print(chunk.choices[0].text, end="")
    server.stop()                  # or: with lib.serving.start_server(model, tokenizer) as server: ...

Routes: ``GET /v1/models`` (one model, ``model_name``, default "lm") and ``POST /v1/completions`` with the
parameters ``model, prompt, max_tokens, temperature, top_p, stream, seed, stop`` (OpenAI's defaults: max_tokens
16, temperature 1, top_p 1; ``temperature: 0`` is greedy and gives the tokens of ``lib.generate``). ``stream:
true`` answers with server-sent events: ``data: {chunk}`` lines, one per token (text held back while it could be
the start of a ``stop`` string), then ``data: [DONE]``. Every prompt starts with <s>, as the model was trained
(vLLM adds a tokenizer's BOS token the same way), unless it starts with "<s>" already. Anything the endpoint
cannot serve is an HTTP error with OpenAI's error body, ``{"error": {"message", "type", "param", "code"}}``,
whose message says what was wrong and what is allowed: malformed JSON, an unknown parameter, a character
outside the vocabulary, an empty prompt, a prompt or ``max_tokens`` past the context window (400), another
model's name (404).

Three threads share the work. uvicorn's event loop (FastAPI) parses and checks each request, and streams its
answer; the engine's thread (``EngineLoop``) is the only one that touches the ``Engine``: it takes new requests
and aborts from an inbox between steps, steps while anything runs or waits (sleeping otherwise), and hands each
request's new tokens to its handler's queue. A client that goes away mid-stream has its request aborted there,
its blocks back in the pool, at the next step. The caller's thread keeps the ``Server``.

FastAPI and uvicorn are imported when a server is built, so ``lib.serving`` imports without them.
"""

import asyncio
import functools
import json
import socket
import threading
import time
import uuid
from dataclasses import dataclass

from .. import checks
from ..tokenizer import UnknownCharacterError
from .engine import Engine

HOST = "127.0.0.1"  # loopback only: a course machine's server is nobody else's
PARAMETERS = ("model", "prompt", "max_tokens", "temperature", "top_p", "stream", "seed", "stop")
SERVER_ENGINE = dict(max_batch=16, prefix_cache=True)  # the engine's settings unless start_server is given others
MAX_STOPS = 4  # OpenAI's limit on stop strings
EXAMPLE = '{"model": "lm", "prompt": "ROMEO.\\n", "max_tokens": 16}'


class ApiError(Exception):
    """An HTTP error with OpenAI's error body; ``param``: the parameter at fault (None: the request as a whole)."""

    def __init__(self, message: str, param: str | None = None, status: int = 400,
                 kind: str = "invalid_request_error", code: str | None = None):
        super().__init__(message)
        self.message, self.param, self.status, self.kind, self.code = message, param, status, kind, code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class Completion:
    """A request to /v1/completions, checked: the prompt's token ids (<s> first) and the engine's settings."""

    prompt_ids: list
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    stop: list  # token-id sequences, one per stop string
    stream: bool


def completion_request(body: bytes, model_name: str, tokenizer, config, n_blocks: int, block_size: int) -> Completion:
    """The body of a POST /v1/completions checked, or an ``ApiError`` that says what is wrong and what is allowed.
    ``config``: the model's (its context window); ``n_blocks`` x ``block_size``: the pool, which must hold the
    request alone."""
    try:
        p = json.loads(body)
    except ValueError as e:  # json.JSONDecodeError, or bytes that are not UTF-8
        raise ApiError(f"the request body is not valid JSON ({e}); send a JSON object such as {EXAMPLE}") from None
    if not isinstance(p, dict):
        raise ApiError(f"the request body must be a JSON object such as {EXAMPLE}, got a JSON {type(p).__name__}")
    unknown = [k for k in p if k not in PARAMETERS]
    if unknown:
        raise ApiError(f"unrecognized request argument(s) supplied: {', '.join(unknown)}; this server takes "
                       f"{', '.join(PARAMETERS)}", param=unknown[0])
    if p.get("model") != model_name:
        if "model" not in p:
            raise ApiError(f"you must provide a model parameter: \"model\": \"{model_name}\"", param="model")
        raise ApiError(f"the model {p['model']!r} does not exist; this server serves {model_name!r} (GET /v1/models)",
                       param="model", status=404, code="model_not_found")
    ids = _prompt_ids(p.get("prompt"), tokenizer, config)
    with _param("max_tokens"):
        max_tokens = checks.integer(_or(p, "max_tokens", 16), "max_tokens", 1)
        room = config.max_seq_len - len(ids) + 1  # the last new token is never fed back
        if max_tokens > room:
            raise ValueError(f"max_tokens={max_tokens} passes the context window: the model holds "
                             f"max_seq_len={config.max_seq_len} tokens and the prompt takes {len(ids)} (with <s>), "
                             f"so max_tokens may be at most {room}")
        most = n_blocks * block_size - len(ids) + 1
        if max_tokens > most:
            raise ValueError(f"max_tokens={max_tokens} does not fit the server's KV cache ({n_blocks} blocks of "
                             f"{block_size} tokens) with this prompt; max_tokens may be at most {most}")
    with _param("temperature"):
        temperature = checks.number(_or(p, "temperature", 1.0), "temperature", 0, 2)
    with _param("top_p"):
        top_p = checks.number(_or(p, "top_p", 1.0), "top_p", maximum=1, above=0)
    with _param("seed"):
        seed = p.get("seed")
        seed = None if seed is None else checks.integer(seed, "seed", 0, 2 ** 63 - 1)
    with _param("stream"):
        stream = checks.flag(_or(p, "stream", False), "stream")
    return Completion(ids, max_tokens, temperature, top_p, seed, _stops(p.get("stop"), tokenizer), stream)


def _or(p: dict, name: str, default):
    """``p[name]``, or ``default`` when it is missing or null (OpenAI's clients may send null)."""
    return default if p.get(name) is None else p[name]


class _param:
    """``with _param(name):`` turns a ValueError or TypeError of a check into an ApiError on ``name``."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if isinstance(error, (ValueError, TypeError)) and not isinstance(error, ApiError):
            raise ApiError(str(error), param=self.name) from None
        return False


def _prompt_ids(prompt, tokenizer, config) -> list:
    """The prompt's token ids, <s> first; an ApiError for anything but a non-empty string of known characters
    that fits the context window."""
    if not isinstance(prompt, str):
        what = "missing" if prompt is None else f"a JSON {type(prompt).__name__}"
        raise ApiError(f"prompt must be a non-empty string (one prompt; lists of prompts or token ids are not "
                       f"taken here), got {what}", param="prompt")
    if not prompt:
        raise ApiError("prompt is empty; give at least one character for the model to continue", param="prompt")
    try:
        ids = tokenizer.encode(prompt)
    except UnknownCharacterError as e:  # it names each character; what to do is different over HTTP
        raise ApiError(str(e).split(" Use encode(")[0] + " Remove or replace them.", param="prompt") from None
    ids = ids if ids[0] == tokenizer.bos_id else [tokenizer.bos_id] + ids
    if len(ids) > config.max_seq_len:
        raise ApiError(f"the prompt is {len(ids)} tokens long (one per character, with <s>) but the model's context "
                       f"window holds max_seq_len={config.max_seq_len}; shorten it to at most "
                       f"{config.max_seq_len - 1} characters", param="prompt")
    return ids


def _stops(stop, tokenizer) -> list:
    """``stop`` (null, a string or a list of up to MAX_STOPS strings) as token-id sequences."""
    stops = [] if stop is None else [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or len(stops) > MAX_STOPS or not all(isinstance(s, str) and s for s in stops):
        raise ApiError(f"stop must be null, a non-empty string or a list of at most {MAX_STOPS} non-empty strings, "
                       f"got {json.dumps(stop, ensure_ascii=False)[:80]}", param="stop")
    with _param("stop"):
        return [tokenizer.encode(s) for s in stops]


class TextStream:
    """A request's tokens as the text a client sees: held back while the newest tokens could still be the start
    of a stop sequence, and at the end without the stop sequence (or eos) that finished it."""

    def __init__(self, tokenizer, stops: list):
        self.tokenizer, self.stops = tokenizer, stops
        self.hold = max(map(len, stops), default=1) - 1
        self.ids, self.sent = [], 0

    def push(self, ids: list) -> str:
        """The text of the tokens that are safe to show after ``ids`` were appended."""
        self.ids += ids
        return self._upto(len(self.ids) - self.hold)

    def finish(self, ids: list, reason: str) -> str:
        """The rest of the text after its last tokens ``ids``, the stop sequence or eos that ended it cut off."""
        self.ids += ids
        end = len(self.ids)
        if reason == "stop":
            cut = max((len(q) for q in self.stops if self.ids[-len(q):] == q), default=0)
            end -= cut or int(bool(self.ids) and self.ids[-1] == self.tokenizer.eos_id)
        return self._upto(end)

    def _upto(self, end: int) -> str:
        piece = self.tokenizer.decode(self.ids[self.sent:end]) if end > self.sent else ""
        self.sent = max(self.sent, end)
        return piece


class EngineLoop:
    """The engine's own thread: between steps it takes what the inbox holds (new requests, aborts), then steps
    while anything runs or waits, and sleeps when nothing does. Each request's events go to its handler's
    ``asyncio.Queue`` on the server's event loop, as ("added", rid), ("tokens", [ids]), ("finished", ([ids], reason))
    (its last tokens and why it finished) or ("error", message). ``on_step(engine, events)``, when given, is
    called in the engine's thread after every step (a dashboard keeping frames: ``lib.widgets.dashboard.Watcher``)."""

    def __init__(self, engine: Engine, on_step=None):
        self.engine, self.on_step = engine, on_step
        self._inbox, self._queues = [], {}  # commands; rid -> (event loop, queue)
        self._wake = threading.Condition()
        self._stopping, self.error, self.watch_error = False, None, None
        self.answered = {}  # rid -> why it finished (FINISH_REASONS): every request answered once, or aborted
        self._thread = threading.Thread(target=self._run, name="kvlab-engine", daemon=True)
        self._thread.start()

    def submit(self, c: Completion, loop, queue):
        with self._wake:
            if self._stopping:
                loop.call_soon_threadsafe(queue.put_nowait, ("error", "the server is stopping"))
                return
            self._inbox.append(("add", c, loop, queue))
            self._wake.notify()

    def abort(self, rid: int):
        self._send(("abort", rid))

    def stop(self):
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join()

    def _send(self, command):
        with self._wake:
            self._inbox.append(command)
            self._wake.notify()

    def _run(self):
        while True:
            with self._wake:
                while not (self._inbox or self._stopping or (self.engine.has_unfinished() and self.error is None)):
                    self._wake.wait()
                inbox, self._inbox = self._inbox, []
                if self._stopping:
                    break
            for command in inbox:
                self._apply(command)
            if self.engine.has_unfinished() and self.error is None:
                try:
                    events = self.engine.step()
                except Exception as e:  # a bug: every request still open is told, and the server answers 500s
                    self.error = f"the engine failed at step {self.engine.record.steps}: {type(e).__name__}: {e}"
                    for rid in list(self._queues):
                        self._tell(rid, ("error", self.error), last=True)
                    continue
                if self.on_step is not None:
                    try:
                        self.on_step(self.engine, events)
                    except Exception as e:  # a watcher's bug must not stop the serving: it is dropped, and said
                        self.on_step, self.watch_error = None, f"on_step failed: {type(e).__name__}: {e}"
                for rid, ids in events.tokens.items():  # a request that finishes makes its last token in the step
                    if rid in events.finished:
                        self.answered[rid] = events.finished[rid]
                        self._tell(rid, ("finished", (ids, events.finished[rid])), last=True)
                    else:
                        self._tell(rid, ("tokens", ids))
        for rid in list(self._queues):  # the server is stopping: nobody waits forever
            self._tell(rid, ("error", "the server is stopping"), last=True)

    def _apply(self, command):
        if command[0] == "abort":
            rid = command[1]
            if self.engine.abort(rid):
                self.answered[rid] = "abort"
            self._queues.pop(rid, None)
            return
        _, c, loop, queue = command
        if self.error is not None:
            loop.call_soon_threadsafe(queue.put_nowait, ("error", self.error))
            return
        try:
            rid = self.engine.add_request(c.prompt_ids, c.max_tokens, temperature=c.temperature, top_p=c.top_p,
                                          seed=c.seed, stop=c.stop)
        except ValueError as e:  # checked before already; said to the client all the same
            loop.call_soon_threadsafe(queue.put_nowait, ("error", str(e)))
            return
        self._queues[rid] = (loop, queue)
        loop.call_soon_threadsafe(queue.put_nowait, ("added", rid))

    def _tell(self, rid: int, event: tuple, last: bool = False):
        if rid in self._queues:
            loop, queue = self._queues.pop(rid) if last else self._queues[rid]
            try:
                loop.call_soon_threadsafe(queue.put_nowait, event)
            except RuntimeError:  # its event loop is closed: the server stopped
                pass


@functools.cache
def _event_stream():
    """The response class of a streamed completion (fastapi is imported only when a server is built)."""
    from fastapi.responses import StreamingResponse

    class EventStream(StreamingResponse):
        """Server-sent events that abort their request however the stream ends (done, client gone, stopping)."""

        def __init__(self, chunks, on_close):
            super().__init__(chunks, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
            self.on_close = on_close

        async def __call__(self, scope, receive, send):
            try:
                await super().__call__(scope, receive, send)
            finally:
                self.on_close()

    return EventStream


def _error(e: ApiError):
    from fastapi.responses import JSONResponse
    return JSONResponse(e.body(), status_code=e.status)


def _answer_errors_as_openai_does(app):
    """Every error the app meets becomes an OpenAI-shaped JSON error: 404 / 405 naming what the server has, 500 for
    anything unexpected."""
    from starlette.exceptions import HTTPException

    @app.exception_handler(HTTPException)
    async def http_error(request, exc):  # 404 for an unknown path, 405 for a wrong method: OpenAI's shape too
        return _error(ApiError(f"{exc.detail}: {request.method} {request.url.path}; this server has GET /v1/models "
                               f"and POST /v1/completions", status=exc.status_code))

    @app.exception_handler(Exception)
    async def internal_error(request, exc):
        return _error(ApiError(f"internal error: {type(exc).__name__}: {exc}", status=500, kind="server_error"))


def build_app(loop_: EngineLoop, tokenizer, model_name: str = "lm"):
    """The FastAPI app: GET /v1/models and POST /v1/completions over ``loop_``'s engine."""
    from fastapi import FastAPI, Request

    engine = loop_.engine
    config, pool = engine.model.config, engine.pool
    app = FastAPI(title="KV Cache Lab", docs_url=None, redoc_url=None, openapi_url=None)
    _answer_errors_as_openai_does(app)
    started = int(time.time())

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": started,
                                            "owned_by": "kv-cache-lab", "max_model_len": config.max_seq_len}]}

    @app.post("/v1/completions")
    async def completions(request: Request):
        try:
            c = completion_request(await request.body(), model_name, tokenizer, config, pool.n_blocks,
                                   pool.block_size)
        except ApiError as e:
            return _error(e)
        queue = asyncio.Queue()
        loop_.submit(c, asyncio.get_running_loop(), queue)
        kind, value = await queue.get()
        if kind == "error":
            return _error(ApiError(value, status=400 if loop_.error is None else 500))
        rid, text = value, TextStream(tokenizer, c.stop)
        head = {"id": f"cmpl-{uuid.uuid4().hex[:24]}", "object": "text_completion", "created": int(time.time()),
                "model": model_name}
        if c.stream:
            return _event_stream()(_chunks(queue, text, head), lambda: loop_.abort(rid))
        try:
            return await _answer(request, queue, text, head, len(c.prompt_ids))
        finally:
            loop_.abort(rid)  # nothing to do when it finished; frees its blocks when its client went away

    return app


def _choice(text: str, reason: str | None) -> dict:
    return {"text": text, "index": 0, "logprobs": None, "finish_reason": reason}


async def _chunks(queue, text: TextStream, head: dict):
    """The SSE lines of a streamed completion: one chunk per token (or what is safe to show of it), a last one
    with the finish reason, then [DONE]; an error chunk if the engine failed or the server stops."""
    while True:
        kind, value = await queue.get()
        if kind == "tokens":
            piece = text.push(value)
            if piece:
                yield f"data: {json.dumps(head | {'choices': [_choice(piece, None)]}, ensure_ascii=False)}\n\n"
        elif kind == "finished":
            last = head | {"choices": [_choice(text.finish(*value), value[1])]}
            yield f"data: {json.dumps(last, ensure_ascii=False)}\n\n"
            yield "data: [DONE]\n\n"
            return
        else:
            yield f"data: {json.dumps(ApiError(value, status=500, kind='server_error').body())}\n\n"
            return


async def _answer(request, queue, text: TextStream, head: dict, prompt_tokens: int):
    """A whole completion (stream: false), or None when the client went away before it was done."""
    pieces = []
    while True:
        try:
            kind, value = await asyncio.wait_for(queue.get(), timeout=1.0)
        except asyncio.TimeoutError:
            if await request.is_disconnected():
                return None
            continue
        if kind == "tokens":
            pieces.append(text.push(value))
        elif kind == "finished":
            pieces.append(text.finish(*value))
            n = len(text.ids)
            return head | {"choices": [_choice("".join(pieces), value[1])],
                           "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n,
                                     "total_tokens": prompt_tokens + n}}
        else:
            return _error(ApiError(value, status=500, kind="server_error"))


class Server:
    """An OpenAI-compatible server on 127.0.0.1 running in background threads (see the module's docstring):
    ``url`` ("http://127.0.0.1:PORT"), ``engine``, ``stop()``; a context manager that stops it on exit."""

    def __init__(self, model, tokenizer, port: int = 0, model_name: str = "lm", on_step=None, **engine_settings):
        engine_settings = dict(SERVER_ENGINE) | engine_settings
        try:
            import uvicorn
        except ImportError as e:
            raise ImportError(f"the OpenAI-compatible server needs FastAPI and uvicorn ({e}); run make setup, or "
                              f"pip install the fastapi and uvicorn lines of requirements.txt") from None
        port = checks.integer(port, "port", 0, 65535, allowed="0 (a free port) or an integer from 1 to 65535")
        model_name = checks.text(model_name, "model_name")
        self.engine = Engine(model, tokenizer, eos_id=tokenizer.eos_id, **engine_settings)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((HOST, port))
        except OSError as e:
            sock.close()
            raise OSError(f"cannot serve on {HOST}:{port} ({e}); choose another port, or port=0 for a free one") from None
        self.port = sock.getsockname()[1]
        self.url = f"http://{HOST}:{self.port}"
        self.loop = EngineLoop(self.engine, on_step)
        config = uvicorn.Config(build_app(self.loop, tokenizer, model_name), log_level="warning", access_log=False,
                                lifespan="off", timeout_graceful_shutdown=5)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, name="kvlab-http",
                                        daemon=True)
        self._sock = sock
        self._thread.start()
        while not self._server.started:  # up in a fraction of a second
            if not self._thread.is_alive():
                self.loop.stop()
                raise RuntimeError(f"the server on {self.url} did not start; see the log above")
            time.sleep(0.01)

    def stop(self):
        """Stop answering, end the engine's thread (open streams get an error chunk) and free the port."""
        if self._thread.is_alive():
            self.loop.stop()
            self._server.should_exit = True
            self._thread.join()
        self._sock.close()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        return f"Server({self.url}, {'running' if self._thread.is_alive() else 'stopped'})"


def start_server(model, tokenizer, port: int = 0, model_name: str = "lm", on_step=None, **engine_settings) -> Server:
    """An OpenAI-compatible server for ``model`` on 127.0.0.1:``port`` (0: a free one), running in the background
    until ``.stop()`` (or the end of a ``with`` block). ``engine_settings`` go to the ``Engine`` (max_batch,
    n_blocks, block_size, prefix_cache, max_num_batched_tokens, ...; SERVER_ENGINE unless given: 16 rows and
    prefix caching on, as vLLM has it); eos is the tokenizer's. ``on_step(engine, events)``: called after every
    engine step, in the engine's thread (``EngineLoop``)."""
    return Server(model, tokenizer, port, model_name, on_step, **engine_settings)
