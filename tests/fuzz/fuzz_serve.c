/* libFuzzer target: attnviz serve's request parsers (serve.c): POST
 * /api/run's JSON body and the heads/layers lists of the query string. The
 * first byte picks the parser. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "live.h"
#include "serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (data[0] & 1) {
        ServeRunReq q;
        const char *why;
        if (serve_parse_run((const char *)data + 1, size - 1, &q, &why) == 0) {
            if (!q.text || !q.text[0] || q.predict < 0 || q.predict > 100 || q.model < 0 || q.generate < 0 ||
                q.generate > LIVE_MAX_GENERATE)
                __builtin_trap();
            serve_run_req_free(&q);
        } else if (!why) {
            __builtin_trap();
        }
    } else {
        char *s = malloc(size);
        if (!s) return 0;
        memcpy(s, data + 1, size - 1);
        s[size - 1] = '\0';
        int out[16], n;
        if (serve_parse_list(s, 12, 16, out, &n) == 0)
            for (int i = 0; i < n; i++)
                if (out[i] < 0 || out[i] >= 12 || n > 16) __builtin_trap();
        free(s);
    }
    return 0;
}
