/* libFuzzer target: config.json parsing and validation. */
#include <stddef.h>
#include <stdint.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ModelConfig c;
    AvErr e;
    if (cfg_parse(&c, (const char *)data, size, "config.json", &e) == 0) {
        /* what cfg_validate promises the engine (decoders may give head_dim apart from hidden / heads) */
        if (c.hidden_size <= 0 || c.num_heads <= 0 || c.head_dim <= 0 || c.num_kv_heads <= 0 ||
            c.num_heads % c.num_kv_heads || (c.pos == POS_ROPE && c.head_dim % 2) ||
            /* an encoder-decoder's heads may be narrower or wider than hidden (T5's d_kv): seq2seq.h
             * sizes its products by heads * head_dim */
            (c.pos == POS_TABLE && !c.enc_dec && c.head_dim * c.num_heads != c.hidden_size) ||
            (c.enc_dec && (c.dec_layers < 1 || c.dec_layers > CFG_MAX_LAYERS || c.dec_intermediate < 1 ||
                           c.dec_start_id < 0 || c.dec_start_id >= c.vocab_size ||
                           (c.s2s_pos == S2S_POS_RELATIVE && (c.rel_buckets < 4 || c.rel_max_distance <= c.rel_buckets / 2)) ||
                           (c.s2s_pos != S2S_POS_RELATIVE && c.max_position_embeddings < 1))) ||
            /* rotary turns pairs within the head; LongRoPE has a factor per pair */
            (c.pos == POS_ROPE && (c.rotary_dim < 2 || c.rotary_dim > c.head_dim || c.rotary_dim % 2)) ||
            (c.rope_kind == ROPE_LONGROPE && c.rope_n_factors != c.rotary_dim / 2))
            __builtin_trap();
    }
    return 0;
}
