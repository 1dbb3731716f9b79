"""benchmarks/bench_decode_vs_hf.py without PyTorch or transformers: one line, non-zero exit."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_decode_vs_hf.py"


def test_without_torch_is_one_line():
    code = ("import runpy, sys; sys.modules['torch'] = None; sys.argv = ['bench_decode_vs_hf.py', '--shapes', '1x64']; "
            f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines() == ["bench_decode_vs_hf: error: needs PyTorch and transformers "
                                               "(pip install torch==2.13.0 'transformers>=4.40', the CPU wheel)"]
