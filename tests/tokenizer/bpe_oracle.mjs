#!/usr/bin/env node
// bpe_oracle.mjs — expected byte-level BPE output (GPT-2 and RoBERTa templates) for
// tests/tokenizer/corpus.tsv followed by tests/tokenizer/bpe_corpus.tsv (format in oracle.mjs).
//
// Usage (from the repo root):
//   node tests/tokenizer/bpe_oracle.mjs --style gpt2 > tests/tokenizer/bpe_gpt2_expected.jsonl
//   node tests/tokenizer/bpe_oracle.mjs --style roberta > tests/tokenizer/bpe_roberta_expected.jsonl
// Options: --gpt2 DIR (default tools/refdata.sh gpt2: encoder.json + vocab.bpe),
//          --corpus FILE (instead of the two corpora), --pure (no patches), --rust DIR (see below).
// Output: one {"input_ids":[...],"token_type_ids":[...]} per corpus line, nothing truncated.
//
// References:
//   gpt2     js-tiktoken's own copy of GPT-2's ranks (independent of those files), a pair being
//            A's ids then B's (GPT2TokenizerFast: no special tokens; B has type 1). The same
//            lines also go through @huggingface/tokenizers (the JS port) with a GPT-2
//            tokenizer.json built from the GPT-2 files; the script fails if the two
//            disagree, which is what vouches for the port's ByteLevel + BPE.
//   roberta  the JS port with a RoBERTa-style tokenizer.json built from the GPT-2 files (no
//            RoBERTa vocabulary is at hand): <s>=0 <pad>=1 </s>=2 <unk>=3, the GPT-2 tokens
//            shifted by 4, <mask> last (lstrip, as in roberta-base's tokenizer.json); the same
//            merges; ByteLevel pre-tokenizer; RobertaProcessing.
//
// Rust compatibility. AutoTokenizer runs the Rust `tokenizers` library; the JS references
// differ from it in places, patched here (--pure shows the unpatched output):
//   1. \s in GPT-2's pattern: the Rust library's regex engine (Oniguruma) takes it to be
//      Unicode White_Space, JS to be its WhiteSpace+LineTerminator set: U+0085 is a space
//      only in Rust, U+FEFF only in JS. The pattern is rewritten with an explicit class.
//   2. lstrip (<mask>): Rust strips char::is_whitespace (White_Space), the port trimEnd().
//   3. RobertaProcessing: Rust gives every token type 0, the port gives B's part type 1.
//   4. An empty B is a pair in Rust (<s> A </s></s></s>); the port's encode() drops it.
// With the patches the output equals, line for line, that of the Rust library's node
// binding (npm package `tokenizers` 0.23, not a project dependency: it is 64 MB); --rust DIR
// runs that binding on the same generated tokenizer.json files instead, DIR being its
// installed package folder (e.g. after `npm install --prefix /tmp/rt tokenizers`,
// DIR=/tmp/rt/node_modules/tokenizers).
// Not patched (avoid such characters in the corpus): code points whose Unicode category
// changed or that were assigned recently get \p{L}/\p{N} from different Unicode versions
// in Node, in the Rust library and in utf8proc.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const args = process.argv.slice(2);
const opt = (name, dflt) => {
    const i = args.indexOf(name);
    return i >= 0 && i + 1 < args.length ? args[i + 1] : dflt;
};
const style = opt('--style', null);
if (style !== 'gpt2' && style !== 'roberta') {
    console.error('usage: bpe_oracle.mjs --style gpt2|roberta [--gpt2 DIR] [--corpus FILE] [--pure | --rust DIR]');
    process.exit(2);
}
// the default: GPT-2's files from tools/refdata.sh ($ATTNVIZ_REFDATA when set)
const gpt2Dir = args.includes('--gpt2') ? opt('--gpt2')
    : process.env.ATTNVIZ_REFDATA ? path.join(process.env.ATTNVIZ_REFDATA, 'gpt2')
    : execFileSync(path.join(root, 'tools', 'refdata.sh'), ['gpt2'], { encoding: 'utf8' }).trim();
const corpora = args.includes('--corpus')
    ? [opt('--corpus')]
    : [path.join(here, 'corpus.tsv'), path.join(here, 'bpe_corpus.tsv')];
const rustDir = opt('--rust', null);
const pure = args.includes('--pure');

function parseCorpusLine(line) {
    if (line.startsWith('json:')) {
        const v = JSON.parse(line.slice(5));
        if (!Array.isArray(v) || v.length < 1 || v.length > 2 || v.some((s) => typeof s !== 'string'))
            throw new Error(`json: line must be ["A"] or ["A","B"]: ${line}`);
        return v;
    }
    const tab = line.indexOf('\t');
    return tab < 0 ? [line] : [line.slice(0, tab), line.slice(tab + 1)];
}

function readCorpus(file) {
    let text = fs.readFileSync(file, 'utf8');
    if (text.endsWith('\n')) text = text.slice(0, -1);
    return text.split('\n').map(parseCorpusLine);
}

