"""Function names from demangled kernel names: what ncu's ``--kernel-name-base function`` matches."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracekit.parsers.kernel_names import function_name

# Names as CUPTI spells them in real PyTorch-profiler traces (the first four from an H200 capture).
CASES = [
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, true>"
     "(int, float, c10::BFloat16 const*)", "vectorized_layer_norm_kernel"),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_"
     "kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda(float)#1}>(at::Tensor"
     "IteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
     "const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<float>)",
     "elementwise_kernel"),
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, float, false, 6, "
     "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<__nv_bfloat16 const>, float> >(cublasGemvParamsEx"
     "<int, cublasGemvTensorStridedBatched<__nv_bfloat16 const>, float>)", "kernel"),
    ("nvjet_sm90_tst_256x8_64x6_4x1_v_bz_TNT", "nvjet_sm90_tst_256x8_64x6_4x1_v_bz_TNT"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>"
     "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8::Params)", "Kernel2"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
    ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::bfloat16_t>, "
     "false, true>(Flash_fwd_params)", "flash_fwd_kernel"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
     "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"),
    ("a::b::c", "c"),
    ("<lambda>()", "<lambda>()"),  # nothing before the template: the name itself
]


@pytest.mark.parametrize(("name", "function"), CASES)
def test_function_name_of_real_kernel_names(name: str, function: str) -> None:
    assert function_name(name) == function


@pytest.mark.parametrize("name", ["", "x)", "a>b", "f<int", ")(", "ns::"])
def test_names_with_no_function_in_them_stay_whole(name: str) -> None:
    assert function_name(name) == name


IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
TYPE = st.recursive(IDENT, lambda inner: st.builds(lambda n, args: f"{n}<{', '.join(args)}>", IDENT,
                                                    st.lists(inner, min_size=1, max_size=3)), max_leaves=6)


@given(ret=st.sampled_from(["", "void ", "std::enable_if<!(true), void>::type "]),
       scopes=st.lists(st.one_of(IDENT, st.just("(anonymous namespace)")), max_size=3),
       fn=IDENT, targs=st.none() | st.lists(TYPE, min_size=1, max_size=3), params=st.lists(TYPE, max_size=3))
def test_function_name_recovers_the_identifier(ret: str, scopes: list[str], fn: str, targs: list[str] | None,
                                               params: list[str]) -> None:
    qualified = "::".join([*scopes, fn])
    template = f"<{', '.join(targs)}>" if targs else ""
    assert function_name(f"{ret}{qualified}{template}({', '.join(params)})") == fn
