"""Per-op work from an op's own input shapes: FLOPs and the minimum HBM bytes it must move.

Pure functions over shapes and dtypes (PyTorch's recorded ``Input Dims``, ``Input type``, ``Input Strides``,
``Concrete Inputs``); nothing here knows of traces. The bytes are the op's inputs read once and its outputs
written once at their dtypes (the minimum any implementation moves through HBM, caches aside); an input given
as a broadcast view (a stride of 0) counts its distinct elements only. FLOPs count a multiply-add as two;
a causal attention does half the score work. ``op_work`` returns None for an op it has no model of (its
time then has no op floor). docs/op-floor.md defines the families and compares them with TraceLens.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from .ops_engine import engine_work, is_engine_op

#: bytes per element of the dtypes PyTorch names in ``Input type``.
DTYPE_BYTES = {
    "c10::BFloat16": 2, "c10::Half": 2, "float": 4, "double": 8, "long int": 8, "long": 8, "int": 4,
    "short int": 2, "short": 2, "bool": 1, "unsigned char": 1, "signed char": 1, "char": 1,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1,
    "c10::Float8_e8m0fnu": 1, "c10::Float4_e2m1fn_x2": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
    "unsigned int": 4, "unsigned long": 8, "c10::qint8": 1, "c10::quint8": 1,
}
#: the tensor peak a dtype's matrix work runs at: 'fp8' (FP8/INT8 units) or 'bf16' (every wider type: the
#: BF16 dense peak is at least the FP16, TF32 and FP32 peak of every catalogued GPU, so a bound stays a bound).
FP8_DTYPES = frozenset({"c10::Float8_e4m3fn", "c10::Float8_e5m2", "c10::Float8_e4m3fnuz", "c10::Float8_e5m2fnuz",
                        "c10::Float4_e2m1fn_x2", "signed char", "c10::qint8", "(dtype not recorded)"})
LIST_ELEMENT = "(tensor list element)"  # dtype of a tensor in a TensorList argument: unrecorded, 1 byte
DTYPE_BYTES[LIST_ELEMENT] = 1
#: dtype of a tensor whose sizes alone are recorded (PyTorch's NVTX op ranges, parsers/nsys_shapes.py): one
#: byte an element and the FP8 peak, so its floor is a lower bound whatever the real dtype.
UNRECORDED_DTYPE = "(dtype not recorded)"
DTYPE_BYTES[UNRECORDED_DTYPE] = 1
# torch.ScalarType numbers as ``Concrete Inputs`` gives a dtype argument (c10/core/ScalarType.h).
SCALAR_TYPE_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 8: 4, 9: 8, 10: 16, 11: 1, 15: 2,
                     23: 1, 24: 1, 25: 1, 26: 1}


@dataclass(frozen=True)
class OpWork:
    """What one op instance must do. ``flops`` None: no FLOP model (the bytes bound alone)."""

    family: str  # gemm, attention, conv, norm, softmax, elementwise, reduction, embedding, copy, moe
    flops: float | None
    hbm_bytes: float
    precision: str  # 'fp8' or 'bf16': which tensor peak its matrix work is bounded by
    detail: str = ""  # shapes behind the numbers (e.g. 'M 8944 N 2816 K 1024')

    def t_opt_ns(self, flops_per_s: float, hbm_bytes_per_s: float) -> float:
        """The op's floor at the given peaks: the larger of its compute and its memory time."""
        compute = (self.flops or 0.0) / flops_per_s * 1e9
        return max(compute, self.hbm_bytes / hbm_bytes_per_s * 1e9)


@dataclass(frozen=True)
class Arg:
    """One recorded input: its dims (None: not a tensor), dtype text, strides and concrete value."""

    dims: list[int] | None
    dtype: str
    strides: list[int] | None
    value: str

    @property
    def elem(self) -> int:
        return DTYPE_BYTES.get(self.dtype, 1)

    @property
    def numel(self) -> int:
        return math.prod(self.dims) if self.dims is not None else 0

    @property
    def distinct(self) -> int:
        """Distinct elements: a dimension with stride 0 (a broadcast view) repeats the same ones."""
        if self.dims is None:
            return 0
        if self.strides is None or len(self.strides) != len(self.dims):
            return self.numel
        return math.prod(d for d, s in zip(self.dims, self.strides, strict=True) if s != 0)

    @property
    def nbytes(self) -> int:
        return self.distinct * self.elem


