"""benchmarks/bench_vs_torch.py without PyTorch: one line, non-zero exit (issue 10)."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_vs_torch.py"


def test_without_torch_is_one_line():
    code = ("import runpy, sys; sys.modules['torch'] = None; sys.argv = ['bench_vs_torch.py', '--shapes', '1x8']; "
            f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines() == ["bench_vs_torch: error: needs PyTorch (pip install torch==2.13.0, "
                                               "the CPU wheel)"]
