"""Serving many requests at once: how KV memory is handed out decides how many fit, and how requests are
batched decides how busy the model stays.

    scheduler.py   one policy for both halves, in nano-vllm's shape: a ``Sequence`` per request in flight;
                   ``Scheduler.schedule()`` gives a step's batch (first come, first served admission, prefill
                   chunks and decodes under a token budget; when memory runs out, the most recently admitted
                   running request is preempted, by recompute or by swap, each counted) and
                   ``Scheduler.postprocess(batch, new_tokens)`` appends, finishes and frees
    memory.py      part 1, a simulation (lengths only, no model): a seeded stream of requests (or one with the
                   lengths of real text, text_stream) served from a fixed KV budget under four allocation
                   policies ("max", "pow2", "oracle", "paged"), every step's memory counted: tokens, reserved
                   for later, reserved never to be used, free
    engine.py      part 2, real serving on a model, one step at a time (Engine): requests added whenever they
                   arrive, one shared PagedKVPool, each step one forward_paged pass over the scheduler's batch,
                   "static" vs "continuous" batching; every step's events (tokens, admitted, preempted,
                   finished) and a snapshot to draw (queues, blocks by owner, the batch, the texts)
    batching.py    serve: the engine stepped over requests that all arrived at time 0; demo_requests for the
                   toys, text_requests (held-out text) for the real model
    arrivals.py    requests that arrive over time (a seeded Poisson process; held-out prompts, a shared system
                   prompt) and rate_sweep: throughput against TTFT / TPOT and the queue, static vs continuous,
                   on a measured clock or one priced by the roofline for a reference GPU (predicted)
    openai_server.py  the engine behind an OpenAI-compatible HTTP endpoint on 127.0.0.1 (FastAPI + uvicorn):
                   GET /v1/models, POST /v1/completions (streamed or not); start_server(model, tokenizer) runs it
                   in the background of a notebook, ``make serve`` from a terminal
    latency.py     prefill vs decode as a user feels them: time to first token and time per output token,
                   measured on a real model and predicted by the roofline for a reference GPU; ``pass_seconds``,
                   the roofline price of a run's forward passes (the simulation's and serve's)
    tradeoffs.py   what the choices trade: the block size (empty slots vs block-table entries), swap vs
                   recompute (bytes over the host link vs prefill FLOPs)

When the paged pool runs out, a running request is preempted, in one of the two ways the vLLM paper compared
(``preemption=``): ``"recompute"`` frees its blocks and prefills its prompt and every token it had made again
when it comes back (counted: ``recomputed_tokens``); ``"swap"`` copies its blocks to CPU memory and back
(counted: ``swapped_out_blocks``, ``swapped_in_blocks``, ``peak_cpu_blocks``). vLLM today (the V1 engine)
recomputes only. ``serve(..., max_num_batched_tokens=)`` feeds a long prompt in chunks beside the running
decodes (chunked prefill). Every name is importable from here (``lib.serving.simulate``, ``lib.serving.serve``, ...).
"""
from .batching import ServeRequest, demo_requests, serve, text_requests
from .engine import FINISH_REASONS, Engine, ServeResult, Snapshot, StepEvents
from .memory import (CONTIGUOUS, POLICIES, ContiguousAllocator, SimRequest, SimResult, compare_policies, request_stream,
                     reservation, simulate, text_stream)
from .arrivals import CLOCKS, Arrival, LoadPoint, arrivals, poisson_arrivals, rate_sweep, run_arrivals
from .openai_server import Server, start_server
from .scheduler import PREEMPTIONS, REQUEST_BYTES, Batch, Scheduler, SchedulerCounts, Sequence, Status
from .tradeoffs import HOST_LINK_GBS, BlockSizeCost, block_size_tradeoff, preemption_seconds
from .latency import Latency, measure_latency, pass_seconds, predicted_latency

__all__ = [
    "POLICIES", "CONTIGUOUS", "PREEMPTIONS", "HOST_LINK_GBS", "REQUEST_BYTES",
    "Scheduler", "SchedulerCounts", "Sequence", "Status", "Batch",
    "SimRequest", "request_stream", "text_stream", "reservation", "ContiguousAllocator", "SimResult", "simulate",
    "compare_policies",
    "ServeRequest", "demo_requests", "text_requests", "ServeResult", "serve",
    "Engine", "StepEvents", "Snapshot", "FINISH_REASONS",
    "Server", "start_server",
    "CLOCKS", "Arrival", "LoadPoint", "poisson_arrivals", "arrivals", "run_arrivals", "rate_sweep",
    "BlockSizeCost", "block_size_tradeoff", "preemption_seconds",
    "Latency", "measure_latency", "predicted_latency", "pass_seconds",
]
