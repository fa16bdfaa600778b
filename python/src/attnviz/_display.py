"""The page in a notebook: an <iframe srcdoc> that needs no network and no widget state.

The iframe's sandbox allows scripts (the page draws itself) and downloads (its SVG/PNG
export) but not same-origin: the page runs in an opaque origin, so it cannot reach the
notebook's DOM, cookies or kernel, and the notebook's styles cannot reach it. The page's
own Content-Security-Policy <meta> still applies inside srcdoc (default-src 'none', inline
scripts only), so it makes no request. The output is plain text/html: saving the notebook
keeps it, and reopening it shows it again (in a trusted notebook; see the README).
"""

import html as _html

try:  # bertviz returns IPython.display.HTML; so do we when IPython is there
    from IPython.display import HTML as _Base
except ImportError:  # pragma: no cover - exercised only without IPython
    class _Base:
        def __init__(self, data=None):
            self.data = data


def frame_height(n_rows):
    """Pixels for a page showing n_rows tokens a column: the page's header and controls
    (~420 px), then the head view's rows (28 px each); the page scrolls inside the frame
    beyond the cap."""
    return int(min(1000, max(600, 440 + 28 * n_rows)))


def model_frame_height(n_layers):
    """Pixels for the model view: the header, then one row of thumbnails (~70 px) a layer."""
    return int(min(1000, max(560, 440 + 72 * n_layers)))


def iframe(page_html, height=600):
    """The page as an HTML fragment: an isolated, sandboxed iframe holding it in srcdoc."""
    return (
        '<iframe class="attnviz-frame" title="attnviz attention view" '
        'sandbox="allow-scripts allow-downloads" referrerpolicy="no-referrer" '
        f'style="width:100%;height:{int(height)}px;border:1px solid #d0d0d0;border-radius:4px;background:#fff" '
        f'srcdoc="{_html.escape(page_html, quote=True)}"></iframe>'
    )


class Page(_Base):
    """What html_action="return" gives: like bertviz, an IPython.display.HTML whose .data is
    the HTML. Here .data is the complete, self-contained page (write it to a .html file and
    open it anywhere, offline); displaying the object shows it in an isolated iframe."""

    def __init__(self, page_html, height=600):
        super().__init__(data=page_html)
        self.height = height

    def _repr_html_(self):
        return iframe(self.data, self.height)

    def save(self, path):
        """Writes the page to path (UTF-8)."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.data)

    def __repr__(self):
        return f"<attnviz.Page: {len(self.data)} characters of HTML>"


def show_or_return(page, html_action):
    if html_action == "return":
        return page
    if html_action == "view":
        try:
            from IPython.display import display
        except ImportError:
            raise RuntimeError("html_action='view' displays in a notebook and needs IPython; "
                               "use html_action='return' and .save(path) outside one") from None
        display(page)
        return None
    raise ValueError("'html_action' parameter must be 'view' or 'return'")
