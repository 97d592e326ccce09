"""How long each notebook takes a learner, measured from the notebook itself: ``python -m tools.pacing`` prints the
estimate of every notebook; ``--write`` puts it into each notebook's first cell (``**Time:** about N minutes``), the
map in 00 (its time column) and the Chinese translation files, so that the three always say the same number.

    minutes = prose words / WORDS_PER_MINUTE  +  words in tables / (3 × WORDS_PER_MINUTE)   (a table is scanned)
            + code cells × CODE_CELL_MINUTES  +  live widgets × WIDGET_MINUTES  +  plotly figures × PLOTLY_MINUTES
            + the notebook's own run time (``tools.runner`` stores it in the notebook's metadata)
    rounded up to 5 minutes (reading and running), then

    exercises = build-its × BUILD_IT_MINUTES  +  predictions × PREDICTION_MINUTES      rounded up to 5 minutes

A build-it is a code cell where the learner writes a piece and ``lib.exercises.check`` grades it (its worked
solution, a collapsed cell, is not counted again); a prediction is a cell that ends in ``lib.exercises.reveal``
(the learner writes a guess first). The notebook's time is the sum of the two; 00's map adds every notebook's time
into a total (``**In all:**``) and the README states the range and the total, so the four say one thing.

The English edition counts its words. The Chinese edition counts what its own translation file says: Chinese
characters at CHARS_PER_MINUTE (the Latin words among them, code names and terms such as KV or GQA, at the English
pace), its own code cells, widgets and figures, and its own run time::

    minutes = CJK characters / CHARS_PER_MINUTE + characters in tables / (3 × CHARS_PER_MINUTE)
            + Latin words / WORDS_PER_MINUTE + ...   (the rest as above)

The pace is stated in every notebook's first cell, so a reader can rescale it to their own.
"""
from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from pathlib import Path

from . import NOTEBOOKS, all_notebooks

WORDS_PER_MINUTE = 130  # technical prose read with care (general prose is read at 200-250)
# Chinese technical prose read with care: 400 characters a minute, the middle of the 300-500 usually quoted for
# technical reading. General Chinese text is read at about 500-700 characters a minute, and the English pace above
# is about 0.55-0.65 of its general rate: the same share gives 300-450. Not the English count rescaled: the
# editions' prose has 1.4-1.5 characters per English word, and a native reader reads the denser text faster.
CHARS_PER_MINUTE = 400
CJK = re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf]")
CODE_CELL_MINUTES = 0.5  # read a code cell, run it, look at what it printed or drew
WIDGET_MINUTES = 3.0  # play with a live widget
PLOTLY_MINUTES = 1.0  # step through an exported plotly figure
# A first-timer's exercise work. Not timed on learners (no learner was timed for this estimate): a build-it is a
# 5-15 line function written against hidden cases, with a hint or two, so 10 minutes; a prediction is one number
# thought through and written down, so a minute. Stated in every first cell, so a reader can rescale them.
BUILD_IT_MINUTES = 10.0
PREDICTION_MINUTES = 1.0
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
PLOTLY_MIME = "application/vnd.plotly.v1+json"
RUN_KEY = "kvlab_run_seconds"  # notebook metadata written by tools.runner

EN_TIME = re.compile(r"\*\*Time:\*\* (?:about )?(\d+) minutes[^\n]*?(?=\s\*\*You should|$|\n)", re.M)
ZH_TIME = re.compile(r"\*\*时间：\*\*[^\n]*?(?:约 )?(\d+) 分钟[^\n]*?(?=\*\*预备知识|$|\n)", re.M)
WORD = re.compile(r"[A-Za-z0-9][\w'’-]*")



def _code_counts(nb) -> dict:
    """What a notebook's code asks of a learner, from its cells and stored outputs: code cells, live widgets, plotly
    figures, build-its (cells that grade the learner's function with ``exercises.check``, not the collapsed worked
    solutions) and predictions (cells that ``reveal`` an answer): ``Pace``'s fields of those names."""
    n = dict(code_cells=0, widgets=0, plotly=0, build_its=0, predictions=0)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        n["code_cells"] += 1
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            n["widgets"] += WIDGET_MIME in data
            n["plotly"] += PLOTLY_MIME in data
        hidden = cell.metadata.get("jupyter", {}).get("source_hidden", False)
        n["build_its"] += "exercises.check(" in cell.source and not hidden
        n["predictions"] += "reveal(" in cell.source
    return n

