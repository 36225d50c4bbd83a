// lawbench's expert-union reader: decode a text in verify batches of B = K+1 tokens, as speculative
// verification does, and count per layer per batch the distinct experts the router selected.
//
// The ids come from ggml's `ffn_moe_topk-<layer>` tensors (llama-graph.cpp's build_moe_ffn names the
// router's top-k selection so; shape [n_expert_used, n_tokens], I32, possibly a view of an argsort),
// read through the eval callback (llama_context_params.cb_eval), so the engine runs unchanged.
// Built by lawbench against a llama.cpp build's headers and libraries (core/engines/expert_union.py).
//
// usage: lawbench-expert-union -m MODEL -f TEXT -b B [-t THREADS] [-ngl N] [--max-batches N]
// stdout: one JSON object (format 1); stderr: llama.cpp's warnings and errors; exit 0 on success,
// 2 bad arguments, 3 the model selects no experts (no ffn_moe_topk tensor), 1 any other failure.
#include "llama.h"
#include "ggml.h"
#include "ggml-backend.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

const char * TOPK = "ffn_moe_topk-";

struct Reader {
    std::map<int, std::set<int32_t>> ids;  // layer -> distinct expert ids of the current batch
    std::map<int, long> selected;          // layer -> ids read (n_expert_used x tokens)
    std::vector<uint8_t> buf;
    long topk_tensors = 0;                 // over the whole run
    bool bad_type = false;
};

bool on_tensor(struct ggml_tensor * t, bool ask, void * user) {
    auto * r = static_cast<Reader *>(user);
    if (std::strncmp(t->name, TOPK, std::strlen(TOPK)) != 0) {
        return ask ? false : true;  // not ours: never computed apart, never read
    }
    if (ask) {
        return true;
    }
    if (t->type != GGML_TYPE_I32) {
        r->bad_type = true;
        return true;
    }
    const int layer = std::atoi(t->name + std::strlen(TOPK));
    // a view of the argsort: read the span it covers, then walk it by its own strides
    const size_t span = ggml_nbytes(t);
    r->buf.resize(span);
    ggml_backend_tensor_get(t, r->buf.data(), 0, span);
    auto & set = r->ids[layer];
    long n = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
                    const size_t off = i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                    int32_t id;
                    std::memcpy(&id, r->buf.data() + off, sizeof id);
                    set.insert(id);
                    ++n;
                }
    r->selected[layer] += n;
    ++r->topk_tensors;
    return true;
}

void quiet_log(enum ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) {
        std::fputs(text, stderr);
    }
}

std::string meta(const llama_model * model, const std::string & key) {
    char buf[256];
    const int n = llama_model_meta_val_str(model, key.c_str(), buf, sizeof buf);
    return n < 0 ? std::string() : std::string(buf);
}

std::string json_str(const std::string & s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') { out += '\\'; out += c; }
        else if (static_cast<unsigned char>(c) < 0x20) { char e[8]; std::snprintf(e, sizeof e, "\\u%04x", c); out += e; }
        else out += c;
    }
    return out + "\"";
}

int usage(const char * why) {
    std::fprintf(stderr, "lawbench-expert-union: %s\nusage: lawbench-expert-union -m MODEL -f TEXT -b B "
                         "[-t THREADS] [-ngl N] [--max-batches N]\n", why);
    return 2;
}

}  // namespace

