"""pytest's root conftest: under nbval (``--nbval``, ``make test-notebooks``), the notebooks' kernels draw no progress
bar (``lib.progress``: a long cell's bar is for a learner watching; the stored outputs that nbval compares have none)."""
import os


def pytest_configure(config):
    if config.getoption("nbval", default=False) or config.getoption("nbval_lax", default=False):
        os.environ["KVLAB_PROGRESS"] = "0"  # lib.progress.FORCE; the kernels nbval starts inherit it
