"""Notebook 10's client, from a terminal: concurrent completions from the official ``openai`` package against any
OpenAI-compatible server — the course's (``make serve``) or a real ``vllm serve`` (``make gpu-check`` runs it there
when vLLM is installed)::

    python -m tools.openai_client --url http://127.0.0.1:8000/v1 --model lm
    python -m tools.openai_client --url http://127.0.0.1:8001/v1 --model Qwen/Qwen2.5-0.5B-Instruct --wait 300

It waits (``--wait`` seconds at most) until the server lists the model, sends the prompts at once from one thread
each, greedy (temperature 0), and prints one line per prompt with its answer and the seconds it took; the exit
status is 1 when the server never came up or a request failed.
"""
from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor

PROMPTS = ("ROMEO.\n", "PORTIA.\n", "KING HENRY.\n", "SECOND CITIZEN.\n", "静夜思\n李白\n", "春晓\n孟浩然\n",
           "月下独酌\n李白\n", "相思\n王维\n")  # notebook 10's


def wait_for(client, model: str, seconds: float) -> None:
    """Until the server lists ``model`` (a server still loading its weights refuses connections)."""
    deadline, last = time.monotonic() + seconds, None
    while time.monotonic() < deadline:
        try:
            names = [m.id for m in client.models.list()]
        except Exception as e:  # not up yet: connection refused, 503 while loading
            last = e
        else:
            if model in names:
                return
            raise SystemExit(f"the server at {client.base_url} serves {names}, not {model!r}; give --model one of them")
        time.sleep(1.0)
    raise SystemExit(f"no server answered at {client.base_url} within {seconds:g} s (last error: {last})")


def ask_all(client, model: str, prompts=PROMPTS, max_tokens: int = 24) -> list[tuple[str, str, float]]:
    """(prompt, answer, seconds) for each prompt, all sent at once, greedy."""
    def ask(prompt):
        t0 = time.perf_counter()
        reply = client.completions.create(model=model, prompt=prompt, max_tokens=max_tokens, temperature=0)
        return prompt, reply.choices[0].text, time.perf_counter() - t0

    with ThreadPoolExecutor(len(prompts)) as pool:
        return list(pool.map(ask, prompts))


def main(argv=None) -> int:
    import openai

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8000/v1", help="the server's base URL, ending in /v1")
    p.add_argument("--model", default="lm", help="the model name the server lists")
    p.add_argument("--wait", type=float, default=30, help="seconds to wait for the server to come up")
    p.add_argument("--max-tokens", type=int, default=24)
    args = p.parse_args(argv)
    client = openai.OpenAI(base_url=args.url, api_key="none", max_retries=0)
    wait_for(client, args.model, args.wait)
    try:
        answers = ask_all(client, args.model, max_tokens=args.max_tokens)
    except openai.OpenAIError as e:
        print(f"a request failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    for prompt, answer, seconds in answers:
        print(f"{prompt!r:>22} -> {answer!r}  ({seconds:.2f} s)")
    print(f"{len(answers)} concurrent requests to {args.model} at {args.url}: all answered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
