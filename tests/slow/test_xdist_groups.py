"""Under `-n 2` the tests of one xdist_group run on one worker: those marked `ray` (one local Ray at a
time), those marked `jaxmarl` (each env compiled once) and those of a module with a module-scoped
fixture (built once); tests/conftest.py adds the groups. pytest 9.2 broke this silently with
pytest-xdist 3.8 (pytest-xdist#1386): both workers ran Ray tests at once and each built the module
fixtures (hence the test extra's pytest < 9.2)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.helpers import ROOT

CONFTEST = "from tests.conftest import pytest_collection_modifyitems  # noqa: F401  (the suite's own hook)\n"
SLEEPS = "\n\n@pytest.mark.parametrize('i', range({n}))\ndef test_x(i{arg}):\n    time.sleep(0.2)\n"
FILES = {
    "test_ray_marked.py": "import time\nimport pytest\n\npytestmark = pytest.mark.ray\n" + SLEEPS.format(n=6, arg=""),
    "test_jax_marked.py": "import time\nimport pytest\n\npytestmark = pytest.mark.jaxmarl\n"
                          + SLEEPS.format(n=6, arg=""),
    "test_shared.py": "import time\nimport pytest\n\n\n@pytest.fixture(scope='module')\ndef built():\n    return 1\n"
                      + SLEEPS.format(n=6, arg=", built"),
    # more free work than the three groups' 3.6 s, so the worker that took two groups still gets some
    "test_free.py": "import time\nimport pytest\n" + SLEEPS.format(n=24, arg=""),
}


def test_grouped_tests_run_on_one_worker_and_the_others_spread(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
                           "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestUnknownMarkWarning", "."],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ran: dict[str, set[str]] = {}
    for worker, nodeid in re.findall(r"^\[(gw\d)\] \[ *\d+%\] PASSED (\S+)", proc.stdout, re.M):
        ran.setdefault(nodeid.split("::")[0], set()).add(worker)
    assert set(ran) == set(FILES), proc.stdout[-3000:]
    assert len(ran["test_ray_marked.py"]) == 1 and len(ran["test_shared.py"]) == 1, ran
    assert len(ran["test_jax_marked.py"]) == 1, ran      # JaxMARL modules: each env compiled by one worker
    assert len(ran["test_free.py"]) == 2, ran           # the check can tell: ungrouped tests spread
