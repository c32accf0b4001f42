"""Kernel names that real LLM stacks launch, and the class each must land in."""

from __future__ import annotations

import pytest

from tracekit.budgets.classify import OTHER, load_rules

CASES = [
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allreduce"),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", "allgather"),
    ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", "reducescatter"),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "sendrecv"),
    ("ncclDevKernel_AllToAll", "alltoall"),
    ("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*)", "a2a_dispatch"),
    ("void deep_ep::internode_ll::combine<false, 7168>(void*)", "a2a_combine"),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*)", "allreduce"),
    ("void c10d::symmetric_memory::multimem_all_reduce_kernel<float, 16>", "allreduce"),
    ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128>>", "attn_core"),
    ("void flash_fwd_splitkv_mla_kernel<FlashMLA_Traits>(Flash_fwd_mla_params)", "attn_core"),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<PosEncodingMode(0)>", "attn_core"),
    ("fmha_cutlassF_f16_aligned_64x64_rf_sm80", "attn_core"),
    ("void deep_gemm::fp8_gemm_kernel<7168u, 4096u, 128u>(float*)", "gemm"),
    ("void deep_gemm::m_grouped_fp8_gemm_nt_contiguous<256u>(float*)", "moe_experts"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "gemm"),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", "gemm"),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "gemm"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>", "gemm"),
    ("fused_moe_kernel", "moe_experts"),
    ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1", "moe_experts"),
    ("_combined_routing_compute", "moe_routing"),
    ("void vllm::moe::grouped_topk_kernel<float>(float*)", "moe_routing"),
    ("void vllm::moe::topkGatingSoftmax<8, 256>(float const*)", "moe_routing"),
    ("void moe_align_block_size_kernel<int>(int*)", "moe_routing"),
    ("void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*)", "norm_elementwise"),
    ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel>", "norm_elementwise"),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>", "norm_elementwise"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", "norm_elementwise"),
    ("triton_poi_fused_add_mul_0", "norm_elementwise"),
    ("void vllm::per_token_group_quant_8bit_kernel<c10::BFloat16>", "quant"),
    ("void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024>", "sampling"),
    ("void at::native::sbtopk::gatherTopK<float, unsigned int, 2>", "sampling"),
    ("void fp8_mqa_logits_kernel<64>(float*)", "indexer"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>",
     "optimizer"),
    ("void multi_tensor_apply_kernel<TensorListMetadata<4>, LAMBStage1Functor<float>>", "optimizer"),
    # "lambda" in a copy kernel's name is not the LAMB optimizer
    ("void at::native::elementwise_kernel_manual_unroll<128, 8, at::native::gpu_kernel_impl_nocast<"
     "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const>>",
     "norm_elementwise"),
    ("some_unknown_kernel", OTHER),
]


@pytest.mark.parametrize(("name", "cls"), CASES)
def test_real_kernel_names_land_in_their_class(name: str, cls: str) -> None:
    assert load_rules().classify(name) == cls


def test_every_class_but_routing_has_floor_parts_and_comm_kinds_are_classes() -> None:
    rules = load_rules()
    classes = {r.cls for r in rules.rules}
    assert rules.communication <= classes
    assert classes - set(rules.floor_parts) <= {"broadcast", "comm_other"}
