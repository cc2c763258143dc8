"""GPU catalog: datasheet figures of the accelerators the labs can model.

Every figure is the maker's **dense** figure. NVIDIA datasheets print Tensor
Core FLOP/s *with 2:4 sparsity*, twice the dense rate; copying those gives an
H100 SXM ridge point near 590 FLOP/byte instead of the true ~295 (JAX scaling
book, roofline.md, Problem 5). Each entry names where its figures come from.

Units are SI throughout: FLOP/s, bytes, bytes/s. Memory capacities are the
datasheet's decimal gigabytes (1 GB = 1e9 bytes).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

TERA = 1e12
GIGA = 1e9


class GPU(BaseModel):
    """One accelerator's datasheet figures.

    Attributes:
        id: catalog id, lowercase and hyphenated (``h100-sxm``).
        name: the maker's name for the part.
        bf16_flops_per_s: dense BF16 Tensor Core peak, FLOP/s.
        fp8_flops_per_s: dense FP8 peak, FLOP/s, or None where the part has none.
        memory_bytes: device memory capacity, bytes.
        memory_bandwidth_bytes_per_s: device memory bandwidth, bytes/s.
        interconnect: name of the GPU-to-GPU link used for tensor parallelism.
        interconnect_bytes_per_s: that link's bandwidth per GPU, one direction, bytes/s.
        source: where the figures come from.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    bf16_flops_per_s: float = Field(gt=0)
    fp8_flops_per_s: float | None = Field(default=None, gt=0)
    memory_bytes: float = Field(gt=0)
    memory_bandwidth_bytes_per_s: float = Field(gt=0)
    interconnect: str
    interconnect_bytes_per_s: float = Field(gt=0)
    source: str

    @property
    def ridge_flop_per_byte(self) -> float:
        """Dense BF16 peak / memory bandwidth: the roofline's ridge point, FLOP/byte."""
        return self.bf16_flops_per_s / self.memory_bandwidth_bytes_per_s


