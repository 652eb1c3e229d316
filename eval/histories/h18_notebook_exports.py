from ._common import checks, commit, orient, pytest_ok, tree

PDF_PY = """from pathlib import Path

from weasyprint import HTML

from exporter.html import render_html


def export_pdf(nb_path: Path, out: Path) -> Path:
    html = render_html(nb_path)
    target = out / (nb_path.stem + ".pdf")
    HTML(string=html, base_url=str(nb_path.parent)).write_pdf(target)
    return target
"""

HTML_PY = """import base64
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter

EXEC_TIMEOUT = 600


def render_html(nb_path: Path) -> str:
    nb = nbformat.read(nb_path, as_version=4)
    exporter = HTMLExporter(template_name="lab")
    body, _ = exporter.from_notebook_node(nb)
    return body
"""

RUN_PY = """from nbclient import NotebookClient

from exporter.html import EXEC_TIMEOUT


def execute(nb, cwd):
    client = NotebookClient(nb, timeout=EXEC_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": cwd}})
    client.execute()
    return nb
"""


def build(ds):
    h = ds.history("h18", "gemini", "/home/dev/src/notebook-exports",
                   "Python CLI that executes Jupyter notebooks and exports HTML/PDF reports: an nbconvert template "
                   "error, WeasyPrint replaced by Playwright for PDFs, the execution timeout, and missing images.",
                   start="2026-03-23T08:00:00Z", model="gemini-2.5-pro")
    h.commits = [("19ae0f3", "nbx export --format html|pdf"), ("c6d2b80", "Execute notebooks before export"), ("f08e4a1", "Docker image for the report runner")]

    # ---- s1: TemplateNotFound
    s = h.session("2026-03-23T09:30:12Z")
    s.prompt("After rebuilding the image, every HTML export fails with jinja2 TemplateNotFound. Nothing changed in our code.")
    orient(s)
    e_tmpl = s.bash("nbx export examples/sales.ipynb --format html -o /tmp/out", "", code=1, stderr=(
        "Traceback (most recent call last):\n  File \"/app/exporter/html.py\", line 13, in render_html\n    body, _ = exporter.from_notebook_node(nb)\n"
        "jinja2.exceptions.TemplateNotFound: lab/index.html.j2\n"), desc="Reproduce")
    s.bash("pip show nbconvert jupyterlab_pygments | grep -E '^(Name|Version|Location)'", "Name: nbconvert\nVersion: 7.16.4\nLocation: /usr/local/lib/python3.12/site-packages\n"
           "WARNING: Package(s) not found: jupyterlab_pygments\n", desc="Installed versions")
    s.bash("ls /usr/local/share/jupyter/nbconvert/templates 2>&1; python -c 'import jupyter_core.paths as p; print(p.jupyter_path(\"nbconvert\",\"templates\"))'",
           "ls: cannot access '/usr/local/share/jupyter/nbconvert/templates': No such file or directory\n['/root/.local/share/jupyter/nbconvert/templates', "
           "'/usr/local/share/jupyter/nbconvert/templates', '/usr/share/jupyter/nbconvert/templates']\n", desc="Template search path")
    s.read("Dockerfile", """FROM python:3.12-slim
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir --target /usr/local/lib/python3.12/site-packages -r requirements.txt
COPY . .
ENTRYPOINT ["nbx"]
""")
    e_docker = s.edit("Dockerfile", "RUN pip install --no-cache-dir --target /usr/local/lib/python3.12/site-packages -r requirements.txt",
                      "# No --target: it skips the data files (share/jupyter/nbconvert/templates) nbconvert needs.\n"
                      "RUN pip install --no-cache-dir -r requirements.txt")
    s.bash("docker build -t nbx:dev . -q && docker run --rm -v $PWD/examples:/nb nbx:dev export /nb/sales.ipynb --format html -o /nb/out && ls -la examples/out",
           "sha256:3c1d0a7b9e2f4c68a5d1b0e9f7c3a2d4b6e8f0a1c3d5e7f9b2a4c6d8e0f1a3b5\ntotal 1412\n-rw-r--r-- 1 root root 1441203 Mar 23 09:51 sales.html\n",
           desc="Rebuild and export", secs=95.0)
    s.stop("The image installed requirements with `pip install --target`, which only copies packages into "
           "site-packages and drops their data files, so nbconvert's templates (share/jupyter/nbconvert/templates/lab) "
           "were missing: TemplateNotFound lab/index.html.j2. The Dockerfile now does a normal pip install; the HTML "
           "export works in the rebuilt image.")
    s.prompt("commit")
    commit(s, "Docker: plain pip install so nbconvert templates are installed", ["Dockerfile"], "8b4e1d2", 2, 1)
    s.stop("Committed as 8b4e1d2.")
    s.end()

    # ---- s2: weasyprint -> playwright
    s = h.session("2026-03-26T13:12:55Z")
    e_p_pw = s.prompt("PDFs look broken: plotly charts are blank and the dataframes lose their grid layout. WeasyPrint "
                      "doesn't run JavaScript and only does part of CSS grid. Switch PDF rendering to headless Chromium "
                      "via Playwright.")
    orient(s)
    s.read("exporter/pdf.py", PDF_PY)
    s.bash("pip install 'playwright==1.49.1' && playwright install --with-deps chromium 2>&1 | tail -1", "Chromium 131.0.6778.33 (playwright build v1148) downloaded to /root/.cache/ms-playwright/chromium-1148\n",
           desc="Install Playwright and Chromium", secs=60.0)
    e_pdf = s.write("exporter/pdf.py", """from pathlib import Path

from playwright.sync_api import sync_playwright

from exporter.html import render_html


def export_pdf(nb_path: Path, out: Path) -> Path:
    \"\"\"Print the HTML export with headless Chromium: runs plotly's JS and supports CSS grid.\"\"\"
    html_path = out / (nb_path.stem + ".html")
    html_path.write_text(render_html(nb_path), encoding="utf-8")
    target = out / (nb_path.stem + ".pdf")
    with sync_playwright() as p:
        browser = p.chromium.launch()
        page = browser.new_page()
        page.goto(html_path.resolve().as_uri(), wait_until="networkidle")
        page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].every(e => e._fullLayout)")
        page.pdf(path=str(target), format="A4", print_background=True, margin={"top": "12mm", "bottom": "12mm"})
        browser.close()
    return target
""")
    e_pw_err = s.bash("python -m pytest tests/test_pdf.py -q", "", code=1, stderr=(
        "E   playwright._impl._errors.TimeoutError: Page.wait_for_function: Timeout 30000ms exceeded.\n"
        "FAILED tests/test_pdf.py::test_pdf_has_charts - playwright._impl._errors.TimeoutError: Page.wait_for_function: Timeout 30000ms exceeded.\n"
        "1 failed, 2 passed in 34.12s\n"), desc="PDF tests", secs=35.0)
    s.grep("plotly", "exporter/html.py:9:    exporter = HTMLExporter(template_name=\"lab\")\ntests/fixtures/charts.ipynb:57:    \"<script src=\\\"https://cdn.plot.ly/plotly-2.35.2.min.js\\\"></script>\"\n")
    s.read("exporter/html.py", HTML_PY)
    s.edit("exporter/html.py", """    exporter = HTMLExporter(template_name="lab")""", """    exporter = HTMLExporter(template_name="lab")
    # Reports are rendered offline (CI has no internet): inline plotly instead of loading it from the CDN.
    exporter.register_preprocessor(InlinePlotlyPreprocessor(), enabled=True)""")
    s.edit("exporter/html.py", "from nbconvert import HTMLExporter\n", "from nbconvert import HTMLExporter\n\nfrom exporter.preprocessors import InlinePlotlyPreprocessor\n")
    s.bash("python -m pytest tests/test_pdf.py -q", pytest_ok(3, "9.84"), desc="PDF tests", secs=11.0)
    s.stop("PDF export renders the HTML in headless Chromium via Playwright (A4, backgrounds, 12 mm margins) after "
           "waiting for every plotly chart to lay out. The chart test first timed out because the notebook loads "
           "plotly from the CDN and the test environment is offline; an InlinePlotlyPreprocessor now embeds plotly in the HTML.")
    s.prompt("remove weasyprint from the requirements and the Dockerfile deps, then commit")
    s.read("requirements.txt", "nbconvert==7.16.4\nnbclient==0.10.0\nweasyprint==62.3\nclick==8.1.7\n")
    s.edit("requirements.txt", "weasyprint==62.3\n", "playwright==1.49.1\n")
    s.edit("Dockerfile", "RUN pip install --no-cache-dir -r requirements.txt", "RUN pip install --no-cache-dir -r requirements.txt && playwright install --with-deps chromium")
    commit(s, "PDF via Playwright/Chromium instead of WeasyPrint", ["exporter/pdf.py", "exporter/html.py", "exporter/preprocessors.py",
           "requirements.txt", "Dockerfile", "tests/test_pdf.py"], "2fd95a6", 58, 11)
    s.stop("Committed as 2fd95a6.")
    s.end()

    # ---- s3: timeout 600 -> 1200
    s = h.session("2026-04-01T08:45:30Z")
    s.prompt("The monthly forecast notebook gets killed: 'Cell execution timed out after 600 seconds'. It legitimately "
             "trains a model for ~14 minutes. Raise the per-cell timeout to 20 minutes.")
    orient(s)
    e_cell_to = s.bash("nbx export reports/forecast_monthly.ipynb --format pdf -o /tmp/out 2>&1 | tail -3", "", code=1, stderr=(
        "nbclient.exceptions.CellTimeoutError: A cell timed out while it was being executed, after 600 seconds.\n"
        "The message was: Cell execution timed out.\nHere is a preview of the cell contents:\n-------------------\nmodel = fit_prophet(history, seasonality='multiplicative')\n"),
        desc="Reproduce", secs=612.0)
    s.read("exporter/run.py", RUN_PY)
    s.read("exporter/html.py")
    e_t1200 = s.edit("exporter/html.py", "EXEC_TIMEOUT = 600", "EXEC_TIMEOUT = 1200  # per cell; forecast_monthly trains ~14 min")
    s.bash("time nbx export reports/forecast_monthly.ipynb --format pdf -o /tmp/out", "wrote /tmp/out/forecast_monthly.pdf (3.1 MB)\n\nreal\t15m41.220s\n",
           desc="Export the forecast report", secs=941.0)
    s.stop("EXEC_TIMEOUT (per cell, used by NotebookClient) is 1200 s now; the forecast export completes in 15m41s.")
    s.prompt("commit")
    checks(s, "python", [0], pkg="exporter", n=9)
    commit(s, "Cell timeout 1200s", ["exporter/html.py"], "77c3e90", 1, 1)
    s.stop("Committed as 77c3e90.")
    s.end()

    # ---- s4: images missing + timeout 900 per-notebook override
    s = h.session("2026-04-08T15:02:10Z")
    s.prompt("HTML reports from notebooks in subfolders show broken images (the ones inserted with markdown "
             "![](img/chart.png)). PDFs are fine.")
    orient(s)
    tree(s, ["exporter/__init__.py", "exporter/cli.py", "exporter/html.py", "exporter/pdf.py", "exporter/preprocessors.py",
             "exporter/run.py", "reports/q1/review.ipynb", "reports/q1/img/chart.png"], "exporter reports/q1")
    e_relimg = s.bash("grep -o 'src=\"[^\"]*\"' /tmp/out/review.html | head -3", "src=\"img/chart.png\"\nsrc=\"img/funnel.png\"\nsrc=\"data:image/png;base64,iVBORw0KGgo...\"\n",
                      desc="Image sources in the exported HTML")
    s.read("exporter/html.py")
    e_embed = s.edit("exporter/html.py", """def render_html(nb_path: Path) -> str:
    nb = nbformat.read(nb_path, as_version=4)""", """def _embed_local_images(nb, base: Path) -> None:
    \"\"\"Markdown images are relative to the notebook; the HTML lands elsewhere. Inline them as data URIs.\"\"\"
    pattern = re.compile(r"!\\[([^\\]]*)\\]\\((?!https?:|data:)([^)]+)\\)")
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue

        def inline(m):
            path = (base / m.group(2)).resolve()
            if not path.is_file():
                return m.group(0)
            data = base64.b64encode(path.read_bytes()).decode()
            return f"![{m.group(1)}](data:image/{path.suffix.lstrip('.')};base64,{data})"

        cell.source = pattern.sub(inline, cell.source)


def render_html(nb_path: Path) -> str:
    nb = nbformat.read(nb_path, as_version=4)
    _embed_local_images(nb, nb_path.parent)""")
    s.edit("exporter/html.py", "import base64\n", "import base64\nimport re\n")
    s.bash("nbx export reports/q1/review.ipynb --format html -o /tmp/out && grep -c 'src=\"img/' /tmp/out/review.html", "wrote /tmp/out/review.html (2.4 MB)\n0\n",
           desc="Export again", code=0)
    s.bash("python -m pytest -q", pytest_ok(14, "12.40"), desc="Tests", secs=14.0)
    s.stop("Markdown images like ![](img/chart.png) are relative to the notebook's folder, but the HTML is written to "
           "the output folder, so the browser couldn't resolve them. render_html now inlines local markdown images as base64 data URIs; remote and data: "
           "URLs are left alone.")
    s.prompt("ok. also the 20 minute cell timeout is hiding hung kernels in the other reports, ops wants 15 minutes "
             "max; forecast can pass its own value. add a --cell-timeout flag")
    s.read("exporter/cli.py", """@click.command()
@click.argument("notebook", type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["html", "pdf"]), default="html")
@click.option("-o", "--out", type=click.Path(path_type=Path), default=Path("out"))
def export(notebook, fmt, out):
    run_export(notebook, fmt, out)
""")
    e_t900 = s.edit("exporter/html.py", "EXEC_TIMEOUT = 1200  # per cell; forecast_monthly trains ~14 min",
                    "EXEC_TIMEOUT = 900  # per cell default (ops: hung kernels must fail within 15 min); override with --cell-timeout")
    e_flag = s.edit("exporter/cli.py", """@click.option("-o", "--out", type=click.Path(path_type=Path), default=Path("out"))
def export(notebook, fmt, out):
    run_export(notebook, fmt, out)""", """@click.option("-o", "--out", type=click.Path(path_type=Path), default=Path("out"))
@click.option("--cell-timeout", type=int, default=None, help="Seconds per cell (default 900).")
def export(notebook, fmt, out, cell_timeout):
    run_export(notebook, fmt, out, cell_timeout=cell_timeout)""")
    s.read("Makefile", "reports:\n\tnbx export reports/forecast_monthly.ipynb --format pdf -o dist\n\tnbx export reports/q1/review.ipynb --format html -o dist\n")
    s.edit("Makefile", "\tnbx export reports/forecast_monthly.ipynb --format pdf -o dist", "\tnbx export reports/forecast_monthly.ipynb --format pdf -o dist --cell-timeout 1200")
    s.bash("python -m pytest -q", pytest_ok(15, "12.61"), desc="Tests", secs=14.0)
    s.stop("Default per-cell timeout is 900 s; `nbx export --cell-timeout N` overrides it, and the Makefile passes 1200 "
           "for forecast_monthly only.")
    s.prompt("commit both fixes")
    commit(s, "HTML: inline local markdown images", ["exporter/html.py", "tests/test_html.py"], "0a6c5f8", 21, 1)
    commit(s, "Cell timeout 900s default, --cell-timeout override", ["exporter/html.py", "exporter/cli.py", "exporter/run.py", "Makefile"], "d35b7e2", 8, 4)
    s.stop("Committed 0a6c5f8 and d35b7e2.")
    s.end()

    h.q("failed_command", "What error did HTML exports fail with after the image rebuild?", "html export error",
        "jinja2.exceptions.TemplateNotFound: lab/index.html.j2.", ["TemplateNotFound"], [e_tmpl])
    h.q("fix_location", "Where did we fix the missing nbconvert templates?", "missing nbconvert templates",
        "Dockerfile: plain pip install instead of pip install --target (which dropped the data files).", ["Dockerfile"], [e_docker])
    h.q("decision", "Why did we stop using WeasyPrint for PDFs?", "pdf renderer switch",
        "WeasyPrint runs no JavaScript (blank plotly charts) and only partly supports CSS grid; Chromium via Playwright does both.",
        ["doesn't run JavaScript"], [e_p_pw])
    h.q("failed_command", "Why did the PDF chart test time out after the renderer switch?", "pdf chart timeout",
        "Page.wait_for_function timed out: plotly loaded from the CDN and tests run offline; plotly is now inlined.",
        ["Page.wait_for_function"], [e_pw_err])
    h.q("knowledge_update", "What is the default per-cell execution timeout now?", "cell execution timeout",
        "900 s by default (was 600, then 1200); --cell-timeout overrides, forecast uses 1200.", ["EXEC_TIMEOUT = 900"], [e_t900])
    h.q("temporal", "What timeout did the forecast notebook hit before any timeout change?", "forecast timeout",
        "CellTimeoutError after 600 seconds (fit_prophet cell).", ["after 600 seconds"], [e_cell_to])
    h.q("fix_location", "Where did we fix the broken images in HTML reports?", "broken report images",
        "exporter/html.py: _embed_local_images inlines relative markdown images as base64 data URIs.", ["exporter/html.py", "_embed_local_images"], [e_embed])
    h.q("file_history", "Which files did we touch to add the per-run cell timeout option?", "cell timeout option",
        "exporter/cli.py (--cell-timeout), exporter/html.py (EXEC_TIMEOUT 900), and the Makefile.",
        ["exporter/cli.py", "--cell-timeout"], [e_flag, e_t900])
    h.q("file_history", "What did we change in the PDF exporter?", "pdf exporter",
        "exporter/pdf.py rewritten to print the HTML with Playwright headless Chromium.", ["exporter/pdf.py"], [e_pdf])
    h.q("temporal", "What did we raise the cell timeout to the first time?", "raise cell timeout",
        "1200 seconds (20 minutes) for the forecast notebook.", ["EXEC_TIMEOUT = 1200"], [e_t1200])
