"""``make serve``: the course's real model behind an OpenAI-compatible endpoint on 127.0.0.1 until Ctrl-C
(``lib.serving.start_server``; docs/serving.md).

    python -m tools.serve [--port 8000] [--model lm] [--max-batch 16]
"""
from __future__ import annotations

import argparse
import threading

import lib
from lib.serving import start_server


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tools.serve", description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (0: a free one); default 8000")
    ap.add_argument("--model", default="lm", help="a demo model (lib.load_demo): lm (default), chat, ...")
    ap.add_argument("--max-batch", type=int, default=16, help="requests in one batch at most; default 16")
    args = ap.parse_args(argv)
    model, tokenizer = lib.load_demo(args.model)
    with start_server(model, tokenizer, port=args.port, model_name=args.model, max_batch=args.max_batch) as server:
        print(f"serving {args.model!r} at {server.url}/v1 (OpenAI-compatible: GET /v1/models, POST /v1/completions)")
        print(f"  curl {server.url}/v1/completions -H 'Content-Type: application/json' "
              f"-d '{{\"model\": \"{args.model}\", \"prompt\": \"ROMEO.\\n\", \"max_tokens\": 32, \"temperature\": 0}}'")
        print("Ctrl-C stops it.", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print("stopping")


if __name__ == "__main__":
    main()