@dataclass(frozen=True)
class Pace:
    name: str
    prose_words: int
    table_words: int
    code_cells: int
    widgets: int
    plotly: int
    run_seconds: float
    prose_chars: int = 0  # Chinese characters (the Chinese edition)
    table_chars: int = 0
    build_its: int = 0
    predictions: int = 0

    @property
    def minutes(self) -> int:
        """Reading and running, and the exercises: what the first cell and the map state."""
        return self.reading_minutes + self.exercise_minutes

    @property
    def exercise_minutes(self) -> int:
        raw = self.build_its * BUILD_IT_MINUTES + self.predictions * PREDICTION_MINUTES
        return 5 * math.ceil(raw / 5)

    @property
    def reading_minutes(self) -> int:
        raw = (self.prose_words / WORDS_PER_MINUTE + self.table_words / (3 * WORDS_PER_MINUTE)
               + self.prose_chars / CHARS_PER_MINUTE + self.table_chars / (3 * CHARS_PER_MINUTE)
               + self.code_cells * CODE_CELL_MINUTES + self.widgets * WIDGET_MINUTES + self.plotly * PLOTLY_MINUTES
               + self.run_seconds / 60)
        return 5 * max(1, math.ceil(raw / 5))

    def run_text(self, lang: str = "en") -> str:
        s = self.run_seconds
        if lang == "zh":
            return "不到一分钟" if s < 60 else f"约 {round(s / 60)} 分钟"
        return "under a minute" if s < 60 else f"about {round(s / 60)} minute{'s' if round(s / 60) > 1 else ''}"

    def sentence(self, lang: str = "en") -> str:
        """The first cell's time line (without the following "You should know" part)."""
        if lang == "zh":
            how = (f"按每分钟读 {CHARS_PER_MINUTE} 个汉字、每个代码单元连同输出约半分钟、每个交互控件约 "
                   f"{WIDGET_MINUTES:.0f} 分钟估算；笔记本本身运行{self.run_text('zh')}")
            if not self.exercise_minutes:
                return f"**时间：** 约 {self.minutes} 分钟（{how}）。"
            work = "、".join(x for x in (f"{self.build_its} 个动手实现" if self.build_its else "",
                                         f"{self.predictions} 个预测" if self.predictions else "") if x)
            # short sentences, as the edition's prose (tests/test_zh_style.py): the total, the reading, the exercises
            return (f"**时间：** 约 {self.minutes} 分钟。阅读和运行约 {self.reading_minutes} 分钟，{how}。{work}约 "
                    f"{self.exercise_minutes} 分钟，每个动手实现按 {BUILD_IT_MINUTES:.0f} 分钟、每个预测按 "
                    f"{PREDICTION_MINUTES:.0f} 分钟计。")
        how = (f"read at {WORDS_PER_MINUTE} words a minute, half a minute per code cell and its output, "
               f"{WIDGET_MINUTES:.0f} per live widget; the notebook itself runs in {self.run_text()}")
        if not self.exercise_minutes:
            return f"**Time:** about {self.minutes} minutes ({how})."
        work = " and ".join(x for x in (_count(self.build_its, "build-it exercise"),
                                        _count(self.predictions, "prediction")) if x)
        return (f"**Time:** about {self.minutes} minutes: {self.reading_minutes} to read and run ({how}), "
                f"{self.exercise_minutes} for its {work} ({BUILD_IT_MINUTES:.0f} minutes a build-it, "
                f"{PREDICTION_MINUTES:.0f} a prediction).")


def _count(n: int, what: str) -> str:
    return "" if not n else f"{n} {what}{'s' if n > 1 else ''}"


def pace(path: Path) -> Pace:
    """The counts of one English notebook."""
    import nbformat
    nb = nbformat.read(path, as_version=4)
    prose = table = 0
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            text = cell.source
            if i == 0:  # the time line does not count itself
                text = EN_TIME.sub("", text)
            for line in text.splitlines():
                n = len(WORD.findall(line))
                if line.lstrip().startswith("|"):
                    table += n
                else:
                    prose += n
    return Pace(path.stem, prose, table, run_seconds=float(nb.metadata.get(RUN_KEY, 0.0)), **_code_counts(nb))


def paces() -> dict[str, Pace]:
    return {p.stem: pace(p) for p in all_notebooks()}


def pace_zh(name: str) -> Pace:
    """The counts of one Chinese notebook: the Chinese characters and Latin words of its translation file's prose
    (its markdown blocks; the first cell's time line aside), and its own notebook's code cells, widgets, figures and
    run time (the English one's where the Chinese notebook is not built yet)."""
    import nbformat
    from . import edition
    prose = table = prose_chars = table_chars = 0
    blocks = edition.read_translations("zh", name)
    built = NOTEBOOKS / "zh" / f"{name}.ipynb"
    nb = nbformat.read(built if built.is_file() else NOTEBOOKS / f"{name}.ipynb", as_version=4)
    first = nb.cells[0].id if nb.cells else None
    for cid, (_, text) in blocks.items():
        if cid == first:
            text = ZH_TIME.sub("", text)
        text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
        for line in text.splitlines():
            chars, words = len(CJK.findall(line)), len(WORD.findall(line))
            if line.lstrip().startswith("|"):
                table, table_chars = table + words, table_chars + chars
            else:
                prose, prose_chars = prose + words, prose_chars + chars
    english = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    run = float(nb.metadata.get(RUN_KEY, english.metadata.get(RUN_KEY, 0.0)))
    return Pace(name, prose, table, run_seconds=run, prose_chars=prose_chars, table_chars=table_chars,
                **_code_counts(nb))


