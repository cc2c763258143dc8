"""Kernel tests run Triton on the CPU interpreter: set it before anything imports triton."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402


@pytest.fixture
def gen():
    """A torch.Generator with a fresh seed each run, printed so that a failure can be replayed."""
    torch = pytest.importorskip("torch")
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed={seed}")
    return torch.Generator().manual_seed(seed)
