/* libFuzzer target: attnviz heads' readers on arbitrary bytes: the --pattern
 * template (.npy or JSON; the first byte picks) and the stats --merge reader
 * of --stats/heads --json files (first byte 2 or 3). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "heads.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    AvErr e;
    const int which = data[0] & 3;
    if (which < 2) {
        HeadsPattern p;
        if (heads_pattern_parse(&p, which ? "f.npy" : "f.json", (const char *)data + 1, size - 1, &e) == 0) {
            /* what the scorer relies on */
            if (p.n < 1 || p.n > 8192 || !p.w) __builtin_trap();
            heads_pattern_free(&p);
        }
        return 0;
    }
    char *s = malloc(size);
    if (!s) return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    HeadScores hs;
    if (heads_parse_json(&hs, "f.json", s, &e) == 0) {
        if (hs.acc.n_layers < 1 || hs.acc.n_scores < 1 || !hs.kind || !hs.model) __builtin_trap();
        heads_free(&hs);
    }
    free(s);
    return 0;
}
