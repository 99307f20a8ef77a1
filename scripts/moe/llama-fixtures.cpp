// llama.cpp's reference outputs on a model, in the format of tests/fixtures/*/generate.json
// (tests/fixtures/README.md): for each prompt a greedy continuation and, from ONE
// teacher-forced batch over prompt + continuation, the top-32 log-probs at every position.
//
//   llama-fixtures MODEL.gguf PROMPTS.json OUT.json [N_GEN=48] [THREADS=2]
//
// PROMPTS.json: a list of cases, each {"ids": [token ids]} (used as they are; "prompt" and
// "generated_text" are then written as "") or {"text": "..."} (tokenized with
// add_special=true, parse_special=true; the continuation is detokenized, special tokens not
// rendered). Context: n_ctx 512, F16 K and V cache, flash attention on, THREADS threads for
// both single tokens and batches; everything else llama_context_default_params().
// On stderr, per prompt: KL(teacher-forced batch || token-by-token decode) over the generated
// positions, llama.cpp's own consistency between its two ways of computing them; with
// FIXTURES_COMPARE_UBATCH=N, the test's measures (top-1 on decisive positions, mean KL over
// the top-32) between the batch and the same batch run in ubatches of N tokens.
// With FIXTURES_LORA=FILE[:SCALE][,FILE[:SCALE]...], the context runs under those LoRA
// adapters (llama_adapter_lora_init + llama_set_adapters_lora; scale 1 by default), as
// llama.cpp's --lora / --lora-scaled (scripts/lora/make-fixtures.sh).
// Built and run by scripts/moe/llama-fixtures.sh against the pinned llama.cpp.

#include "llama.h"
#include "nlohmann/json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

using json = nlohmann::ordered_json;

static const int N_CTX = 512;
static const int N_TOP = 32;

static void log_quiet(ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_WARN) {
        fputs(text, stderr);
    }
}

static void die(const std::string & msg) {
    fprintf(stderr, "llama-fixtures: %s\n", msg.c_str());
    exit(1);
}

// Decodes `toks` at positions start.. in one batch; logits for every token when `all`, else
// for the last only.
static void decode(llama_context * ctx, const std::vector<llama_token> & toks, int start, bool all) {
    llama_batch b = llama_batch_init((int) toks.size(), 0, 1);
    for (size_t i = 0; i < toks.size(); i++) {
        b.token[i] = toks[i];
        b.pos[i] = start + (int) i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = all || i + 1 == toks.size();
    }
    b.n_tokens = (int) toks.size();
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    if (rc != 0) {
        die("llama_decode failed with " + std::to_string(rc));
    }
}

static llama_token argmax(const float * l, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (l[i] > l[best]) {
            best = i;
        }
    }
    return best;
}

// log-softmax in double; dies on a non-finite logit
static std::vector<double> log_softmax(const float * l, int n) {
    double mx = -INFINITY;
    for (int v = 0; v < n; v++) {
        if (!std::isfinite(l[v])) {
            die("non-finite logit");
        }
        mx = std::max(mx, (double) l[v]);
    }
    double sum = 0;
    for (int v = 0; v < n; v++) {
        sum += std::exp((double) l[v] - mx);
    }
    const double lse = mx + std::log(sum);
    std::vector<double> lp(n);
    for (int v = 0; v < n; v++) {
        lp[v] = (double) l[v] - lse;
    }
    return lp;
}

// 6 significant digits, as the other fixtures
static double round6(double x) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.6g", x);
    return strtod(buf, nullptr);
}

static std::string piece(const llama_vocab * vocab, llama_token t) {
    char buf[256];
    int n = llama_token_to_piece(vocab, t, buf, sizeof buf, 0, false);
    if (n < 0) {
        die("token piece too long");
    }
    return std::string(buf, n);
}

