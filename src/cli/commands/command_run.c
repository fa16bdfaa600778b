/* command_run.c — attnviz [OPTIONS] TEXT [TEXT_B] | --batch FILE: the run. Its
 * options are the rows of cli_options.c that name C_RUN; its rules, cli_rules.c's;
 * what it checks against the model, run/run_checks.c's. */
#include <string.h>

#include "../cli_table.h"
#include "model.h"
#include "pipeline.h"

/* The words are the texts (or none, with --batch), and the rules that read values. */
static int check(CliOptions *o, int n, char **words, AvErr *e) {
    RunSpec *r = &o->run;
    if ((cli_given(o, "top-p") || cli_given(o, "seed")) && r->predict.temperature <= 0)
        return cli_usage(e, "%s", "--top-p and --seed choose how to sample: add --temperature T > 0 (greedy takes no seed)");
    if (r->predict.generate_n && n == 2 && !r->batch.path) return cli_usage(e, "%s", "--generate continues one text, not a pair");
    if (r->decoder_text && n == 2)
        return cli_usage(e, "%s", "--decoder-text goes with one source TEXT: not with a second text, --batch (its lines are "
                                  "SOURCE<TAB>TARGET), --tokens-only or --telemetry");
    if (r->output.view && !strcmp(r->output.view, "compare") && !measure_wanted(&r->capture, MEASURE_NORM) &&
        !measure_any_per_layer(&r->capture))
        return cli_usage(e, "%s", "--view compare draws the measures side by side: add --measure LIST (e.g. norm,alti,rollout)");
    if (r->stats && r->capture.n_measures > 1)
        return cli_usage(e, "%s", "--stats scores one measure: give --measure one name (a list is for the document and page)");
    for (int i = 1; r->lens.flow && i < o->sel_layers.n; i++)
        if (o->sel_layers.v[i] != o->sel_layers.v[i - 1] + 1)
            return cli_usage(e, "%s", "--flow traces down through consecutive layers: give --layers as one range (e.g. 4-11)");
    if (r->batch.path && !r->output.out_dir && (r->output.html_path || r->output.npy_path)) {
        const int html = r->output.html_path != NULL;
        return cli_usage(e, "--batch writes JSON Lines; %s FILE holds one input's %s: add --out-dir DIR for %s per line "
                            "(DIR/000001.%s)", html ? "--html" : "--npy", html ? "page" : "arrays",
                         html ? "a page" : "arrays", html ? "html" : "npy");
    }
    if ((r->chat || r->chat_file) && n == 2)
        return cli_usage(e, "%s", "--chat wraps one TEXT as a user message: not a sentence pair (several turns go in "
                                  "--chat-file FILE)");
    if (r->chat_file) {
        if (n > 0) return cli_usage(e, "--chat-file FILE is the input: no TEXT ('%s')", words[0]);
        return 0;
    }
    if (r->batch.path) {
        if (n > 0) return cli_usage(e, "--batch takes its inputs from the file, not '%s'", words[0]);
        return 0;
    }
    if (n < 1 && !r->image) return cli_usage(e, "%s", "missing TEXT");
    if (n > 2) return cli_usage(e, "too many arguments: '%s' (quote the text)", words[2]);
    r->text_a = n > 0 ? words[0] : NULL; /* --image: a whole CLIP or SigLIP model's text, if any */
    r->text_b = n == 2 ? words[1] : NULL;
    return 0;
}

static int run(const CliOptions *o, AvErr *e) {
    return pipeline_main(&o->model, &o->run, e);
}

const CliCommand CLI_CMD_RUN = {
    .name = "",
    .bit = C_RUN,
    .synopsis = "attnviz [OPTIONS] TEXT [TEXT_B]\nattnviz [OPTIONS] --batch FILE|-",
    .summary = "run a model on TEXT (or each line of FILE): JSON, .npy and the page",
    .about = "Run a Transformer (BERT, RoBERTa, DistilBERT, XLM-RoBERTa, ELECTRA, ModernBERT, GPT-2, Llama, Mistral, "
             "Qwen2/3, Gemma 2/3, Phi-3, Mixtral, Qwen3-MoE, OLMoE, gpt-oss; the encoder-decoders BART, Marian, "
             "T5/Flan-T5/mT5; Hugging Face folders or llama.cpp GGUF files) on TEXT (and TEXT_B for a sentence pair), "
             "capture the attention of every layer and head, and write JSON, .npy and/or an HTML page. A TEXT that "
             "starts with - or is a single word like a command's name goes after --: attnviz -- sever.",
    .examples = "attnviz \"time flies like an arrow\" --layer 0 --head 8\n"
                "attnviz --model weights/all-MiniLM-L6-v2 -o out.json \"the cat sat\" \"it was tired\"\n"
                "attnviz --batch corpus.txt --layers 0,5-11 --heads 8 --no-special > maps.jsonl\n"
                "attnviz --batch corpus.txt --out-dir maps/ --npy\n"
                "attnviz --batch corpus.txt --stats --json stats.json\n"
                "attnviz --batch corpus.txt --shard 2/4 --stats --json stats.2.json   (then stats --merge)\n"
                "attnviz --tokens-only --batch corpus.txt > tokens.jsonl\n"
                "attnviz --model weights/SmolLM2-135M-Instruct.Q4_1.gguf --generate 20 --predict 5 \"The capital of France is\"\n"
                "attnviz --model weights/SmolLM2-135M-Instruct.Q4_1.gguf --chat --generate 20 \"What is the capital of France?\"\n"
                "attnviz --model weights/dinov2-small --image examples/images/cat-on-grey.png -o cat.html\n"
                "attnviz -- head",
    .check = check,
    .run = run,
};
