"""Compile the kernels for a CUDA target without a GPU (no TRITON_INTERPRET) and
print a JSON resource report: the interpreter never exercises the compiler, so
this is the CPU-side check that the GPU path builds.

    python -m tests.kernels.aot_compile [compute capability, default 90]

Uses the CUDA configs of the wrappers, bf16 inputs, and assumes 16-divisible
pointers and strides (as the launcher specialises real Llama-like shapes).
"""

import json
import os
import re
import subprocess
import sys
import tempfile

import torch
import triton
from triton.backends.compiler import GPUTarget

from kernels import decode_attention, prefill_attention, store_kvcache
from kernels.attention_core import padded_head_dim

BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")


def compile_report(fn, types: dict, constexprs: dict, num_warps: int, num_stages: int, capability: int) -> dict:
    """Compile ``fn`` (a JITFunction) and read registers, stack and shared memory from its cubin."""
    signature = {name: "constexpr" if name in constexprs else types.get(name, "i32") for name in fn.arg_names}
    aligned = [i for i, name in enumerate(fn.arg_names) if name not in constexprs and types.get(name, "i32") != "fp32"]
    attrs = {(i,): [["tt.divisibility", 16]] for i in aligned}
    source = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    kernel = triton.compile(source, target=GPUTarget("cuda", capability, 32),
                            options={"num_warps": num_warps, "num_stages": num_stages})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        usage = subprocess.run([os.path.join(BIN, "cuobjdump"), "--dump-resource-usage", f.name],
                               capture_output=True, text=True, check=True).stdout
    ptx = kernel.asm["ptx"]
    return {
        "kernel": fn.__name__,
        "constexprs": constexprs,
        "registers": int(re.search(r"REG:(\d+)", usage).group(1)),
        "stack_bytes": int(re.search(r"STACK:(\d+)", usage).group(1)),
        "shared_bytes": kernel.metadata.shared,
        "mma": "wgmma" if "wgmma" in ptx else "mma.sync" if "mma.sync" in ptx else "none",
    }


def main(capability: int) -> list[dict]:
    cuda = torch.device("cuda")
    bf16, i32 = "*bf16", "*i32"
    reports = []
    for head_dim in (128, 80, 256):
        block_d = padded_head_dim(head_dim)
        cfg = prefill_attention._config(cuda, block_d)
        for paged in (False, True):
            reports.append(compile_report(
                prefill_attention._prefill_kernel,
                {"Q": bf16, "K": bf16, "V": bf16, "O": bf16, "cu_seqlens_q": i32, "context_lens": i32,
                 "block_table": i32, "qk_scale": "fp32"},
                {"GROUP": 4, "HEAD_DIM": head_dim, "BLOCK_D": block_d, "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n,
                 "PAGE_SIZE": 256 if paged else 1, "PAGED": paged, "UPCAST": False},
                cfg.num_warps, cfg.num_stages, capability))
    for page_size in (256, 16):
        reports.append(compile_report(
            decode_attention._decode_split_kernel,
            {"Q": bf16, "K": bf16, "V": bf16, "Mid_O": "*fp32", "Mid_LSE": "*fp32", "block_table": i32,
             "cache_seqlens": i32, "qk_scale": "fp32"},
            {"GROUP": 4, "HEAD_DIM": 128, "BLOCK_D": 128, "BLOCK_H": decode_attention._BLOCK_H, "BLOCK_N": 64,
             "PAGE_SIZE": page_size, "UPCAST": False},
            4, 2, capability))
    reports.append(compile_report(
        decode_attention._decode_merge_kernel, {"Mid_O": "*fp32", "Mid_LSE": "*fp32", "O": bf16},
        {"HEAD_DIM": 128, "BLOCK_D": 128, "BLOCK_S": 32}, 4, 1, capability))
    reports.append(compile_report(
        store_kvcache._store_kvcache_kernel,
        {"key": bf16, "value": bf16, "k_cache": bf16, "v_cache": bf16, "slot_mapping": "*i64"},
        {"HEAD_DIM": 128, "ROW": 1024, "BLOCK": 1024}, 4, 1, capability))
    return reports


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 90), indent=1))