def parse_args(dims: list[Any], types: list[Any] | None, strides: list[Any] | None,
               concrete: list[Any] | None) -> list[Arg]:
    """The recorded inputs as ``Arg``s; a tensor list (``cat``'s) is expanded into its tensors."""
    out = []
    for i, d in enumerate(dims):
        t = str(types[i]) if types and i < len(types) else ""
        s = strides[i] if strides and i < len(strides) else None
        v = str(concrete[i]) if concrete and i < len(concrete) else ""
        if t == "TensorList" or (isinstance(d, list) and d and all(isinstance(x, list) for x in d)):
            # A tensor list records no element type: one byte per element keeps its bytes a lower bound.
            ss = s if isinstance(s, list) and len(s) == len(d) else [None] * len(d)
            out += [Arg(list(map(int, x)), LIST_ELEMENT, y if isinstance(y, list) else None, "")
                    for x, y in zip(d, ss, strict=True) if isinstance(x, list)]
            continue
        is_tensor = isinstance(d, list) and (t in DTYPE_BYTES or (t not in ("Scalar", "ScalarList", "") and d))
        dims_i = [int(x) for x in d] if is_tensor and all(isinstance(x, int) for x in d) else None
        strides_i = [int(x) for x in s] if isinstance(s, list) and all(isinstance(x, int) for x in s) else None
        out.append(Arg(dims_i, t, strides_i, v))
    return out


def _tensors(args: list[Arg]) -> list[Arg]:
    return [a for a in args if a.dims is not None and a.dtype in DTYPE_BYTES]


def _precision(*args: Arg) -> str:
    return "fp8" if any(a.dtype in FP8_DTYPES for a in args) else "bf16"


def _bool(text: str) -> bool:
    return text.strip().lower() in ("true", "1")


def _ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", text)]


def _broadcast(shapes: list[list[int]]) -> list[int]:
    """numpy broadcasting of the given shapes (a dimension that does not broadcast takes the larger)."""
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for i, d in enumerate(s[::-1]):
            j = n - 1 - i
            out[j] = d if out[j] == 1 else max(out[j], d) if d != 1 else out[j]
    return out


# ---- GEMMs ----------------------------------------------------------------------------------------------

def _gemm(m: int, n: int, k: int, batch: int, reads: list[Arg], out_elem: int, detail: str,
          bias: bool = False) -> OpWork:
    flops = 2.0 * batch * m * n * k + (batch * m * n if bias else 0)  # a bias or beta*C adds one per output
    hbm = sum(a.nbytes for a in reads) + batch * m * n * out_elem
    return OpWork("gemm", flops, float(hbm), _precision(*reads), detail)


def _mm(name: str, args: list[Arg]) -> OpWork | None:
    t = _tensors(args)
    if name in ("aten::mm", "aten::_scaled_mm", "aten::_scaled_mm_v2") and len(t) >= 2:
        a, b = t[0], t[1]
        if len(a.dims) == 2 and len(b.dims) == 2:
            scaled = name != "aten::mm"  # scales and bias are read too; the output is BF16 unless told
            return _gemm(a.dims[0], b.dims[1], a.dims[1], 1, t if scaled else t[:2], 2 if scaled else a.elem,
                         f"M {a.dims[0]} N {b.dims[1]} K {a.dims[1]}")
    if name == "aten::addmm" and len(t) >= 3:
        c, a, b = t[0], t[1], t[2]
        if len(a.dims) == 2 and len(b.dims) == 2:
            return _gemm(a.dims[0], b.dims[1], a.dims[1], 1, [c, a, b], a.elem,
                         f"M {a.dims[0]} N {b.dims[1]} K {a.dims[1]}", bias=True)
    if name in ("aten::bmm", "aten::baddbmm"):
        if name == "aten::baddbmm" and len(t) >= 3:
            c, a, b = t[0], t[1], t[2]
            reads = [c, a, b]
        elif len(t) >= 2:
            a, b = t[0], t[1]
            reads = [a, b]
        else:
            return None
        if len(a.dims) == 3 and len(b.dims) == 3:
            return _gemm(a.dims[1], b.dims[2], a.dims[2], a.dims[0], reads, a.elem,
                         f"B {a.dims[0]} M {a.dims[1]} N {b.dims[2]} K {a.dims[2]}", bias=len(reads) == 3)
    if name == "aten::matmul" and len(t) >= 2:
        a, b = t[0], t[1]
        ad, bd = list(a.dims), list(b.dims)
        if not ad or not bd:
            return None
        a2 = [1, *ad] if len(ad) == 1 else ad
        b2 = [*bd, 1] if len(bd) == 1 else bd
        batch = math.prod(_broadcast([a2[:-2], b2[:-2]]))
        return _gemm(a2[-2], b2[-1], a2[-1], batch, [a, b], a.elem,
                     f"B {batch} M {a2[-2]} N {b2[-1]} K {a2[-1]}")
    if name == "aten::linear" and len(t) >= 2:
        x, w = t[0], t[1]
        if len(w.dims) != 2 or not x.dims:
            return None
        m = math.prod(x.dims[:-1])
        return _gemm(m, w.dims[0], w.dims[1], 1, t[:3], x.elem, f"M {m} N {w.dims[0]} K {w.dims[1]}",
                     bias=len(t) >= 3)
    if name in ("aten::_grouped_mm", "aten::_scaled_grouped_mm") and len(t) >= 2:
        a, b = t[0], t[1]
        if len(a.dims) == 2 and len(b.dims) == 3:  # tokens [T, K] x experts [G, K, N]: each token meets one
            return _gemm(a.dims[0], b.dims[2], a.dims[1], 1, [a, b], 2,
                         f"grouped: T {a.dims[0]} G {b.dims[0]} N {b.dims[2]} K {a.dims[1]}")
        if len(a.dims) == 3 and len(b.dims) == 3:
            return _gemm(a.dims[1], b.dims[2], a.dims[2], a.dims[0], [a, b], 2,
                         f"grouped: B {a.dims[0]} M {a.dims[1]} N {b.dims[2]} K {a.dims[2]}")
    return None


