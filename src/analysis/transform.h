/* transform.h — derived views of a capture for dumps: drop [CLS]/[SEP] rows
 * and columns (rows renormalized), and merge WordPiece "##" pieces into words
 * (attention summed over a word's key pieces, averaged over its query pieces;
 * queries and keys averaged over pieces). */
#ifndef ATTNVIZ_TRANSFORM_H
#define ATTNVIZ_TRANSFORM_H

#include "capture.h"
#include "err.h"
#include "tokenizer.h"

typedef struct {
    TokEncoding enc; /* derived tokens; strings owned here */
    Capture cap;     /* derived arrays, all layers and heads */
} XfView;

/* Builds the view; with neither option set it is a plain copy. Fails when no
 * token would remain (e.g. --no-special on an empty input). */
int xf_apply(const TokEncoding *enc, const Capture *cap, int no_special, int words, XfView *out, AvErr *e);
void xf_free(XfView *v);

/* What the template added at token i: XF_CLS for [CLS] / RoBERTa's <s>, XF_SEP
 * for [SEP] / </s>, else XF_NONE: the tokenizer's role flag (so a "<s>" written
 * in a BERT text, which is word pieces, has none). */
typedef enum { XF_NONE = TOK_ROLE_NONE, XF_CLS = TOK_ROLE_CLS, XF_SEP = TOK_ROLE_SEP } XfRole;
XfRole xf_special_role(const TokEncoding *enc, int i);

#endif
