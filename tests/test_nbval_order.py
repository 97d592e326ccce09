"""The root conftest hands nbval the longest notebooks first (``make test-notebooks`` runs two workers that take
whole notebooks, ``--dist loadfile``): longest first keeps one worker from finishing a long notebook alone at the
end. Each notebook's cells stay together and in their order."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_nbval_collects_the_longest_notebooks_first_with_each_notebooks_cells_in_order():
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--nbval", "notebooks",
                          "--nbval-current-env", "-p", "no:cacheprovider", "-p", "no:xdist"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    ids = [line for line in out.stdout.splitlines() if ".ipynb::" in line]
    files = [i.split("::")[0] for i in ids]
    order = list(dict.fromkeys(files))
    assert len(order) == len(set(files)) >= 2, "a notebook's cells were split apart"
    seconds = [json.loads((ROOT / f).read_text(encoding="utf-8"))["metadata"]["kvlab_run_seconds"] for f in order]
    assert seconds == sorted(seconds, reverse=True), list(zip(order, seconds))
    for f in order:  # nbval names a notebook's cells "Cell 0", "Cell 1", ...: in that order
        cells = [int(i.rsplit(" ", 1)[1]) for i in ids if i.startswith(f + "::")]
        assert cells == sorted(cells), f
