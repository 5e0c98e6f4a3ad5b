"""What a perftest build can do, from its ``--help`` text (``ib_write_bw --help``). Pure.

perftest prints its GPU-memory options only when it was built with them (``perftest_parameters.c``:
``if (cuda_memory_supported()) printf("--use_cuda=<cuda device id> ...")``, and ``--use_cuda_dmabuf``
only under ``cuda_memory_dmabuf_supported()``; the same for ROCm). Debian's and most distributions'
packages are built without CUDA; NVIDIA's (MLNX_OFED/DOCA) and hand builds with ``CUDA_H_PATH`` have it.
So the help text is the one honest answer to "can this build send from GPU memory?"::

      --use_cuda=<cuda device id> Use CUDA specific device for GPUDirect RDMA testing
      --use_cuda_bus_id=<cuda full BUS id> Use CUDA specific device, based on its full PCIe address, ...
      --use_cuda_dmabuf Use CUDA DMA-BUF for GPUDirect RDMA testing
"""
from __future__ import annotations

from dataclasses import dataclass

from . import as_text

MAX_INPUT_CHARS = 256 * 1024  # a perftest help screen is ~12 kB
MAX_LINES = 5000


@dataclass(frozen=True)
class PerftestFeatures:
    cuda: bool = False          # --use_cuda=<index>
    cuda_bus_id: bool = False   # --use_cuda_bus_id=<PCI address> (perftest >= 4.5-0.12)
    cuda_dmabuf: bool = False   # --use_cuda_dmabuf (built against a CUDA with dma-buf, perftest >= 4.5-0.17)
    rocm: bool = False          # --use_rocm=<index>

    def to_dict(self) -> dict:
        return {"cuda": self.cuda, "cuda_bus_id": self.cuda_bus_id, "cuda_dmabuf": self.cuda_dmabuf,
                "rocm": self.rocm}


def _option(line: str) -> str | None:
    """The long option a help line starts with (``--use_cuda``), else None."""
    stripped = line.strip()
    if not stripped.startswith("--"):
        return None
    name = stripped.split(None, 1)[0]
    return name.split("=", 1)[0]


def parse_help(text: str) -> PerftestFeatures:
    """The GPU-memory options ``text`` (a perftest ``--help`` screen) offers. ParseError only for
    input that is not text or is over the limits; a help screen without those options is a build
    without GPU memory support (all False)."""
    text = as_text(text, "perftest --help output", MAX_INPUT_CHARS, MAX_LINES)
    options = {opt for opt in map(_option, text.splitlines()) if opt}
    return PerftestFeatures(cuda="--use_cuda" in options, cuda_bus_id="--use_cuda_bus_id" in options,
                            cuda_dmabuf="--use_cuda_dmabuf" in options, rocm="--use_rocm" in options)