// GPT-2's pattern with \s spelled out as White_Space (patch 1).
const WS = '\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const GPT2_PAT = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const RUST_PAT = GPT2_PAT.replaceAll('[^\\s', `[^${WS}`).replaceAll('\\S', `[^${WS}]`).replaceAll('\\s', `[${WS}]`);
const trimEndWs = (s) => s.replace(new RegExp(`[${WS}]+$`, 'u'), '');

// ---- tokenizer.json files built from the GPT-2 vocabulary and merges ----------------------

function buildTokenizerJsons() {
    const enc = JSON.parse(fs.readFileSync(path.join(gpt2Dir, 'encoder.json'), 'utf8'));
    const merges = fs.readFileSync(path.join(gpt2Dir, 'vocab.bpe'), 'utf8').split('\n')
        .filter((l) => l.length && !l.startsWith('#version'));
    const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
    const added = (id, content, o = {}) => ({ id, content, single_word: false, lstrip: false, rstrip: false,
        normalized: true, special: true, ...o });
    const model = (vocab, unk) => ({ type: 'BPE', dropout: null, unk_token: unk, continuing_subword_prefix: '',
        end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, vocab, merges });
    const gpt2 = { version: '1.0', truncation: null, padding: null, added_tokens: [added(50256, '<|endoftext|>')],
        normalizer: null, pre_tokenizer: byteLevel, post_processor: { ...byteLevel, trim_offsets: false },
        decoder: byteLevel, model: model(enc, null) };
    const rv = { '<s>': 0, '<pad>': 1, '</s>': 2, '<unk>': 3 };
    for (const [k, v] of Object.entries(enc)) rv[k] = v + 4;
    const maskId = Object.keys(rv).length;
    rv['<mask>'] = maskId;
    const roberta = { version: '1.0', truncation: null, padding: null,
        added_tokens: [added(0, '<s>'), added(1, '<pad>'), added(2, '</s>'), added(3, '<unk>'),
            added(maskId, '<mask>', { lstrip: true, normalized: false })],
        normalizer: null, pre_tokenizer: byteLevel,
        post_processor: { type: 'RobertaProcessing', sep: ['</s>', 2], cls: ['<s>', 0], trim_offsets: true,
            add_prefix_space: false },
        decoder: byteLevel, model: model(rv, '<unk>') };
    return { gpt2, roberta };
}

// ---- references ----------------------------------------------------------------------------

async function tiktokenGpt2(inputs) {
    const { Tiktoken } = await import('js-tiktoken/lite');
    const ranks = (await import('js-tiktoken/ranks/gpt2')).default;
    const enc = new Tiktoken(pure ? ranks : { ...ranks, pat_str: RUST_PAT });
    return inputs.map(([a, b]) => {
        const ia = enc.encode(a, 'all'), ib = b === undefined ? [] : enc.encode(b, 'all');
        return { input_ids: [...ia, ...ib], token_type_ids: [...ia.map(() => 0), ...ib.map(() => 1)] };
    });
}

// The port's encode_text with patch 2: added tokens split the text, lstrip takes the
// White_Space before its token, the rest is pre-tokenized and merged.
function portEncodeText(tok, text) {
    const sections = tok.splitter_unnormalized.split(text);
    sections.forEach((s, i) => {
        const t = tok.added_tokens_map.get(s);
        if (t && t.lstrip && i > 0) sections[i - 1] = trimEndWs(sections[i - 1]);
    });
    return sections.flatMap((s) => {
        if (s.length === 0) return [];
        if (tok.added_tokens_map.has(s)) return [s];
        return tok.model(tok.pre_tokenizer(s));
    });
}

async function port(tokenizerJson, inputs) {
    const { Tokenizer } = await import('@huggingface/tokenizers');
    const tok = new Tokenizer(tokenizerJson, {});
    if (tok.pre_tokenizer.constructor.name !== 'ByteLevel')
        throw new Error(`expected a ByteLevel pre-tokenizer, got ${tok.pre_tokenizer.constructor.name}`);
    if (!pure) tok.pre_tokenizer.pattern = new RegExp(RUST_PAT, 'gu');
    const isRoberta = tokenizerJson.post_processor.type === 'RobertaProcessing';
    return inputs.map(([a, b]) => {
        let tokens, types;
        if (pure) {
            const e = tok.encode(a, { text_pair: b ?? null, return_token_type_ids: true });
            tokens = e.tokens;
            types = e.token_type_ids ?? tokens.map(() => 0);
        } else if (isRoberta) {
            const out = tok.post_processor(portEncodeText(tok, a), b === undefined ? null : portEncodeText(tok, b), true);
            tokens = out.tokens;
            types = tokens.map(() => 0); // patch 3
        } else {
            const ta = portEncodeText(tok, a), tb = b === undefined ? [] : portEncodeText(tok, b);
            tokens = [...ta, ...tb];
            types = [...ta.map(() => 0), ...tb.map(() => 1)];
        }
        const ids = tokens.map((t) => tok.added_tokens_map.get(t)?.id ?? tok.token_to_id(t));
        return { input_ids: ids, token_type_ids: types };
    });
}

async function rust(tokenizerJson, inputs) {
    const R = createRequire(import.meta.url)(path.resolve(rustDir));
    const tok = R.Tokenizer.fromString(JSON.stringify(tokenizerJson));
    const out = [];
    for (const [a, b] of inputs) {
        const e = await tok.encode(a, b === undefined ? null : b);
        out.push({ input_ids: e.getIds(), token_type_ids: e.getTypeIds() });
    }
    return out;
}

const inputs = corpora.flatMap(readCorpus);
const jsons = buildTokenizerJsons();
let results;
if (rustDir) {
    results = await rust(jsons[style], inputs);
} else if (style === 'gpt2') {
    results = await tiktokenGpt2(inputs);
    const viaPort = await port(jsons.gpt2, inputs);
    const bad = results.filter((r, i) => JSON.stringify(r) !== JSON.stringify(viaPort[i])).length;
    if (bad) {
        console.error(`bpe_oracle: @huggingface/tokenizers differs from js-tiktoken on ${bad} of ${inputs.length} lines`);
        process.exit(1);
    }
} else {
    results = await port(jsons.roberta, inputs);
}
process.stdout.write(results.map((r) => JSON.stringify(r) + '\n').join(''));
