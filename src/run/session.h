/* session.h — a model opened for runs: found (--model, $ATTNVIZ_MODEL, bundled
 * weights, the demo), loaded with its tokenizer and head labels. Immutable once
 * open: the runs over it (run_internal.h), the library's threads and the
 * server's workers read it and never change it, so it holds no settings of a
 * run and no scratch. */
#ifndef ATTNVIZ_SESSION_H
#define ATTNVIZ_SESSION_H

#include "chat.h"
#include "config.h"
#include "err.h"
#include "model.h"
#include "output.h"
#include "settings.h"
#include "tokenizer.h"

typedef struct Session {
    char *dir;                       /* the model as found (a folder or a .gguf file) */
    ModelConfig cfg;                 /* its config (zeroed for a tokenizer-only folder without one) */
    Model model;                     /* its weights, when have_model */
    int have_model;                  /* 0: tokenizer only (ModelSpec.tokenizer_only) */
    Tokenizer *tok;
    int have_cfg;                    /* a config was read (a tokenizer-only folder may have none) */
    ChatTemplate *chat;              /* a decoder's chat template (session_chat_template), or NULL */
    int chat_failed;
    char chat_err[512];              /* why it could not be read */
    char **patterns, **descriptions; /* heads.json's labels per layer and head, or NULL */
    char name[256];                  /* the name a page shows (run_display_name) */
    char tok_err[512];               /* a whole CLIP/SigLIP model whose tokenizer could not be read: why (tok NULL) */
    double t_load;                   /* ms to find and load it, for --profile */
    AvMemUse mem_load;               /* what the process held once it was loaded (--profile) */
} Session;

/* Finds the model (m->path, $ATTNVIZ_MODEL, bundled weights, the demo) and
 * loads it (resident when m->resident) with its tokenizer and labels. *dir
 * and *why say which model and why (for the caller's message), valid until
 * session_close. *out is set even on failure (close it). */
int session_open(Session **out, const ModelSpec *m, const char **dir, const char **why, AvErr *e);
/* The same for a run of o: the weights read into memory when it makes many
 * passes (a long --batch, --generate, --ablate), mapped for one. */
int session_open_for(Session **out, const ModelSpec *m, const RunSpec *o, const char **dir, const char **why, AvErr *e);
void session_close(Session *s);
/* Its config (read only: any thread). */
const ModelConfig *session_config(const Session *s);
/* NULL when the model has a language-model head; else why it has none. */
const char *session_head_missing(const Session *s);
/* The model's chat template (chat.h), read with the model (a decoder's): *t NULL, with 0, when the
 * model ships none; -1 when its template could not be read or parsed. Reads only: any thread. */
int session_chat_template(const Session *s, const ChatTemplate **t, AvErr *e);
/* n ids as the model's vocabulary spells them, into w (replacing what it held;
 * the strings are the tokenizer's: valid while s lives). */
int session_spell(const Session *s, const int *ids, int n, OutSpelling *w, AvErr *e);
void session_spelling_free(OutSpelling *w);
/* The document the writers read for an input of s's model, as o selects: the
 * model's description, the texts, tokens and capture, the selection and the
 * page's settings; no predictions, generation or residual-stream results (a
 * run adds its own: run_internal.h's run_fill_doc). Valid while its parts live. */
void session_doc(const Session *s, const RunSpec *o, OutDoc *d, const TokEncoding *enc, const Capture *cap,
                 const char *a, const char *b);
/* The name a page shows for the model in dir (its folder's name; the demo's own). */
const char *run_display_name(const char *dir, int is_demo, char *name, size_t len);

#endif
