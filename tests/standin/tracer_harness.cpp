// A tiny real program standing in for a CUDA process with lawbench's kernel tracer loaded, on a
// machine without a GPU. It is built with the real tracer compiled in (`g++ -include
// core/engines/kernel_tracer.cpp`, against the toolkit's real CUPTI), hands the tracer CUPTI kernel
// activity records the way the driver's buffer completion does, and writes the trace with the
// tracer's own writer: the file is the tracer's output; only the records are made up.
// stdin: one kernel execution per line: <mangled name> <gridX> <gridY> <gridZ> <duration ns> [graph]
// Output: $LAWBENCH_KERNEL_TRACE_OUT (format 2), as the real tracer writes it at the engine's exit.
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

int main() {
    std::vector<std::string> names;
    std::vector<KREC> recs;
    std::string line;
    unsigned long long clock = 1000;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        std::string name, graph;
        KREC r;
        memset(&r, 0, sizeof r);
        unsigned long long ns = 0;
        int gx = 0, gy = 0, gz = 0;
        if (!(in >> name >> gx >> gy >> gz >> ns)) continue;
        in >> graph;
        r.gridX = gx;
        r.gridY = gy;
        r.gridZ = gz;
        r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        r.start = clock;
        r.end = clock + ns;
        r.graphId = graph == "graph" ? 1 : 0;
        clock = r.end + 100;
        names.push_back(name);
        recs.push_back(r);
    }
    for (size_t i = 0; i < recs.size(); ++i) recs[i].name = names[i].c_str();
    const size_t valid = recs.size() * sizeof(KREC);
    if (valid > kBufferBytes) return 2;
    uint8_t *buffer = static_cast<uint8_t *>(aligned_alloc(8, kBufferBytes));
    if (valid) memcpy(buffer, recs.data(), valid);
    buffer_completed(nullptr, 0, buffer, kBufferBytes, valid);  // frees the buffer, as CUPTI's callback does
    write_trace();
    return 0;
}
