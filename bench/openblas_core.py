"""Which OpenBLAS core type uses this CPU's widest vector unit (the same rule as headlab's
core/threads.cpp, which `headlab info` warns with). Imported by compare.py and torch_reference.py.

Debian's OpenBLAS 0.3.21 picks its kernels by CPU detection, or by OPENBLAS_CORETYPE when that is
set in the environment. Where it does not know the CPU it falls back to older kernels (Haswell's
AVX2 ones, or Prescott's SSE3 ones) and every product PyTorch runs through it is slower than the
machine allows: a comparison against such a PyTorch is not fair. OPENBLAS_CORETYPE is read when the
library loads, so it must be in the environment of the process before it starts.
"""

WIDE_CORES = ("skylakex", "cooperlake", "sapphirerapids")
AVX2_CORES = ("haswell", "zen", "sandybridge", "bulldozer", "piledriver", "steamroller", "excavator")


def core_vector_bits(core):
    """Vector width of the SGEMM kernels of an OpenBLAS core name ("Haswell" -> 256)."""
    name = (core or "").lower()
    if any(c in name for c in WIDE_CORES):
        return 512
    if any(c in name for c in AVX2_CORES):
        return 256
    return 128


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def cpu_vector_bits(flags=None):
    flags = cpu_flags() if flags is None else flags
    return 512 if "avx512f" in flags else 256 if "avx2" in flags else 128


def best_core(flags=None):
    """The OPENBLAS_CORETYPE whose kernels use the widest vector unit of this CPU."""
    flags = cpu_flags() if flags is None else flags
    if "avx512f" in flags:
        return "Cooperlake" if "avx512_bf16" in flags else "SkylakeX"
    return "Haswell" if "avx2" in flags else "Prescott"