_GPUS = [
    GPU(
        id="h100-sxm", name="NVIDIA H100 SXM5 80GB",
        bf16_flops_per_s=989.4 * TERA, fp8_flops_per_s=1978.9 * TERA,
        memory_bytes=80 * GIGA, memory_bandwidth_bytes_per_s=3.35e12,
        interconnect="NVLink 4 (900 GB/s both ways)", interconnect_bytes_per_s=450 * GIGA,
        source="NVIDIA H100 datasheet (dense = half the 'with sparsity' figure), "
        "via glennklockwood.com/garden/processors/h100 and the JAX scaling book, roofline.md",
    ),
    GPU(
        id="h100-pcie", name="NVIDIA H100 PCIe 80GB",
        bf16_flops_per_s=756 * TERA, fp8_flops_per_s=1513 * TERA,
        memory_bytes=80 * GIGA, memory_bandwidth_bytes_per_s=2.0e12,
        interconnect="PCIe 5.0 x16", interconnect_bytes_per_s=64 * GIGA,
        source="NVIDIA H100 datasheet ('* shown with sparsity', halved), "
        "copy at archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html",
    ),
    GPU(
        id="h200", name="NVIDIA H200 SXM 141GB",
        bf16_flops_per_s=989.4 * TERA, fp8_flops_per_s=1978.9 * TERA,
        memory_bytes=141 * GIGA, memory_bandwidth_bytes_per_s=4.8e12,
        interconnect="NVLink 4 (900 GB/s both ways)", interconnect_bytes_per_s=450 * GIGA,
        source="NVIDIA H200 datasheet; JAX scaling book, gpus.md (4.8e12 B/s, 9.9e14 bf16, 141 GB)",
    ),
    GPU(
        id="b200", name="NVIDIA B200 (HGX, 1000 W)",
        bf16_flops_per_s=2250 * TERA, fp8_flops_per_s=4500 * TERA,
        memory_bytes=180 * GIGA, memory_bandwidth_bytes_per_s=8.0e12,
        interconnect="NVLink 5 (1.8 TB/s both ways)", interconnect_bytes_per_s=900 * GIGA,
        source="NVIDIA HGX B200 figures (180 GB usable of 192 GB), "
        "via glennklockwood.com/garden/processors/B200 and the JAX scaling book, gpus.md",
    ),
    GPU(
        id="a100-80gb", name="NVIDIA A100 SXM 80GB",
        bf16_flops_per_s=312 * TERA, fp8_flops_per_s=None,
        memory_bytes=80 * GIGA, memory_bandwidth_bytes_per_s=2.039e12,
        interconnect="NVLink 3 (600 GB/s both ways)", interconnect_bytes_per_s=300 * GIGA,
        source="NVIDIA A100 datasheet, via glennklockwood.com/garden/processors/A100",
    ),
    GPU(
        id="a100-40gb", name="NVIDIA A100 SXM 40GB",
        bf16_flops_per_s=312 * TERA, fp8_flops_per_s=None,
        memory_bytes=40 * GIGA, memory_bandwidth_bytes_per_s=1.555e12,
        interconnect="NVLink 3 (600 GB/s both ways)", interconnect_bytes_per_s=300 * GIGA,
        source="NVIDIA A100 datasheet, via glennklockwood.com/garden/processors/A100",
    ),
    GPU(
        id="l40s", name="NVIDIA L40S",
        bf16_flops_per_s=362 * TERA, fp8_flops_per_s=733 * TERA,
        memory_bytes=48 * GIGA, memory_bandwidth_bytes_per_s=864 * GIGA,
        interconnect="PCIe 4.0 x16", interconnect_bytes_per_s=32 * GIGA,
        source="NVIDIA L40S datasheet ('* with sparsity', halved), copy at mullet.se",
    ),
    GPU(
        id="l4", name="NVIDIA L4",
        bf16_flops_per_s=121 * TERA, fp8_flops_per_s=242.5 * TERA,
        memory_bytes=24 * GIGA, memory_bandwidth_bytes_per_s=300 * GIGA,
        interconnect="PCIe 4.0 x16", interconnect_bytes_per_s=32 * GIGA,
        source="NVIDIA L4 datasheet (242 FP16 / 485 FP8 TFLOP/s with sparsity, halved)",
    ),
    GPU(
        id="rtx-4090", name="NVIDIA GeForce RTX 4090",
        bf16_flops_per_s=165.2 * TERA, fp8_flops_per_s=330.3 * TERA,
        memory_bytes=24 * GIGA, memory_bandwidth_bytes_per_s=1008 * GIGA,
        interconnect="PCIe 4.0 x16", interconnect_bytes_per_s=32 * GIGA,
        source="NVIDIA Ada whitepaper figures with FP32 accumulate, via waredb.com and gigagpu.com "
        "(the FP8 figure is uncertain: copies disagree between 330 and 660)",
    ),
    GPU(
        id="mi300x", name="AMD Instinct MI300X",
        bf16_flops_per_s=1307.4 * TERA, fp8_flops_per_s=2614.9 * TERA,
        memory_bytes=192 * GIGA, memory_bandwidth_bytes_per_s=5.3e12,
        interconnect="Infinity Fabric (896 GB/s aggregate)", interconnect_bytes_per_s=448 * GIGA,
        source="AMD MI300X datasheet figures (dense), via awesomeagents.ai and aiwiki.ai",
    ),
]

GPUS: dict[str, GPU] = {gpu.id: gpu for gpu in _GPUS}


def get_gpu(gpu_id: str) -> GPU:
    """Look up a catalog GPU.

    Raises:
        KeyError: the id is not in the catalog; the message lists the valid ids.
    """
    try:
        return GPUS[gpu_id]
    except KeyError:
        raise KeyError(f"unknown gpu {gpu_id!r}; valid: {', '.join(GPUS)}") from None
