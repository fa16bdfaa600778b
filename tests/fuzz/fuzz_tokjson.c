/* libFuzzer target: tokenizer.json parsing (tokjson.c) from arbitrary bytes,
 * then encoding a fixed text (added tokens, regex splits, byte fallback) with
 * whatever loaded. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tokjson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cJSON *root = cJSON_ParseWithLength((const char *)data, size);
    if (!root) return 0;
    TjTokenizer *t = NULL;
    AvErr e;
    if (cJSON_IsObject(root) && tj_load_cjson(&t, root, "fuzz", &e) == 0) {
        static const char text[] = "Hello <s>world</s>, it's 12345 caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac  \n\tA\xf0\x9f\x98\x80";
        TjIds ids = {0};
        if (tj_encode(t, text, sizeof text - 1, &ids, &e) == 0)
            for (size_t i = 0; i < ids.n; i++) (void)tj_id_to_display(t, ids.ids[i]);
        tj_ids_free(&ids);
        tj_free(t);
    }
    cJSON_Delete(root);
    return 0;
}