int main(int argc, char ** argv) {
    std::string model_path, text_path;
    int batch = 0, threads = 1, ngl = 0, max_batches = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) return usage(("missing the value of " + a).c_str());
        const char * v = argv[++i];
        if (a == "-m") model_path = v;
        else if (a == "-f") text_path = v;
        else if (a == "-b") batch = std::atoi(v);
        else if (a == "-t") threads = std::atoi(v);
        else if (a == "-ngl") ngl = std::atoi(v);
        else if (a == "--max-batches") max_batches = std::atoi(v);
        else return usage(("unknown argument " + a).c_str());
    }
    if (model_path.empty() || text_path.empty()) return usage("-m and -f are required");
    if (batch < 1) return usage("-b (tokens per verify batch, K+1) must be at least 1");
    if (threads < 1) return usage("-t must be at least 1");

    std::ifstream in(text_path, std::ios::binary);
    if (!in) { std::fprintf(stderr, "lawbench-expert-union: cannot read the text %s\n", text_path.c_str()); return 1; }
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();

    llama_log_set(quiet_log, nullptr);
    llama_backend_init();
    auto mparams = llama_model_default_params();
    mparams.n_gpu_layers = ngl;
    llama_model * model = llama_model_load_from_file(model_path.c_str(), mparams);
    if (!model) { std::fprintf(stderr, "lawbench-expert-union: llama.cpp could not load %s\n", model_path.c_str()); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(model);

    const int n_max = static_cast<int>(text.size()) + 16;
    std::vector<llama_token> tokens(n_max);
    int n_tok = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), tokens.data(), n_max, true, false);
    if (n_tok < 0) { std::fprintf(stderr, "lawbench-expert-union: the text does not tokenize (%d)\n", n_tok); return 1; }
    tokens.resize(n_tok);
    int n_batches = n_tok / batch;  // whole verify batches only: a short last one is not a K+1 batch
    if (max_batches > 0 && n_batches > max_batches) n_batches = max_batches;
    if (n_batches < 1) {
        std::fprintf(stderr, "lawbench-expert-union: the text is %d tokens, fewer than one batch of %d\n", n_tok, batch);
        return 1;
    }

    Reader reader;
    auto cparams = llama_context_default_params();
    cparams.n_ctx = static_cast<uint32_t>(n_batches * batch + 64);
    cparams.n_batch = static_cast<uint32_t>(batch);
    cparams.n_ubatch = static_cast<uint32_t>(batch);  // one ubatch per verify batch, never split
    cparams.n_threads = threads;
    cparams.n_threads_batch = threads;
    cparams.cb_eval = on_tensor;
    cparams.cb_eval_user_data = &reader;
    llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) { std::fprintf(stderr, "lawbench-expert-union: could not make a context for %s\n", model_path.c_str()); return 1; }

    const std::string arch = meta(model, "general.architecture");
    // every token of a verify batch asks for logits, as speculative verification does: a batch that
    // asked only for its last (llama_batch_get_one) would skip the other tokens' last-layer FFN
    llama_batch lb = llama_batch_init(batch, 0, 1);
    lb.n_tokens = batch;
    std::ostringstream batches;
    for (int b = 0; b < n_batches; ++b) {
        reader.ids.clear();
        reader.selected.clear();
        for (int i = 0; i < batch; ++i) {
            lb.token[i] = tokens[b * batch + i];
            lb.pos[i] = b * batch + i;
            lb.n_seq_id[i] = 1;
            lb.seq_id[i][0] = 0;
            lb.logits[i] = 1;
        }
        const int rc = llama_decode(ctx, lb);
        if (rc != 0) { std::fprintf(stderr, "lawbench-expert-union: llama_decode failed (%d) at batch %d\n", rc, b); return 1; }
        if (reader.bad_type) { std::fprintf(stderr, "lawbench-expert-union: an ffn_moe_topk tensor is not I32\n"); return 1; }
        if (reader.ids.empty()) {
            std::fprintf(stderr, "lawbench-expert-union: %s selects no experts: no ffn_moe_topk tensor was "
                                 "computed (not a mixture-of-experts model)\n", model_path.c_str());
            return 3;
        }
        batches << (b ? ",\n" : "\n") << "  {\"first_token\": " << b * batch << ", \"layers\": [";
        bool first = true;
        for (const auto & kv : reader.ids) batches << (first ? "" : ", ") << kv.first, first = false;
        batches << "], \"union\": [";
        first = true;
        for (const auto & kv : reader.ids) batches << (first ? "" : ", ") << kv.second.size(), first = false;
        batches << "], \"selected\": [";
        first = true;
        for (const auto & kv : reader.selected) batches << (first ? "" : ", ") << kv.second, first = false;
        batches << "]}";
        for (const auto & kv : reader.selected) {
            if (kv.second != reader.selected.begin()->second) {  // a layer that routed fewer tokens
                std::fprintf(stderr, "lawbench-expert-union: layer %d read %ld expert ids in batch %d, layer %d %ld: "
                             "not every token was routed\n", kv.first, kv.second, b,
                             reader.selected.begin()->first, reader.selected.begin()->second);
                return 1;
            }
        }
    }
    std::printf("{\"format\": 1, \"model\": %s, \"architecture\": %s, \"n_expert\": %s, \"n_expert_used\": %s, "
                "\"batch_tokens\": %d, \"text_tokens\": %d, \"batches_decoded\": %d, \"topk_tensors\": %ld, "
                "\"batches\": [%s\n]}\n",
                json_str(model_path).c_str(), json_str(arch).c_str(),
                json_str(meta(model, arch + ".expert_count")).c_str(),
                json_str(meta(model, arch + ".expert_used_count")).c_str(),
                batch, n_tok, n_batches, reader.topk_tensors, batches.str().c_str());
    std::fflush(stdout);
    llama_batch_free(lb);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
