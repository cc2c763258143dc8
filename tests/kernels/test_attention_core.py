"""The shared online-softmax loop on its own: rows that see no key stay finite (kernels.md 7.6)."""

import math

import pytest

pytest.importorskip("torch")
triton = pytest.importorskip("triton")

import torch  # noqa: E402
import triton.language as tl  # noqa: E402

from kernels import reference  # noqa: E402
from kernels.attention_core import attend_kv_range  # noqa: E402
from tests.kernels.helpers import randn  # noqa: E402

pytestmark = pytest.mark.kernels


@triton.jit
def _fold(Q, K, V, Acc, M, L, last_key_ptr, num_keys, ROWS: tl.constexpr, HEAD_DIM: tl.constexpr):
    offs_r = tl.arange(0, ROWS)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + offs_r[:, None] * HEAD_DIM + offs_d[None, :])
    acc = tl.zeros([ROWS, HEAD_DIM], dtype=tl.float32)
    m_i = tl.full([ROWS], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([ROWS], dtype=tl.float32)
    acc, m_i, l_i = attend_kv_range(
        acc, m_i, l_i, q, K, V, 0, None, 0, HEAD_DIM, 0, num_keys, tl.load(last_key_ptr + offs_r),
        offs_d, offs_d < HEAD_DIM, 1.0, 16, 1, False, True, False)
    tl.store(Acc + offs_r[:, None] * HEAD_DIM + offs_d[None, :], acc)
    tl.store(M + offs_r, m_i)
    tl.store(L + offs_r, l_i)


def test_rows_without_visible_keys_stay_finite(gen):
    rows, head_dim, num_keys = 16, 32, 40
    q, k, v = randn(gen, rows, head_dim), randn(gen, num_keys, head_dim), randn(gen, num_keys, head_dim)
    last_key = torch.tensor([-1] * 8 + list(range(0, 40, 5)), dtype=torch.int32)  # rows 0-7 see nothing
    acc = torch.empty(rows, head_dim)
    m_i, l_i = torch.empty(rows), torch.empty(rows)

    _fold[(1,)](q, k, v, acc, m_i, l_i, last_key, num_keys, ROWS=rows, HEAD_DIM=head_dim)

    assert torch.isfinite(acc).all() and torch.isfinite(l_i).all()
    assert torch.equal(acc[:8], torch.zeros(8, head_dim)) and torch.equal(l_i[:8], torch.zeros(8))
    for r in range(8, rows):
        n = int(last_key[r]) + 1
        # qk_scale 1.0 in the kernel's log2 units is a softmax scale of ln 2.
        expected = reference.attention(q[r, None, None], k[:n, None], v[:n, None], math.log(2), causal=False)[0, 0]
        torch.testing.assert_close((acc[r] / l_i[r]).double(), expected, atol=2e-3, rtol=2e-3)
