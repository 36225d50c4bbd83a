// lawbench's kernel tracer: a CUDA injection library that counts every kernel an engine process runs.
//
// Loaded by the CUDA driver into any CUDA program through CUDA_INJECTION64_PATH (no change to the
// engine, no rebuild): InitializeInjection() enables CUPTI's kernel activity records, one per kernel
// that executed on the GPU, graph-node kernels included (a CUDA graph replay runs its kernels without
// a launch call, so counting launch calls would miss them). At exit it writes one line per distinct
// (kernel, launch grid) to $LAWBENCH_KERNEL_TRACE_OUT:
//   <count>\t<graph-node count>\t<summed duration, ns>\t<gridX>x<gridY>x<gridZ>\t<demangled name>
// and a first line "# lawbench-kernel-trace 2 dropped=<records CUPTI dropped>". The duration is the
// record's end - start (GPU timestamps of the kernel's execution); the grid tells launches of one
// kernel apart by shape (minfer's q6_K GEMM runs one kernel for attn_v, ffn_down and output.weight,
// its grid.y = ceil(od / 128)). Format 1 had no duration and no grid (lawbench.core.engines.kernels
// still reads it).
//
// Why not Nsight Compute: ncu serializes and replays every kernel to read counters; over a 64-token
// llama-bench run it did not finish in 400 s on the H200 machine (results/h200/README.md). Activity
// records are what profilers' timelines are built from, cost microseconds per kernel, and need no
// hardware counters.
//
// KREC is the newest CUpti_ActivityKernel<N> record of the toolkit's headers (the build passes it;
// the records grow by appending fields, so `name` and `graphId` keep their meaning).
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#ifndef KREC
#error "build with -DKREC=CUpti_ActivityKernel<N>"
#endif

namespace {

struct Count {
    long total = 0;
    long in_graph = 0;
    unsigned long long ns = 0;
};

struct Key {
    std::string name;
    int gx, gy, gz;
    bool operator<(const Key &o) const {
        if (name != o.name) return name < o.name;
        if (gx != o.gx) return gx < o.gx;
        if (gy != o.gy) return gy < o.gy;
        return gz < o.gz;
    }
};

std::map<Key, Count> g_counts;
std::mutex g_mu;
size_t g_dropped = 0;
bool g_done = false;

constexpr size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *size = kBufferBytes;
    *buffer = static_cast<uint8_t *>(aligned_alloc(8, kBufferBytes));
    *max_records = 0;
}

std::string demangle(const char *name) {
    if (name == nullptr) return "?";
    int status = 0;
    char *d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    std::string out = (status == 0 && d != nullptr) ? std::string(d) : std::string(name);
    free(d);
    return out;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    CUpti_Activity *record = nullptr;
    std::lock_guard<std::mutex> lock(g_mu);
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
            continue;
        const KREC *k = reinterpret_cast<const KREC *>(record);
        Count &c = g_counts[Key{demangle(k->name), k->gridX, k->gridY, k->gridZ}];
        c.total += 1;
        if (k->graphId != 0) c.in_graph += 1;
        if (k->end > k->start) c.ns += k->end - k->start;
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
    free(buffer);
}

void write_trace() {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_done) return;
    g_done = true;
    const char *path = getenv("LAWBENCH_KERNEL_TRACE_OUT");
    FILE *f = path ? fopen(path, "w") : stderr;
    if (f == nullptr) return;
    fprintf(f, "# lawbench-kernel-trace 2 dropped=%zu\n", g_dropped);
    for (const auto &kv : g_counts)
        fprintf(f, "%ld\t%ld\t%llu\t%dx%dx%d\t%s\n", kv.second.total, kv.second.in_graph, kv.second.ns, kv.first.gx,
                kv.first.gy, kv.first.gz, kv.first.name.c_str());
    if (f != stderr) fclose(f);
}

}  // namespace

extern "C" int InitializeInjection(void) {
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) return 0;
    if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) return 0;
    atexit(write_trace);
    return 1;
}
