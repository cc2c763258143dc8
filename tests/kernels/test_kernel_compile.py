"""The GPU path builds: every kernel compiles for Hopper (sm_90) at the wrappers'
CUDA configs, without spilling, within shared memory, prefill on wgmma."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
triton = pytest.importorskip("triton")

pytestmark = pytest.mark.kernels

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
H100_MAX_SHARED_BYTES = 227 * 1024


@pytest.mark.skipif(not (BIN / "ptxas").exists() or not (BIN / "cuobjdump").exists(),
                    reason="this triton build has no bundled CUDA toolchain")
def test_kernels_compile_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-m", "tests.kernels.aot_compile", "90"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    reports = json.loads(result.stdout)
    assert {r["kernel"] for r in reports} == {
        "_prefill_kernel", "_decode_split_kernel", "_decode_merge_kernel", "_store_kvcache_kernel"}
    for r in reports:
        assert r["stack_bytes"] == 0, r
        assert r["shared_bytes"] <= H100_MAX_SHARED_BYTES, r
        if r["kernel"] == "_prefill_kernel":
            assert r["mma"] == "wgmma", r
