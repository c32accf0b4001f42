"""Collective time by topology and algorithm: serialisation + link latency + switching delay per step.

Each collective is a sequence of steps; a step moves a chunk over the busiest link (serialisation = bytes /
link bandwidth) and pays the link latency plus the switching delay of every switch on its path.
Bandwidths are per GPU per direction. Sizes follow nccl-tests (NVIDIA/nccl-tests doc/PERFORMANCE.md):
S is the all-reduce buffer, the full gathered buffer for all-gather / reduce-scatter, and all a rank sends
for all-to-all; algbw = S / t and busbw = algbw x 2(n-1)/n (all-reduce), x (n-1)/n (all-gather,
reduce-scatter, all-to-all), x 1 (send/recv). `decode.collective_bytes` keeps the byte-only form the
inference floor uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

OPS = ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv")
TOPOLOGIES = ("ring", "tree", "mesh2d", "torus2d", "fully_connected", "switch", "nvls", "hierarchical")


@dataclass(frozen=True)
class Topology:
    """n ranks joined as `kind`. link_bytes_per_s: per GPU per direction (split over its links where the
    topology gives a GPU several); dims: (a, b) for mesh2d/torus2d; hierarchical: gpus_per_node ranks per
    node on the intra link, nodes joined at inter_bytes_per_s with inter_latency_s."""

    kind: str
    n: int
    link_bytes_per_s: float
    link_latency_s: float = 0.0
    switch_latency_s: float = 0.0
    nvls_efficiency: float = 0.0  # nvls: the share of the link the switch's reduction reaches (GPU catalog)
    dims: tuple[int, int] = (0, 0)
    gpus_per_node: int = 0
    inter_bytes_per_s: float = 0.0
    inter_latency_s: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in TOPOLOGIES:
            raise ValueError(f"topology '{self.kind}' unknown; use one of: {', '.join(TOPOLOGIES)}")
        if self.n < 1 or self.link_bytes_per_s <= 0:
            raise ValueError("topology needs n >= 1 and a positive link bandwidth")
        if self.kind == "nvls" and self.nvls_efficiency <= 0:
            raise ValueError("nvls: needs the switch's nvls_efficiency (NCCL's nvlsEfficiency: Hopper 0.85)")
        if self.kind in ("mesh2d", "torus2d") and self.dims[0] * self.dims[1] != self.n:
            raise ValueError(f"{self.kind}: dims {self.dims} must multiply to n={self.n}")
        if self.kind == "hierarchical" and (self.gpus_per_node < 1 or self.n % self.gpus_per_node
                                            or self.inter_bytes_per_s <= 0):
            raise ValueError("hierarchical: n must be a multiple of gpus_per_node and inter_bytes_per_s > 0")


@dataclass(frozen=True)
class CollectiveTime:
    """One collective: seconds split into serialisation and latency (link + switching), with nccl-tests
    algorithm and bus bandwidth."""

    op: str
    size_bytes: float
    n: int
    serialization_s: float
    latency_s: float
    steps: int

    @property
    def time_s(self) -> float:
        return self.serialization_s + self.latency_s

    @property
    def algbw_bytes_per_s(self) -> float:
        return self.size_bytes / self.time_s if self.time_s else 0.0

    @property
    def busbw_bytes_per_s(self) -> float:
        return self.algbw_bytes_per_s * bus_factor(self.op, self.n)


def bus_factor(op: str, n: int) -> float:
    """nccl-tests busbw / algbw: 2(n-1)/n for all-reduce, (n-1)/n for gathers, scatters, all-to-all."""
    if op == "allreduce":
        return 2 * (n - 1) / n
    if op in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    return 1.0


def _ring(op: str, s: float, n: int, bw: float, hop_s: float) -> tuple[float, float, int]:
    """Ring (also NCCL's ring over a switch): 2(n-1) chunk steps for all-reduce, n-1 for gathers; all-to-all
    on a unidirectional ring loads each link with S(n-1)/2 (average n/2 hops)."""
    if op == "allreduce":
        return 2 * (n - 1) / n * s / bw, 2 * (n - 1) * hop_s, 2 * (n - 1)
    if op in ("allgather", "reducescatter"):
        return (n - 1) / n * s / bw, (n - 1) * hop_s, n - 1
    if op == "alltoall":
        return s * (n - 1) / 2 / bw, (n - 1) * hop_s, n - 1
    return s / bw, hop_s, 1


def _direct(op: str, s: float, n: int, bw: float, hop_s: float) -> tuple[float, float, int]:
    """Every rank talks to every other at once over its aggregate bandwidth (fully connected, switch):
    all-reduce = reduce-scatter + all-gather in two steps."""
    if op == "allreduce":
        return 2 * (n - 1) / n * s / bw, 2 * hop_s, 2
    if op in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n * s / bw, hop_s, 1
    return s / bw, hop_s, 1


def nvls_allreduce_bytes(s: float, n: int) -> float:
    """Bytes each GPU moves each way in an NVLink SHARP all-reduce of S among n: its buffer into the switch's
    reduction and its 1/n share of the multicast out; its reduced share and the whole result in. S (1 + 1/n),
    the factor NVIDIA/nccl#2140 applies."""
    return s * (1 + 1 / n)


def _nvls(op: str, s: float, n: int, bw: float, hop_s: float, eff: float) -> tuple[float, float, int]:
    """NVLink SHARP all-reduce at the switch's efficiency, two switch crossings; other collectives run as
    rings over the switch."""
    if op == "allreduce":
        return nvls_allreduce_bytes(s, n) / (bw * eff), 2 * hop_s, 2
    return _ring(op, s, n, bw, hop_s)


def _tree(op: str, s: float, n: int, bw: float, hop_s: float) -> tuple[float, float, int]:
    """Pipelined double binary tree (NCCL): ring bandwidth, 2 log2(n) latency steps for all-reduce."""
    depth = max(math.ceil(math.log2(n)), 1)
    if op == "allreduce":
        return 2 * (n - 1) / n * s / bw, 2 * depth * hop_s, 2 * depth
    if op in ("allgather", "reducescatter"):
        return (n - 1) / n * s / bw, depth * hop_s, depth
    return _ring(op, s, n, bw, hop_s)


def _grid(op: str, s: float, topo: Topology) -> tuple[float, float, int]:
    """2D mesh/torus: rings along x then y (reduce-scatter, then all-gather in reverse). A GPU's bandwidth
    is split over its 4 links (2 dims x 2 directions); a mesh row is a line, so its ring runs at half rate."""
    a, b = topo.dims
    bw = topo.link_bytes_per_s / 2 * (0.5 if topo.kind == "mesh2d" else 1.0)
    hop = topo.link_latency_s + topo.switch_latency_s
    if op == "sendrecv":
        return s / bw, hop * (a // 2 + b // 2), 1
    if op == "alltoall":  # bisection-bound: half the data crosses the middle of the longer dimension
        ser_x, lat_x, st_x = _ring("alltoall", s * (a - 1) / a, a, bw, hop)
        ser_y, lat_y, st_y = _ring("alltoall", s * (b - 1) / b, b, bw, hop)
        return ser_x + ser_y, lat_x + lat_y, st_x + st_y
    sub = "reducescatter" if op in ("allreduce", "reducescatter") else "allgather"
    ser_x, lat_x, st_x = _ring(sub, s, a, bw, hop)
    ser_y, lat_y, st_y = _ring(sub, s / a, b, bw, hop)
    mult = 2 if op == "allreduce" else 1
    return mult * (ser_x + ser_y), mult * (lat_x + lat_y), mult * (st_x + st_y)


def _hierarchical(op: str, s: float, topo: Topology) -> tuple[float, float, int]:
    """Intra-node steps on the scale-up link, the inter-node step among node peers on the NIC.

    All-reduce: intra reduce-scatter, inter all-reduce of S/g, intra all-gather. Gathers likewise with one
    intra and one inter phase. All-to-all: the in-node share S(g-1)/n and the off-node share S(n-g)/n go
    at once, so the slower of the two links sets the time.
    """
    g, n = topo.gpus_per_node, topo.n
    nodes = n // g
    intra_hop = topo.link_latency_s + topo.switch_latency_s
    inter_hop = topo.inter_latency_s + topo.switch_latency_s
    up, out = topo.link_bytes_per_s, topo.inter_bytes_per_s
    if op == "alltoall":
        ser = max(s * (g - 1) / n / up, s * (n - g) / n / out)
        return ser, intra_hop + inter_hop, 2
    if op == "sendrecv":
        return s / out, inter_hop, 1
    sub = "reducescatter" if op in ("allreduce", "reducescatter") else "allgather"
    ser_i, lat_i, st_i = _ring(sub, s, g, up, intra_hop)
    ser_o, lat_o, st_o = _ring(op, s / g, nodes, out, inter_hop)
    if op == "allreduce":
        return 2 * ser_i + ser_o, 2 * lat_i + lat_o, 2 * st_i + st_o
    return ser_i + ser_o, lat_i + lat_o, st_i + st_o


def collective_time(op: str, size_bytes: float, topo: Topology) -> CollectiveTime:
    """Time of one collective of `size_bytes` (nccl-tests convention) on `topo`."""
    if op not in OPS:
        raise ValueError(f"collective '{op}' unknown; use one of: {', '.join(OPS)}")
    n = topo.n
    if n <= 1 or size_bytes <= 0:
        return CollectiveTime(op, size_bytes, n, 0.0, 0.0, 0)
    hop = topo.link_latency_s + topo.switch_latency_s
    if topo.kind == "ring":
        ser, lat, steps = _ring(op, size_bytes, n, topo.link_bytes_per_s, topo.link_latency_s)
    elif topo.kind == "tree":
        ser, lat, steps = _tree(op, size_bytes, n, topo.link_bytes_per_s, hop)
    elif topo.kind == "switch":  # NCCL rings over a non-blocking switch: each hop crosses it
        ser, lat, steps = _ring(op, size_bytes, n, topo.link_bytes_per_s, hop)
    elif topo.kind == "nvls":
        ser, lat, steps = _nvls(op, size_bytes, n, topo.link_bytes_per_s, hop, topo.nvls_efficiency)
    elif topo.kind == "fully_connected":
        ser, lat, steps = _direct(op, size_bytes, n, topo.link_bytes_per_s, topo.link_latency_s)
    elif topo.kind in ("mesh2d", "torus2d"):
        ser, lat, steps = _grid(op, size_bytes, topo)
    else:
        ser, lat, steps = _hierarchical(op, size_bytes, topo)
    return CollectiveTime(op, size_bytes, n, ser, lat, steps)


def gpu_topology(gpu, n: int, achievable: bool = True) -> Topology:
    """The topology a GPU catalog entry implies for n ranks: a switch inside a node (NVSwitch), hierarchical
    intra + inter node beyond it. Achievable: the calibrated scale-up busbw; physical: line rates."""
    up = gpu.scaleup_achievable_bytes_per_s if achievable else gpu.scaleup_bytes_per_s
    g = gpu.gpus_per_node
    if n <= g:
        return Topology("switch", n, up)
    return Topology("hierarchical", n, up, gpus_per_node=g, inter_bytes_per_s=gpu.scaleout_bytes_per_s)


def node_collective_time(op: str, size_bytes: float, topo: Topology, nvls_efficiency: float) -> CollectiveTime:
    """``collective_time`` on ``topo``; inside one NVSwitch node whose switch reduces (nvls_efficiency > 0),
    an all-reduce takes the faster of the ring and NVLink SHARP, as NCCL's tuner picks (NVLS wins from
    about 5 GPUs: NVIDIA/nccl#1455 measured ring-equal busbw on 2-4 H100s and 480 GB/s on 8)."""
    ring = collective_time(op, size_bytes, topo)
    if op != "allreduce" or topo.kind != "switch" or nvls_efficiency <= 0:
        return ring
    nvls = collective_time(op, size_bytes, replace(topo, kind="nvls", nvls_efficiency=nvls_efficiency))
    return min(ring, nvls, key=lambda c: c.time_s)


def gpu_collective_s(gpu, op: str, size_bytes: float, n: int, achievable: bool = True) -> float:
    """Seconds of one collective among n ranks of catalog GPUs; achievable adds aiconfigurator's 10 us
    p2p latency once per collective, as the inference floor does (no per-hop latency is sourced)."""
    if n <= 1 or size_bytes <= 0:
        return 0.0
    t = node_collective_time(op, size_bytes, gpu_topology(gpu, n, achievable), gpu.nvls_efficiency).time_s
    return t + (gpu.net_latency_ns * 1e-9 if achievable else 0.0)
