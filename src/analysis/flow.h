/* flow.h — information-flow routes (Ferrando & Voita 2024, "Information Flow
 * Routes: Automatically Interpreting Language Models at Scale"), over a
 * capture with model_capture_internals' buffers and every head's attention.
 *
 * In a pre-norm layer l, token i's stream after attention is a sum of parts:
 *   mid_i = x_i + sum_h sum_j a^h_ij (v^h_j W_O^h) + b_O,
 * with v^h_j = norm(x_j) W_V^h + b_V^h (head h's key/value head's value, its
 * bias included), and the layer's output is post_i = mid_i + mlp_i. Each part
 * p of a whole y gets the paper's proximity-based share (L1 distances):
 *   prox(p, y) = max(||y||_1 - ||y - p||_1, 0),  share = prox / sum of prox,
 * so the shares of a whole sum to 1 (b_O is in the whole, not a part). The
 * graph is traced from one token's output at the top layer down, as the LLM
 * Transparency Tool does: from a node post_i, the MLP and the residual reach
 * mid_i (an MLP edge is listed when its share passes the threshold); from
 * mid_i, token j's node below is reached when its share summed over heads
 * (plus the residual's when j = i) passes the threshold, and that pair is
 * listed per head (heads with a share of 0 left out) and, for j = i, with the
 * residual's share. Causal pre-norm models without a sandwich norm after
 * attention (GPT-2, Llama, Mistral, Qwen, Phi-3); a sandwich norm (Gemma 2/3)
 * makes mid_i no sum of the parts, and encoders' post-norm streams likewise. */
#ifndef ATTNVIZ_FLOW_H
#define ATTNVIZ_FLOW_H

#include "capture.h"
#include "err.h"
#include "model.h"

enum { FLOW_ATTN, FLOW_RESIDUAL, FLOW_MLP };

typedef struct {
    int layer;
    int from, to;  /* tokens: the node below (layer's input) and the node above (its output) */
    int head;      /* FLOW_ATTN: the head; else -1 */
    int kind;      /* FLOW_ATTN, FLOW_RESIDUAL (token i's own stream through attention), FLOW_MLP
                      (the MLP's share of the layer's output at token i: from = to = i) */
    float weight;
} FlowEdge;

typedef struct FlowResult {
    int on;
    double threshold;
    int position;          /* the output token the graph starts from */
    int lo, hi;            /* the layers traced, hi first */
    FlowEdge *edges;       /* in the order traced: layer hi first */
    int n_edges, cap_edges;
} FlowResult;

void flow_free(FlowResult *r);

/* Whether the model's layers are sums of parts the paper's formula applies
 * to: 0, or -1 with the reason in e. */
int flow_supported(const Model *m, AvErr *e);

/* The shares in layer l at the query tokens qs (nq, ascending): attn (nq, n,
 * n_heads) each key token's share through each head (0 past the query), resid
 * (nq) the residual's, both in mid; mlp (nq) the MLP's in the layer's output
 * (the residual around it has 1 - mlp). */
int flow_layer_shares(const Model *m, const Capture *cap, int l, const int *qs, int nq, float *attn, float *resid,
                      float *mlp, AvErr *e);

/* The graph from token pos at the output of layer hi down through layer lo,
 * edges with a weight above threshold (0 < threshold < 1). */
int flow_routes(const Model *m, const Capture *cap, int lo, int hi, int pos, double threshold, FlowResult *r,
                AvErr *e);

/* max(||y||_1 - ||y - s p||_1, 0) over dim, y given with its L1 norm. */
double flow_proximity(const double *y, double y_l1, const float *p, double s, int dim);

#endif
