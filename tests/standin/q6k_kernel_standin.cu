// A tiny real CUDA program standing in for minfer's q6_K prefill GEMMs, for the kernel tracer's
// format 2 (per kernel and launch grid: count and summed GPU time). It is not minfer and its times
// are nobody's claim: it launches one templated kernel named like minfer's, at minfer's launch
// geometry for a 3325-token prefill of 7B q4_k_m (grid = (ceil(nt / 64), ceil(od / 128)), 256
// threads: the r38 record's launch), 14 times per tensor class: ffn_down (od 3584, id 18944) and
// attn_v (od 512, id 3584). EXP=true skips the per-element recombination loop that EXP=false runs
// (r53's "deletes WORK"), so the two instantiations differ in time by construction.
//   MINFER_MMQ_Q6K_EXP=0  -> mmq_raw_nb_bt_q6k_kernel<2, false>; unset or anything else -> <2, true>
//   MINFER_MMQ_Q6K_NB=0   -> neither: the q6_K "f16 fallback" (a kernel named gemm_f16_nt_kernel_t)
// Both gates read as r60's mmq_gate_on: unset or any value but "0" is on.
// Built and run under the real tracer by tests/test_minfer_kernel_time.py on a GPU machine (marker
// gpu), and by scripts/record_kernel_time_traces.sh.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

template <int KDR, bool EXP>
__global__ void __launch_bounds__(256, 3) mmq_raw_nb_bt_q6k_kernel(const unsigned char *W, float *C, int nt, int od,
                                                                   int id) {
    // Work per block scales with id (the row length); EXP=false adds the recombination ALU.
    unsigned acc = blockIdx.x * 131u + blockIdx.y * 7u + threadIdx.x;
    const int steps = id / 64;
    for (int s = 0; s < steps; ++s) {
        unsigned v = W[(acc + s) & 1023u];
        if (!EXP) {
#pragma unroll 1
            for (int r = 0; r < 24; ++r) v = ((v >> 4) & 0xFu) | (((v >> 2) & 3u) << 4) ^ (v * 2654435761u);
        }
        acc += v;
    }
    if (threadIdx.x == 0) C[blockIdx.y * gridDim.x + blockIdx.x] = (float)(acc & 0xFFFFu) + KDR;
}

// The f16 fallback a MINFER_MMQ_Q6K_NB=0 run takes instead (r60: "q6_K f16 fallback").
__global__ void gemm_f16_nt_kernel_t(const unsigned char *W, float *C, int nt, int od, int id) {
    unsigned acc = blockIdx.x * 131u + blockIdx.y * 7u + threadIdx.x;
    for (int s = 0; s < id / 64; ++s) acc += W[(acc + s) & 1023u] * 3u;
    if (threadIdx.x == 0) C[blockIdx.y * gridDim.x + blockIdx.x] = (float)(acc & 0xFFFFu);
}

static bool gate_on(const char *name) {  // r60's mmq_gate_on: unset or any non-"0" value = ON
    const char *v = getenv(name);
    return v == nullptr || strcmp(v, "0") != 0;
}

static void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        exit(2);
    }
}

int main() {
    const bool on = gate_on("MINFER_MMQ_Q6K_EXP");  // seed 002: the gate is != Ok("0")
    const bool nb = gate_on("MINFER_MMQ_Q6K_NB");
    const int nt = 3325, layers = 14;
    const int shapes[2][2] = {{3584, 18944}, {512, 3584}};  // ffn_down, attn_v: od, id
    unsigned char *W = nullptr;
    float *C = nullptr;
    check(cudaMalloc(&W, 1024), "cudaMalloc W");
    check(cudaMemset(W, 7, 1024), "cudaMemset W");
    check(cudaMalloc(&C, sizeof(float) * 64 * 1200), "cudaMalloc C");
    for (int l = 0; l < layers; ++l) {
        for (const auto &s : shapes) {
            dim3 grid((nt + 63) / 64, (s[0] + 127) / 128);
            if (!nb)
                gemm_f16_nt_kernel_t<<<grid, 256>>>(W, C, nt, s[0], s[1]);
            else if (on)
                mmq_raw_nb_bt_q6k_kernel<2, true><<<grid, 256>>>(W, C, nt, s[0], s[1]);
            else
                mmq_raw_nb_bt_q6k_kernel<2, false><<<grid, 256>>>(W, C, nt, s[0], s[1]);
        }
    }
    check(cudaGetLastError(), "launch");
    check(cudaDeviceSynchronize(), "sync");
    printf("{\"q6k_launches\": %d, \"nb\": %s, \"exp\": %s}\n", nb ? layers * 2 : 0, nb ? "true" : "false",
           on ? "true" : "false");
    return 0;
}