# ---- attention ------------------------------------------------------------------------------------------

# name -> (layout of q/k/v: 'bhsd' or 'bshd', index of the is_causal argument or None, causal test)
_ATTENTION = {
    "aten::scaled_dot_product_attention": ("bhsd", 5),
    "aten::_scaled_dot_product_flash_attention": ("bhsd", 4),
    "aten::_scaled_dot_product_flash_attention_for_cpu": ("bhsd", 4),
    "aten::_scaled_dot_product_efficient_attention": ("bhsd", 6),
    "aten::_scaled_dot_product_cudnn_attention": ("bhsd", 6),
    "aten::_scaled_dot_product_fused_attention_overrideable": ("bhsd", 5),
    "aten::_scaled_dot_product_attention_math": ("bhsd", 5),
    "aten::_flash_attention_forward": ("bshd", 8),
    "aten::_efficient_attention_forward": ("bshd", 9),  # custom_mask_type: 0 none, 1/2 causal
    "flash_attn::_flash_attn_forward": ("bshd", 5),
    "flash_attn_3::fwd": ("bshd", None),
}
ATTENTION_OPS = frozenset(_ATTENTION)


def _attention(name: str, args: list[Arg]) -> OpWork | None:
    layout, causal_at = _ATTENTION[name]
    t = _tensors(args)
    if len(t) < 3 or any(len(x.dims) != 4 for x in t[:3]):
        return None
    q, k, v = t[:3]
    if layout == "bhsd":
        (b, h, sq, d), (_, hkv, sk, _), dv = q.dims, k.dims, v.dims[3]
    else:
        (b, sq, h, d), (_, sk, hkv, _), dv = q.dims, k.dims, v.dims[3]
    value = args[causal_at].value if causal_at is not None and causal_at < len(args) else ""
    causal = (value.strip() not in ("", "0")) if name == "aten::_efficient_attention_forward" else _bool(value)
    flops = 2.0 * b * h * sq * sk * (d + dv) * (0.5 if causal else 1.0)
    hbm = q.nbytes + k.nbytes + v.nbytes + b * h * sq * dv * q.elem
    detail = f"B {b} H {h}/{hkv} Sq {sq} Sk {sk} d {d}" + (" causal" if causal else "")
    return OpWork("attention", flops, float(hbm), _precision(q, k, v), detail)


# ---- convolution ----------------------------------------------------------------------------------------

_CONV = frozenset({"aten::convolution", "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d",
                   "aten::cudnn_convolution", "aten::miopen_convolution", "aten::conv_transpose2d"})


