/* libFuzzer target: config.json parsing and validation. */
#include <stddef.h>
#include <stdint.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ModelConfig c;
    AvErr e;
    if (cfg_parse(&c, (const char *)data, size, "config.json", &e) == 0) {
        if (c.hidden_size <= 0 || c.num_heads <= 0 || c.hidden_size % c.num_heads) __builtin_trap();
    }
    return 0;
}