int main(int argc, char ** argv) {
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPTS.json OUT.json [N_GEN=48] [THREADS=2]\n", argv[0]);
        return 2;
    }
    const int n_gen = argc > 4 ? atoi(argv[4]) : 48;
    const int n_threads = argc > 5 ? atoi(argv[5]) : 2;
    json prompts;
    {
        std::ifstream f(argv[2]);
        if (!f) {
            die(std::string("cannot read ") + argv[2]);
        }
        prompts = json::parse(f);
    }

    llama_log_set(log_quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.progress_callback = [](float, void *) { return true; };
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        die(std::string("cannot load ") + argv[1]);
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_batch = N_CTX;
    cp.n_ubatch = N_CTX;
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    cp.type_k = GGML_TYPE_F16;
    cp.type_v = GGML_TYPE_F16;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        die("cannot create a context");
    }

    // FIXTURES_LORA: the adapters every context runs under
    std::vector<llama_adapter_lora *> loras;
    std::vector<float> lora_scales;
    if (const char * env = getenv("FIXTURES_LORA")) {
        std::string list = env;
        size_t at = 0;
        while (at <= list.size()) {
            size_t end = list.find(',', at);
            if (end == std::string::npos) {
                end = list.size();
            }
            std::string item = list.substr(at, end - at);
            at = end + 1;
            if (item.empty()) {
                continue;
            }
            float scale = 1.0f;
            size_t colon = item.rfind(':');
            if (colon != std::string::npos) {
                scale = strtof(item.c_str() + colon + 1, nullptr);
                item = item.substr(0, colon);
            }
            llama_adapter_lora * a = llama_adapter_lora_init(model, item.c_str());
            if (!a) {
                die("cannot load the LoRA adapter " + item);
            }
            loras.push_back(a);
            lora_scales.push_back(scale);
            fprintf(stderr, "llama-fixtures: LoRA %s at scale %g\n", item.c_str(), scale);
        }
        if (llama_set_adapters_lora(ctx, loras.data(), loras.size(), lora_scales.data()) != 0) {
            die("llama_set_adapters_lora failed");
        }
    }

    // FIXTURES_COMPARE_UBATCH=N: also run the teacher-forced pass in ubatches of N tokens (other
    // kernels: e.g. flash attention's F16 path below 64 query rows, its F32 tiled path from 64)
    // and report how far llama.cpp's two results are apart, with the test's own measures: a
    // gauge of how sensitive the model is to rounding
    llama_context * ctx2 = nullptr;
    if (getenv("FIXTURES_COMPARE_UBATCH")) {
        llama_context_params cp2 = cp;
        cp2.n_ubatch = atoi(getenv("FIXTURES_COMPARE_UBATCH"));
        ctx2 = llama_init_from_model(model, cp2);
        if (!loras.empty() && llama_set_adapters_lora(ctx2, loras.data(), loras.size(), lora_scales.data()) != 0) {
            die("llama_set_adapters_lora failed");
        }
    }
    double cmp_kl = 0, cmp_kl_max = 0;
    int cmp_n = 0, cmp_dec = 0, cmp_agree = 0;

    json out = json::array();
    for (const auto & p : prompts) {
        const bool text = p.contains("text");
        std::vector<llama_token> ids;
        if (text) {
            const std::string s = p["text"].get<std::string>();
            ids.resize(s.size() + 8);
            int n = llama_tokenize(vocab, s.data(), (int) s.size(), ids.data(), (int) ids.size(), true, true);
            if (n < 0) {
                die("tokenize failed");
            }
            ids.resize(n);
        } else {
            ids = p["ids"].get<std::vector<llama_token>>();
        }
        if (ids.empty() || (int) ids.size() + n_gen > N_CTX) {
            die("a prompt is empty or too long for n_ctx " + std::to_string(N_CTX));
        }
        for (llama_token t : ids) {
            if (t < 0 || t >= n_vocab) {
                die("token id " + std::to_string(t) + " out of the vocabulary");
            }
        }

        // greedy continuation: argmax of the raw logits, stopping after an EOG token
        llama_memory_clear(llama_get_memory(ctx), true);
        decode(ctx, ids, 0, false);
        std::vector<llama_token> gen;
        std::string gen_text;
        std::vector<std::vector<double>> step_lp; // the decode path's log-probs, per generated token
        while ((int) gen.size() < n_gen) {
            const float * l = llama_get_logits_ith(ctx, -1);
            step_lp.push_back(log_softmax(l, n_vocab));
            llama_token t = argmax(l, n_vocab);
            gen.push_back(t);
            if (llama_vocab_is_eog(vocab, t)) {
                break;
            }
            gen_text += piece(vocab, t);
            if ((int) gen.size() == n_gen) {
                break;
            }
            decode(ctx, {t}, (int) (ids.size() + gen.size() - 1), false);
        }

        // one teacher-forced batch over the whole sequence
        std::vector<llama_token> seq = ids;
        seq.insert(seq.end(), gen.begin(), gen.end());
        llama_memory_clear(llama_get_memory(ctx), true);
        decode(ctx, seq, 0, true);
        std::vector<std::vector<double>> lp2;
        if (ctx2) {
            llama_memory_clear(llama_get_memory(ctx2), true);
            decode(ctx2, seq, 0, true);
            for (size_t i = 0; i < seq.size(); i++) {
                lp2.push_back(log_softmax(llama_get_logits_ith(ctx2, (int) i), n_vocab));
            }
        }
        json positions = json::array();
        std::vector<int> order(n_vocab);
        double max_dev = 0;
        int n_dev = 0;
        for (size_t i = 0; i < seq.size(); i++) {
            const std::vector<double> lp = log_softmax(llama_get_logits_ith(ctx, (int) i), n_vocab);
            for (int v = 0; v < n_vocab; v++) {
                order[v] = v;
            }
            // llama.cpp's own consistency: token-by-token decode vs this batch
            if (i + 1 >= ids.size() && i + 1 - ids.size() < step_lp.size()) {
                const std::vector<double> & d = step_lp[i + 1 - ids.size()];
                double kl = 0; // KL(batch || decode)
                for (int v = 0; v < n_vocab; v++) {
                    kl += std::exp(lp[v]) * (lp[v] - d[v]);
                }
                max_dev = std::max(max_dev, kl);
                n_dev += kl > 1e-3;
            }
            std::partial_sort(order.begin(), order.begin() + N_TOP, order.end(),
                              [&](int a, int b) { return lp[a] > lp[b] || (lp[a] == lp[b] && a < b); });
            if (ctx2) {
                double kl = 0;
                for (int v = 0; v < N_TOP; v++) {
                    kl += std::exp(lp[order[v]]) * (lp[order[v]] - lp2[i][order[v]]);
                }
                cmp_kl += kl;
                cmp_kl_max = std::max(cmp_kl_max, kl);
                cmp_n++;
                if (lp[order[0]] - lp[order[1]] >= 0.05) {
                    cmp_dec++;
                    const std::vector<double> & o = lp2[i];
                    cmp_agree += std::max_element(o.begin(), o.end()) - o.begin() == order[0];
                }
            }
            json top = json::array();
            for (int j = 0; j < N_TOP; j++) {
                top.push_back(json::array({order[j], round6(lp[order[j]])}));
            }
            positions.push_back(json{{"pos", i}, {"top", top}});
        }

        json c;
        c["prompt"] = text ? p["text"].get<std::string>() : std::string();
        c["prompt_ids"] = ids;
        c["generated_ids"] = gen;
        c["generated_text"] = text ? gen_text : std::string();
        c["positions"] = positions;
        out.push_back(c);
        fprintf(stderr, "case %zu: %zu prompt tokens, %zu generated; KL(batch || decode) max %.2e, > 1e-3 at %d positions\n",
                out.size(), ids.size(), gen.size(), max_dev, n_dev);
    }

    if (ctx2) {
        fprintf(stderr, "ubatch %d vs %d: top-1 %d/%d decisive, mean KL %.2e (max %.2e) over %d positions\n",
                cp.n_ubatch, atoi(getenv("FIXTURES_COMPARE_UBATCH")), cmp_agree, cmp_dec, cmp_kl / cmp_n, cmp_kl_max, cmp_n);
        llama_free(ctx2);
    }
    std::ofstream f(argv[3]);
    f << "[\n";
    for (size_t i = 0; i < out.size(); i++) {
        f << "  " << out[i].dump(-1, ' ', false, json::error_handler_t::replace)
          << (i + 1 < out.size() ? ",\n" : "\n");
    }
    f << "]\n";
    if (!f) {
        die(std::string("cannot write ") + argv[3]);
    }
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