def paces_zh() -> dict[str, Pace]:
    from . import edition
    return {p.stem: pace_zh(p.stem) for p in all_notebooks() if edition.source_path("zh", p.stem).is_file()}


def stated(path: Path, lang: str = "en") -> int | None:
    """The minutes a notebook's first cell states (English notebook or Chinese translation file)."""
    text = path.read_text(encoding="utf-8")
    m = (ZH_TIME if lang == "zh" else EN_TIME).search(text if lang == "zh" else _first_cell(path))
    return int(m.group(1)) if m else None


def _first_cell(path: Path) -> str:
    import nbformat
    return nbformat.read(path, as_version=4).cells[0].source


def map_minutes(lang: str = "en") -> dict[str, int]:
    """The time column of the map in 00 (its first markdown table with a notebook link per row)."""
    if lang == "zh":
        text = (NOTEBOOKS / "zh" / "src" / "00_index.md").read_text(encoding="utf-8")
        unit = "分钟"
    else:
        import nbformat
        text = "\n".join(c.source for c in nbformat.read(NOTEBOOKS / "00_index.ipynb", as_version=4).cells)
        unit = "min"
    out = {}
    for m in re.finditer(rf"^\| (\d\d) \| \[[^\]]*\]\((\d\d_\w+)\.ipynb\)[^\n]*?\| (\d+) {unit} \|", text, re.M):
        out[m.group(2)] = int(m.group(3))
    return out


def write() -> list[str]:
    """Put every notebook's estimate into its first cell, the map in 00 (both editions) and the Chinese
    translation files. A translation that was current before keeps being current (its time line is rewritten and
    its English hash moved on); a stale one stays stale, for its translator to see. Returns what changed."""
    import nbformat
    from . import edition
    est, est_zh = paces(), paces_zh()
    changed = []
    for name, p in est.items():
        path = NOTEBOOKS / f"{name}.ipynb"
        nb = nbformat.read(path, as_version=4)
        moved = {}  # cell id -> (hash before, hash after)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "markdown":
                continue
            new = EN_TIME.sub(p.sentence().replace("\\", "\\\\"), cell.source, count=1) if i == 0 else cell.source
            if name == "00_index":
                new = EN_TOTAL.sub(total_sentence(est).replace("\\", "\\\\"), _set_map(new, est, "min"), count=1)
            if new != cell.source:
                moved[cell.id] = (edition.english_hash(cell.source), edition.english_hash(new))
                cell.source = new
        if moved:
            nbformat.write(nb, path)
            changed.append(f"{name}: {p.minutes} min")
        if name in est_zh and _write_zh(name, nb, est_zh[name], est_zh, moved, edition):
            changed.append(f"zh {name}: {est_zh[name].minutes} 分钟")
    return changed + _write_readmes(est, est_zh)


EN_TOTAL = re.compile(r"^\*\*In all:\*\* [^\n]*$", re.M)
ZH_TOTAL = re.compile(r"^\*\*合计：\*\*[^\n]*$", re.M)
EN_README = re.compile(r"Fourteen notebooks, \d+ to \d+ minutes each \([^;]*;")
ZH_README = re.compile(r"共 14 个笔记本，每个 \d+ 到 \d+ 分钟（[^，]*，")
README = NOTEBOOKS.parent / "README.md"
README_ZH = NOTEBOOKS.parent / "README.zh.md"


def hours(minutes: int, lang: str = "en") -> str:
    h, m = divmod(minutes, 60)
    if lang == "zh":
        return f"{h} 小时 {m} 分钟" if m else f"{h} 小时"
    return f"{h} h {m} min" if m else f"{h} h"


def total_sentence(est: dict[str, Pace], lang: str = "en") -> str:
    """00's line under the map: every notebook's time added up, and how much of it is the exercises."""
    whole = sum(p.minutes for p in est.values())
    read = sum(p.reading_minutes for p in est.values())
    build, guess = sum(p.build_its for p in est.values()), sum(p.predictions for p in est.values())
    if lang == "zh":
        return (f"**合计：** {len(est)} 个笔记本约 {hours(whole, 'zh')}：阅读和运行约 {hours(read, 'zh')}，"
                f"{build} 个动手实现和 {guess} 个预测约 {hours(whole - read, 'zh')}（每个笔记本的时间见上表）。")
    return (f"**In all:** about {hours(whole)} for the {len(est)} notebooks: {hours(read)} to read and run, "
            f"{hours(whole - read)} for the {build} build-it exercises and {guess} predictions (each notebook's "
            f"time is in the table).")