def _conv(name: str, args: list[Arg]) -> OpWork | None:
    t = _tensors(args[:3])
    if len(t) < 2:
        return None
    x, w = t[0], t[1]
    nd = len(x.dims) - 2
    if nd < 1 or len(w.dims) != nd + 2:
        return None
    scalars = [a.value for a in args]
    if name in ("aten::cudnn_convolution", "aten::miopen_convolution"):  # (x, w, padding, stride, dilation, groups)
        pad, stride, dil = scalars[2:3], scalars[3:4], scalars[4:5]
    else:  # (x, w, bias, stride, padding, dilation, ...): groups need not be read, w is [O, C / groups, k...]
        stride, pad, dil = scalars[3:4], scalars[4:5], scalars[5:6]

    def each(values: list[str], default: int) -> list[int]:
        v = _ints(values[0]) if values else []
        return (v * nd)[:nd] if len(v) in (1, nd) else [default] * nd

    s, p, dl = each(stride, 1), each(pad, 0), each(dil, 1)
    if min(s) < 1 or min(dl) < 1:
        return None
    transposed = name == "aten::conv_transpose2d" or (name in ("aten::convolution", "aten::_convolution")
                                                      and len(scalars) > 6 and _bool(scalars[6]))
    if transposed:
        return None
    spatial = [(x.dims[2 + i] + 2 * p[i] - dl[i] * (w.dims[2 + i] - 1) - 1) // s[i] + 1 for i in range(nd)]
    if any(o <= 0 for o in spatial):
        return None
    out_numel = x.dims[0] * w.dims[0] * math.prod(spatial)
    flops = 2.0 * out_numel * math.prod(w.dims[1:])
    hbm = sum(a.nbytes for a in t) + out_numel * x.elem
    return OpWork("conv", flops, float(hbm), _precision(x, w), f"out {[x.dims[0], w.dims[0], *spatial]}")


# ---- memory-bound families ------------------------------------------------------------------------------

_NORMS = frozenset({"aten::layer_norm", "aten::native_layer_norm", "aten::rms_norm", "aten::_fused_rms_norm",
                    "aten::group_norm", "aten::native_group_norm", "aten::batch_norm", "aten::native_batch_norm",
                    "aten::_batch_norm_impl_index", "aten::cudnn_batch_norm", "aten::instance_norm"})
_SOFTMAX = frozenset({"aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::_log_softmax",
                      "aten::_safe_softmax"})
_UNARY = frozenset({
    "neg", "rsqrt", "sqrt", "silu", "gelu", "relu", "exp", "log", "cos", "sin", "tanh", "sigmoid", "abs", "erf",
    "reciprocal", "square", "hardswish", "hardsigmoid", "leaky_relu", "elu", "mish", "softplus", "sign", "floor",
    "ceil", "round", "clamp", "clamp_min", "clamp_max", "pow", "bitwise_not", "logical_not", "nan_to_num",
    "gelu_backward", "silu_backward", "threshold_backward", "tril", "triu", "native_dropout", "dropout",
    "masked_fill", "fill", "zero", "exponential", "uniform", "normal", "bernoulli",
})
_BINARY = frozenset({"add", "sub", "mul", "div", "rsub", "maximum", "minimum", "where", "eq", "ne", "lt", "le",
                     "gt", "ge", "bitwise_and", "bitwise_or", "logical_and", "logical_or", "fmod", "remainder",
                     "addcmul", "addcdiv", "lerp", "copysign", "atan2", "hypot", "xlogy", "_foreach_add"})
_COMPARE = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not", "isnan"})
_REDUCE = frozenset({"sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "norm", "linalg_vector_norm",
                     "var", "std", "var_mean", "prod", "all", "any", "cumsum", "logsumexp", "topk", "sort"})
_COPY = frozenset({"aten::copy_", "aten::clone", "aten::contiguous", "aten::_to_copy", "aten::to",
                   "aten::cat", "aten::stack", "aten::repeat", "aten::index_put_", "aten::_index_put_impl_",
                   "aten::flip", "aten::roll", "aten::constant_pad_nd", "aten::pad", "aten::upsample_nearest1d",
                   "aten::upsample_nearest2d", "aten::upsample_bilinear2d", "aten::fill_", "aten::zero_",
                   "aten::masked_scatter_", "aten::scatter_", "aten::scatter_add_"})
_GATHER = frozenset({"aten::embedding", "aten::index_select", "aten::gather", "aten::index", "aten::take",
                     "aten::embedding_dense_backward"})


def _base(name: str) -> str:
    """'aten::add_' -> 'add' (the in-place and out variants share their family)."""
    short = name.removeprefix("aten::")
    return short[:-1] if short.endswith("_") and not short.endswith("__") else short


# FLOPs per element of the memory-bound families that compute (as TraceLens counts them); copies, gathers and
# fills have no FLOP model. Bounded by the tensor peak these never bind: their floor is their bytes.
_FLOPS_PER_ELEMENT = {"elementwise": 1, "reduction": 1, "norm": 5, "softmax": 5}


def _memory(family: str, reads: list[Arg], out_numel: int, out_elem: int, detail: str) -> OpWork:
    hbm = sum(a.nbytes for a in reads) + out_numel * out_elem
    per = _FLOPS_PER_ELEMENT.get(family)
    counted = out_numel if family == "elementwise" else reads[0].numel if reads else 0
    return OpWork(family, None if per is None else float(per * counted), float(hbm), "bf16", detail)


def _memory_bound(name: str, args: list[Arg]) -> OpWork | None:
    t = _tensors(args)
    if not t:
        return None
    x = t[0]
    base = _base(name)
    low_elem = min(a.elem for a in t)
    if name in _NORMS:
        return _memory("norm", t, x.numel, x.elem, f"{x.dims}")
    if name in _SOFTMAX:
        half_to_float = len(args) > 2 and _bool(args[2].value) and name in ("aten::_softmax", "aten::_log_softmax")
        return _memory("softmax", [x], x.numel, 4 if half_to_float else x.elem, f"{x.dims}")
    if name in _COPY:
        if name in ("aten::fill_", "aten::zero_"):
            return _memory("copy", [], x.numel, x.elem, f"{x.dims}")
        if name in ("aten::copy_", "aten::index_put_", "aten::_index_put_impl_", "aten::masked_scatter_",
                    "aten::scatter_", "aten::scatter_add_") and len(t) >= 2:
            return _memory("copy", t[1:], t[1].numel if name == "aten::copy_" else 0, x.elem,
                           f"{t[1].dims} -> {x.dims}")
        if name in ("aten::cat", "aten::stack"):
            return _memory("copy", t, sum(a.numel for a in t), t[0].elem, f"{len(t)} inputs")
        if name.startswith("aten::upsample_") and len(args) > 1 and _ints(args[1].value):
            size = _ints(args[1].value)
            return _memory("copy", [x], math.prod(x.dims[:2]) * math.prod(size), x.elem, f"{x.dims} -> {size}")
        if name == "aten::repeat":
            reps = _ints(args[1].value) if len(args) > 1 else []
            return _memory("copy", [x], x.numel * (math.prod(reps) if reps else 1), x.elem, f"{x.dims} x {reps}")
        if name in ("aten::_to_copy", "aten::to"):
            code = next((int(a.value) for a in args[1:] if a.dtype == "ScalarType" and a.value.isdigit()), None)
            return _memory("copy", [x], x.numel, SCALAR_TYPE_BYTES.get(code, 1) if code is not None else 1,
                           f"{x.dims}")
        return _memory("copy", [x], x.numel, x.elem, f"{x.dims}")
    if name in _GATHER:
        if name == "aten::embedding" and len(t) >= 2:
            w, idx = t[0], t[1]
            width = w.dims[-1] if w.dims else 1
            return _memory("embedding", [idx], idx.numel * width, w.elem, f"{idx.dims} x {width}")
        idx = t[-1] if len(t) > 1 else None
        return _memory("embedding", [idx] if idx else [], idx.numel if idx else 0, x.elem, f"{x.dims}")
    if base in _REDUCE:
        return _memory("reduction", [x], 0, x.elem, f"{x.dims}")
    if base in _UNARY or base in _BINARY:
        shape = _broadcast([a.dims for a in t])
        out = math.prod(shape) if shape else 1
        out_elem = 1 if base in _COMPARE else low_elem
        return _memory("elementwise", t, out, out_elem, f"{shape}")
    return None


def op_work(name: str, dims: list[Any], types: list[Any] | None = None, strides: list[Any] | None = None,
            concrete: list[Any] | None = None) -> OpWork | None:
    """The work of one op from its recorded inputs, or None when there is no model for it."""
    if not isinstance(dims, list):
        return None
    try:
        args = parse_args(dims, types, strides, concrete)
        if name in _ATTENTION:
            return _attention(name, args)
        if name in _CONV:
            return _conv(name, args)
        if is_engine_op(name):
            return engine_work(name, args, OpWork, _precision)
        return _mm(name, args) or _memory_bound(name, args)
    except (ValueError, IndexError, TypeError, OverflowError, ZeroDivisionError):
        return None


#: op families whose work is the model of a part of the network, for the per-op table's "modelled" column.
FAMILIES = ("gemm", "attention", "conv", "norm", "softmax", "elementwise", "reduction", "embedding", "copy", "moe")
