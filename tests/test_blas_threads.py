"""numpy's BLAS runs on one thread in citebot's processes unless the environment says
otherwise (bot/__init__.py; benchmarks/blas_threads.py measures why)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO

PROBE = ("import bot, numpy, threadpoolctl, json, os; print(json.dumps([os.environ['OPENBLAS_NUM_THREADS'],"
         " [i['num_threads'] for i in threadpoolctl.threadpool_info() if i['internal_api'] == 'openblas']]))")


def probe(**env: str) -> list:
    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    r = subprocess.run([sys.executable, "-c", PROBE], env={**base, **env}, cwd=REPO,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def test_a_citebot_process_runs_numpys_blas_on_one_thread():
    assert probe() == ["1", [1]]


def test_a_thread_count_set_by_the_operator_is_kept():
    assert probe(OPENBLAS_NUM_THREADS="2") == ["2", [2]]
