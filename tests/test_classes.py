"""Kernel names that real LLM stacks launch, and the class each must land in; the class table's budgets.

The names of ../shared/traces are tested in test_kernel_corpus.py; these add families those traces lack.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracekit import floor
from tracekit.budgets.budget import class_budgets
from tracekit.budgets.classify import OTHER, load_rules
from tracekit.budgets.configs import load_config

CONFIGS = Path(__file__).resolve().parents[1] / "budgets" / "configs"

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
    # issue 16: TRT-LLM-gen MoE GEMMs (one fuses SwiGLU) are expert GEMMs, not norm_elementwise or other
    ("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_"
     "schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f", "moe_experts"),
    ("bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_"
     "schedP2x1x2x3_biasM_bN_tmaOpt_clmp_dynBatch_sm100f", "moe_experts"),
    # issue 16: a norm whose output may be quantised is a norm; upsampling is no sampling
    ("_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdPipelineProblemI"
     "DF16bDF16bfDF16bDF16bDF16bffNS_19Generic2dBlockShapeINS_8sequenceIJLi1ELi3072EEEENS5_IJLi1ELi128EEEENS5_I"
     "JLi1ELi8EEEEEENS_18Rmsnorm2dFwdTraitsILb1ELb0ELb0ELb0ELNS_21Rmsnorm2dFusedAddEnumE1ELNS_23Rmsnorm2dFused"
     "QuantEnumE1ELNS_22Rmsnorm2dSensitiveEnumE0EEEEE", "norm_elementwise"),
    ("void at::native::(anonymous namespace)::upsample_nearest1d_out_frame<float, float>(float const*, float*)",
     "norm_elementwise"),
    ("void vllm::act_and_mul_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn, &vllm::silu_kernel>",
     "norm_elementwise"),
    # NCCL's generic kernel runs several collectives: the name does not say which
    ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "comm_other"),
    # CUTLASS 3.x sm90/sm100, CK, DeepGEMM dense vs grouped, TRT-LLM MoE, a router GEMM
    ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>>>", "gemm"),
    ("void cutlass::device_kernel<cutlass3x_sm100_tensorop_s256x128x16gemm_bf16_bf16_f32_bf16_bf16_256x128x64_"
     "2x1x1_0_tnn_align8_2sm>", "gemm"),
    ("void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor>>",
     "gemm"),
    ("void deep_gemm::sm90_fp8_gemm_1d2d_impl<(deep_gemm::GemmType)0, 7168u, 4096u>(float*)", "gemm"),
    ("void deep_gemm::sm90_fp8_gemm_1d2d_impl<(deep_gemm::GemmType)1, 7168u, 4096u>(float*)", "moe_experts"),
    ("void cutlass::Kernel<cutlass::gemm::kernel::MoeFCGemm<cutlass::gemm::threadblock::MmaMultistage>>",
     "moe_experts"),
    ("void tensorrt_llm::kernels::cutlass_kernels::expandInputRowsKernel<__nv_bfloat16, __nv_fp8_e4m3>",
     "moe_routing"),
    ("void tensorrt_llm::kernels::finalizeMoeRoutingKernel<__nv_bfloat16, __nv_bfloat16>", "moe_routing"),
    ("void dsv3_router_gemm_kernel<__nv_bfloat16, 256, 8>(float*)", "gemm"),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<cute::tuple<>>>>",
     "attn_core"),
    ("void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*)", "norm_elementwise"),
    ("void vllm::dynamic_scaled_int8_quant_kernel<c10::BFloat16, float>", "quant"),
    ("void causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128, 4, true, c10::BFloat16>>", "conv"),
    # torch.compile/Inductor: the fused op names say what a pointwise or reduction kernel is
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "norm_elementwise"),
    ("triton_poi_fused_embedding_0", "embedding"),
    ("triton_red_fused_argmax_1", "sampling"),
    ("triton_tem_fused_addmm_0", "gemm"),
    ("triton_poi_fused_moe_forward_0", "norm_elementwise"),
    ("void ck_tile::kentry<ck_tile::MoeSortingKernel<ck_tile::MoeSortingProblem<int, float, 1, true>>>",
     "moe_routing"),
    ("void at::native::(anonymous namespace)::krn_partials_per_segment<long>(long*, long const*, long const*, long)",
     "embedding"),
    ("void at::native::(anonymous namespace)::compute_grad_weight<c10::BFloat16, long>(long const*, long)",
     "embedding"),
    # a cuDNN kernel is not a convolution by its namespace alone
    ("void cudnn::fusion::lean_reduction_kernel<false, false, false>(void*, float*, float*)", "norm_elementwise"),
    ("some_unknown_kernel", OTHER),
]


@pytest.mark.parametrize(("name", "cls"), CASES)
def test_real_kernel_names_land_in_their_class(name: str, cls: str) -> None:
    assert load_rules().classify(name) == cls


def test_every_class_has_a_budget_entry_of_floor_parts_and_every_part_a_class() -> None:
    """budgets/classes.toml [floor] names each rule class once, only floor parts, and every part."""
    rules = load_rules()
    classes = {r.cls for r in rules.rules}
    assert set(rules.floor_parts) == classes
    assert rules.communication <= classes
    parts = {p for ps in rules.floor_parts.values() for p in ps}
    assert parts == set(floor.CLASS_NAMES)
    assert {c for c, ps in rules.floor_parts.items() if not ps} == {"moe_routing", "broadcast", "comm_other", "conv"}


@pytest.mark.parametrize("config", sorted(p.stem for p in CONFIGS.glob("*.toml")))
def test_moe_configs_budget_their_expert_gemms_in_moe_experts(config: str) -> None:
    cfg = load_config(config)
    if cfg.phase == "training":
        pytest.skip("training configs have no per-step inference floor")
    parts = {p.name: p.floor_ns for p in floor.compute_floor(cfg).parts}
    budgets = class_budgets(floor.compute_floor(cfg).parts, load_rules())
    assert budgets.get("moe_experts", 0) == parts.get("moe_experts", 0)
    assert budgets["gemm"] == sum(parts.get(p, 0) for p in load_rules().floor_parts["gemm"])
