"""bench/kernels.py: says so and exits 0 without CUDA; its CPU smoke mode runs and writes results."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
pytest.importorskip("rich")

pytestmark = pytest.mark.kernels

BENCH = Path(__file__).resolve().parents[2] / "bench" / "kernels.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_without_cuda_says_so_and_exits_0(capsys):
    spec = importlib.util.spec_from_file_location("bench_kernels", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main([]) == 0
    assert "No CUDA device" in capsys.readouterr().out


def test_cpu_smoke_run_writes_table_and_environment(tmp_path):
    result = _run("--device", "cpu", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    (md,) = tmp_path.glob("kernels-*.md")
    (js,) = tmp_path.glob("kernels-*.json")
    text = md.read_text()
    for word in ("prefill_attention", "decode_attention", "kv_store", "torch", "triton", "flash-attn"):
        assert word in text
    data = json.loads(js.read_text())
    assert {r["impl"] for r in data["rows"]} == {"triton", "torch"}
    assert all(r["median_ms"] > 0 for r in data["rows"])