def readme_phrase(est: dict[str, Pace], lang: str = "en") -> str:
    low, high = min(p.minutes for p in est.values()), max(p.minutes for p in est.values())
    whole = sum(p.minutes for p in est.values())
    if lang == "zh":
        return f"共 14 个笔记本，每个 {low} 到 {high} 分钟（连同练习合计约 {hours(whole, 'zh')}，"
    return f"Fourteen notebooks, {low} to {high} minutes each (about {hours(whole)} in all with the exercises;"


def stated_total(lang: str = "en") -> tuple[str | None, str | None]:
    """(00's ``In all`` line, the README's phrase) as written now (None where missing)."""
    if lang == "zh":
        m = ZH_TOTAL.search((NOTEBOOKS / "zh" / "src" / "00_index.md").read_text(encoding="utf-8"))
        r = ZH_README.search(README_ZH.read_text(encoding="utf-8"))
    else:
        import nbformat
        text = "\n".join(c.source for c in nbformat.read(NOTEBOOKS / "00_index.ipynb", as_version=4).cells)
        m, r = EN_TOTAL.search(text), EN_README.search(README.read_text(encoding="utf-8"))
    return (m.group(0) if m else None), (r.group(0) if r else None)


def _write_readmes(est: dict[str, Pace], est_zh: dict[str, Pace]) -> list[str]:
    changed = []
    for path, pattern, phrase in ((README, EN_README, readme_phrase(est)),
                                  (README_ZH, ZH_README, readme_phrase(est_zh, "zh"))):
        text = path.read_text(encoding="utf-8")
        new = pattern.sub(phrase, text, count=1)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(f"{path.name}: {phrase}")
    return changed


def _set_map(text: str, est: dict[str, Pace], unit: str) -> str:
    def one(m):
        p = est.get(m.group(2))
        return m.group(0) if p is None else f"{m.group(1)}{p.minutes} {unit} |"
    return re.sub(rf"^(\| \d\d \| \[[^\]]*\]\((\d\d_\w+)\.ipynb\)[^\n]*?\| )\d+ {unit} \|", one, text, flags=re.M)


def _write_zh(name: str, nb, p: Pace, est: dict[str, Pace], moved: dict, edition) -> bool:
    """The Chinese first cell's time line and 00's map, from the Chinese estimates ``est``; a block whose English
    cell moved follows it (its hash) if it was current. Returns whether the file changed."""
    path = edition.source_path("zh", name)
    if not path.is_file():
        return False
    tr = edition.read_translations("zh", name)
    old_text = text = path.read_text(encoding="utf-8")
    first = nb.cells[0].id
    current = {c.id: edition.english_hash(c.source) for c in nb.cells if c.cell_type == "markdown"}
    for cid in dict.fromkeys([first, *moved, *(current if name == "00_index" else ())]):
        before, after = moved.get(cid, (current.get(cid), current.get(cid)))
        if cid not in tr or tr[cid][0] != before:
            continue  # missing or already stale: leave it for the translator
        body = tr[cid][1]
        new = ZH_TIME.sub(p.sentence("zh"), body, count=1) if cid == first else body
        if name == "00_index":
            new = ZH_TOTAL.sub(total_sentence(est, "zh"), _set_map(new, est, "分钟"), count=1)
        text = text.replace(f"<!-- cell {cid} | en {before} -->\n{body}", f"<!-- cell {cid} | en {after} -->\n{new}", 1)
    if text == old_text:
        return False
    path.write_text(text, encoding="utf-8")
    try:
        edition.refresh_markdown("zh", name)  # the committed Chinese notebook says what its translation now says
    except ValueError:
        pass  # a stale translation elsewhere in the file: the drift test names it
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="write the estimates into the notebooks and the map")
    args = ap.parse_args(argv)
    if args.write:
        for line in write() or ["every notebook already states its estimate"]:
            print(line)
    for name, p in paces().items():
        print(f"{name:32s} {p.minutes:3d} min  prose {p.prose_words:5d} words, tables {p.table_words:4d}, "
              f"{p.code_cells:2d} code cells, {p.widgets} widgets, {p.plotly} plotly, runs {p.run_seconds:.0f} s")
    for name, p in paces_zh().items():
        print(f"zh {name:29s} {p.minutes:3d} min  prose {p.prose_chars:5d} 字 + {p.prose_words:4d} words, tables "
              f"{p.table_chars:4d} 字, {p.code_cells:2d} code cells, {p.widgets} widgets, runs {p.run_seconds:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
