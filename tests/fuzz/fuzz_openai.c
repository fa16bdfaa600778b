/* libFuzzer target: the request bodies of attnviz serve's OpenAI-compatible
 * routes (openai.c's oa_parse_request). The first byte picks the route: odd
 * /v1/chat/completions, even /v1/completions. An accepted body must hold
 * what the routes rely on; a refused one a 400 with a message. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "openai.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int chat = data[0] & 1;
    OaRequest q;
    OaError err;
    memset(&err, 0, sizeof err);
    if (oa_parse_request((const char *)data + 1, size - 1, chat, &q, &err) != 0) {
        if (err.status != 400 || !err.message[0] || !err.type) __builtin_trap();
        return 0;
    }
    if (!q.model || !q.model[0] || q.chat != chat) __builtin_trap();
    if (chat && (q.n_msgs < 1 || q.n_msgs > OA_MAX_MESSAGES)) __builtin_trap();
    for (int i = 0; i < q.n_msgs; i++) {
        const PipeChatMsg *m = &q.msgs[i];
        /* a text, or text parts, or neither (a null content): never both */
        if (!m->role || (m->content && m->parts) || m->n_parts < 0 || (!m->parts && m->n_parts)) __builtin_trap();
        for (int k = 0; k < m->n_parts; k++)
            if (!m->parts[k]) __builtin_trap();
    }
    if (!chat && !q.prompt && !q.prompt_ids) __builtin_trap();
    if (!chat && q.prompt && !q.prompt[0]) __builtin_trap();
    for (int i = 0; i < q.n_prompt_ids; i++)
        if (q.prompt_ids[i] < 0) __builtin_trap();
    if (q.max_tokens < 0 || q.max_tokens > OA_MAX_TOKENS || !(q.temperature >= 0 && q.temperature <= 2) ||
        !(q.top_p > 0 && q.top_p <= 1) || q.n_stop < 0 || q.n_stop > PIPE_GEN_MAX_STOP || q.top_logprobs < 0 ||
        q.top_logprobs > 20 || q.top_k < 0 || q.top_k > CAP_TEL_MAX_TOP)
        __builtin_trap();
    for (int i = 0; i < q.n_stop; i++)
        if (!q.stop[i] || !q.stop[i][0]) __builtin_trap();
    for (int i = 0; i < q.n_layers; i++)
        if (q.layers[i] < 0 || q.layers[i] >= CAP_MAX_LAYERS) __builtin_trap();
    for (int i = 0; i < q.n_heads; i++)
        if (q.heads[i] < 0 || q.heads[i] >= CAP_MAX_LAYERS) __builtin_trap();
    oa_request_free(&q);
    return 0;
}
