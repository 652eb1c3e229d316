from ._common import commit, diffstat, orient, pytest_ok, tree

TRANSFORM = """from decimal import Decimal


def to_document(product: dict) -> dict:
    return {
        "sku": product["sku"],
        "title": product["title"].strip(),
        "brand": product.get("brand"),
        "price": float(product["price"]),
        "categories": product.get("categories", []),
        "in_stock": product["stock"] > 0,
    }
"""

CLIENT = """from elasticsearch import Elasticsearch, helpers

from indexer.settings import settings

es = Elasticsearch(settings.search_url, request_timeout=30)

BULK_SIZE = 500


def bulk_index(index: str, docs):
    actions = ({"_index": index, "_id": d["sku"], "_source": d} for d in docs)
    return helpers.bulk(es, actions, chunk_size=BULK_SIZE, raise_on_error=False)
"""


def build(ds):
    h = ds.history("h15", "codex", "/home/dev/src/search-indexer",
                   "Python product search indexer: price parsing that broke bulk indexing, the Elasticsearch client "
                   "replaced by opensearch-py, bulk size tuning (up, then down), and zero-downtime reindex via aliases. "
                   "Turn ends arrive through Codex's notify program.",
                   start="2026-04-06T08:00:00Z", model="gpt-5.5-codex")
    h.commits = [("ab12c9e", "Index categories as keywords"), ("3f0e8d5", "Nightly full reindex job"), ("c71b2a4", "Pin elasticsearch==8.13")]

    # ---- s1: mapper_parsing_exception
    s = h.session("2026-04-06T09:41:22Z", notify=True)
    s.prompt("The nightly reindex reports 3,412 failed docs, all mapper_parsing_exception on price. Find out what "
             "prices look like in those docs and fix the transform.")
    orient(s)
    tree(s, ["indexer/__init__.py", "indexer/client.py", "indexer/transform.py", "indexer/settings.py", "indexer/jobs/reindex.py",
             "tests/test_transform.py", "tests/conftest.py"])
    e_mapper = s.bash("python -m indexer.jobs.reindex --dry-run --sample-errors 3 2>&1 | tail -6",
                      "failed: 3412 of 1204377\n{'index': {'_id': 'SKU-88120', 'status': 400, 'error': {'type': 'mapper_parsing_exception', "
                      "'reason': \"failed to parse field [price] of type [scaled_float] in document with id 'SKU-88120'. Preview of field's value: '1.299,00'\"}}}\n"
                      "{'index': {'_id': 'SKU-90455', 'status': 400, 'error': {'type': 'mapper_parsing_exception', 'reason': \"failed to parse field [price] "
                      "of type [scaled_float] in document with id 'SKU-90455'. Preview of field's value: 'NaN'\"}}}\n", secs=210.0)
    s.read("indexer/transform.py", TRANSFORM)
    s.bash("psql \"$CATALOG_DB_URL\" -Atc \"SELECT price FROM products WHERE price !~ '^[0-9]+(\\.[0-9]+)?$' LIMIT 6\"",
           "1.299,00\n89,90\nNaN\n1.049,50\n\n12,00\n", secs=2.0)
    e_pricefix = s.edit("indexer/transform.py", """from decimal import Decimal
""", """import math
import re
from decimal import Decimal, InvalidOperation

_EU = re.compile(r"^\\d{1,3}(\\.\\d{3})*,\\d{2}$|^\\d+,\\d{2}$")


def parse_price(raw) -> float | None:
    \"\"\"Catalog prices are strings; the German feed uses 1.299,00. Returns None for junk.\"\"\"
    if raw is None:
        return None
    text = str(raw).strip()
    if _EU.match(text):
        text = text.replace(".", "").replace(",", ".")
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return None if not value.is_finite() else float(value)
""")
    s.edit("indexer/transform.py", """        "price": float(product["price"]),""", """        "price": parse_price(product["price"]),""")
    s.write("tests/test_price.py", """import pytest

from indexer.transform import parse_price


@pytest.mark.parametrize("raw,expected", [("12.50", 12.5), ("1.299,00", 1299.0), ("89,90", 89.9), ("NaN", None), ("", None), (None, None)])
def test_parse_price(raw, expected):
    assert parse_price(raw) == expected
""")
    s.bash("python -m pytest -q tests/test_price.py tests/test_transform.py", pytest_ok(11, "0.31"), secs=2.0)
    s.bash("python -m indexer.jobs.reindex --dry-run 2>&1 | tail -1", "failed: 0 of 1204377\n", secs=205.0)
    s.stop("The failing prices came from the German supplier feed in European format ('1.299,00', '89,90') plus 'NaN' "
           "and empty strings. transform.parse_price converts the EU format and returns None for junk, so the field is "
           "simply absent instead of rejecting the document. Dry run: 0 failures of 1,204,377.")
    s.prompt("commit")
    commit(s, "transform: parse EU-formatted prices, drop NaN/empty", ["indexer/transform.py", "tests/test_price.py"], "e9d04b7", 31, 2)
    s.stop("Committed as e9d04b7.")

    # ---- s2: elasticsearch -> opensearch
    s = h.session("2026-04-10T13:05:40Z", notify=True)
    s.prompt("Infra moved the search cluster to AWS OpenSearch 2.15 last night and the indexer can't connect anymore. "
             "Fix it.")
    orient(s)
    e_unsupported = s.bash("python -m indexer.jobs.reindex --dry-run 2>&1 | tail -4", "Traceback (most recent call last):\n"
                           "  File \"/home/dev/src/search-indexer/indexer/client.py\", line 12, in bulk_index\n"
                           "elasticsearch.UnsupportedProductError: The client noticed that the server is not Elasticsearch and we do not support this unknown product\n",
                           code=1, secs=4.0)
    s.read("indexer/client.py", CLIENT)
    s.bash("pip uninstall -y elasticsearch && pip install 'opensearch-py==2.7.1' && pip freeze | grep -i opensearch", "Successfully uninstalled elasticsearch-8.13.2\n"
           "Successfully installed opensearch-py-2.7.1\nopensearch-py==2.7.1\n", secs=8.0)
    e_osclient = s.write("indexer/client.py", """from opensearchpy import OpenSearch, RequestsHttpConnection, helpers
from requests_aws4auth import AWS4Auth

from indexer.settings import settings

# The cluster is AWS OpenSearch: the elasticsearch client >= 7.14 refuses non-Elastic servers.
os_client = OpenSearch(
    hosts=[settings.search_url],
    http_auth=AWS4Auth(refreshable_credentials=settings.aws_credentials(), region=settings.aws_region, service="es"),
    connection_class=RequestsHttpConnection,
    timeout=30,
)

BULK_SIZE = 500


def bulk_index(index: str, docs):
    actions = ({"_index": index, "_id": d["sku"], "_source": d} for d in docs)
    return helpers.bulk(os_client, actions, chunk_size=BULK_SIZE, raise_on_error=False)
""")
    s.bash("grep -rn 'from elasticsearch\\|import elasticsearch' indexer tests", "tests/conftest.py:3:from elasticsearch import Elasticsearch\n", secs=1.0)
    s.bash("sed -i 's/from elasticsearch import Elasticsearch/from opensearchpy import OpenSearch as Elasticsearch/' tests/conftest.py && "
           "sed -i 's/^elasticsearch==8.13.2$/opensearch-py==2.7.1\\nrequests-aws4auth==1.3.1/' requirements.txt && python -m pytest -q", pytest_ok(27, "2.88"), secs=6.0)
    s.bash("python -m indexer.jobs.reindex --dry-run 2>&1 | tail -1", "failed: 0 of 1204377\n", secs=190.0)
    e_dec_os = s.stop("The elasticsearch-py 8.x client checks the product header and refuses anything that isn't Elastic, "
                      "so against OpenSearch it raised UnsupportedProductError. Replaced it with opensearch-py 2.7.1 "
                      "using SigV4 auth (requests-aws4auth, service 'es') since the domain uses IAM. The helpers.bulk "
                      "API is the same, so the job code didn't change; dry run is clean.")
    s.prompt("commit and push")
    commit(s, "Switch to opensearch-py (cluster moved to AWS OpenSearch)", ["indexer/client.py", "tests/conftest.py", "requirements.txt"], "4b7e2f1", 19, 6)
    s.bash("git push origin main", "To github.com:acme/search-indexer.git\n   e9d04b7..4b7e2f1  main -> main\n", secs=2.0)
    s.stop("Committed 4b7e2f1 and pushed.")

    # ---- s3: bulk size up
    s = h.session("2026-04-15T10:20:03Z", notify=True)
    s.prompt("Full reindex takes 3h40m. Tune bulk indexing. Try bigger bulk requests and see what the cluster can take.")
    orient(s)
    s.read("indexer/client.py")
    e_bench = s.bash("for n in 500 1000 2000 4000; do BULK_SIZE=$n python -m indexer.bench --docs 100000 2>&1 | tail -1; done",
                     "bulk=500 docs/s=1311 rejected=0\nbulk=1000 docs/s=2208 rejected=0\nbulk=2000 docs/s=3374 rejected=0\nbulk=4000 docs/s=3390 rejected=211\n",
                     secs=420.0)
    e_bulk2000 = s.edit("indexer/client.py", "BULK_SIZE = 500", "BULK_SIZE = 2000  # 3.4k docs/s on the bench; 4000 gets 429 rejections")
    s.edit("indexer/client.py", "    return helpers.bulk(os_client, actions, chunk_size=BULK_SIZE, raise_on_error=False)",
           "    return helpers.bulk(os_client, actions, chunk_size=BULK_SIZE, max_chunk_bytes=50 * 1024 * 1024, raise_on_error=False)")
    s.bash("python -m pytest -q", pytest_ok(27, "2.91"), secs=6.0)
    s.stop("Bench on 100k docs: 500 -> 1.3k docs/s, 1000 -> 2.2k, 2000 -> 3.4k, 4000 -> 3.4k with 211 rejected (429). "
           "Set BULK_SIZE = 2000 with a 50 MB max_chunk_bytes guard; a full reindex should take about 1h.")
    s.prompt("commit")
    diffstat(s, [("indexer/client.py", 2, 2)])
    commit(s, "Bulk size 2000 (3.4k docs/s)", ["indexer/client.py"], "91c3ad0", 2, 2)
    s.stop("Committed as 91c3ad0.")

    # ---- s4: 413, bulk down, alias swap
    s = h.session("2026-04-21T08:55:11Z", notify=True)
    s.prompt("Last night's reindex failed halfway: 'TransportError(413, ...)'. And during the reindex search was empty "
             "for 20 minutes because we delete and recreate the index. Fix both.")
    orient(s)
    e_413 = s.bash("grep -m2 -E 'TransportError|413' /var/log/search-indexer/reindex-2026-04-20.log",
                   "2026-04-21T02:41:09Z ERROR bulk chunk failed: TransportError(413, '{\"Message\":\"Request size exceeded 10485760 bytes\"}')\n"
                   "2026-04-21T02:41:09Z ERROR aborting reindex after 612000 docs\n", secs=1.0)
    s.bash("aws opensearch describe-domain --domain-name products --query 'DomainStatus.ClusterConfig.InstanceType' --output text", "r6g.large.search\n", secs=2.0)
    s.read("indexer/client.py")
    e_bulk1000 = s.multiedit("indexer/client.py", [
        ("BULK_SIZE = 2000  # 3.4k docs/s on the bench; 4000 gets 429 rejections",
         "BULK_SIZE = 1000  # r6g.large.search caps HTTP bodies at 10 MiB; docs with long descriptions made 2000-doc chunks exceed it"),
        ("max_chunk_bytes=50 * 1024 * 1024", "max_chunk_bytes=9 * 1024 * 1024"),
    ])
    s.read("indexer/jobs/reindex.py", """def run():
    es_delete_index("products")
    create_index("products", MAPPING)
    bulk_index("products", iter_documents())
""")
    e_alias = s.write("indexer/jobs/reindex.py", """from datetime import datetime, timezone

from indexer.client import bulk_index, os_client
from indexer.mapping import MAPPING

ALIAS = "products"


def run():
    \"\"\"Build a new index, then swap the alias atomically: search never sees an empty index.\"\"\"
    new = f"products-{datetime.now(timezone.utc):%Y%m%d%H%M}"
    os_client.indices.create(index=new, body=MAPPING)
    ok, errors = bulk_index(new, iter_documents())
    if errors:
        os_client.indices.delete(index=new)
        raise RuntimeError(f"reindex failed: {len(errors)} errors, alias unchanged")
    old = list(os_client.indices.get_alias(name=ALIAS).keys()) if os_client.indices.exists_alias(name=ALIAS) else []
    actions = [{"add": {"index": new, "alias": ALIAS}}] + [{"remove": {"index": o, "alias": ALIAS}} for o in old]
    os_client.indices.update_aliases(body={"actions": actions})
    for o in old:
        os_client.indices.delete(index=o)
""")
    s.bash("python -m pytest -q && python -m indexer.jobs.reindex --target staging 2>&1 | tail -2", pytest_ok(29, "3.02") +
           "indexed 1204377 docs into products-202604210931\nalias products -> products-202604210931 (removed products-202604201402)\n", secs=3900.0)
    e_dec_alias = s.stop("The 413 came from the domain's 10 MiB HTTP body limit (r6g.large.search): 2000-doc chunks with long "
                         "descriptions exceeded it. BULK_SIZE is 1000 with max_chunk_bytes 9 MiB. The reindex now builds "
                         "products-<timestamp> and swaps the 'products' alias in one update_aliases call, deleting the old "
                         "index afterwards, so searches never hit an empty index; on errors the alias is left alone. "
                         "Staging run took 1h05m.")
    s.prompt("commit")
    commit(s, "Reindex into a new index and swap the alias; bulk size 1000 (413)", ["indexer/client.py", "indexer/jobs/reindex.py",
           "tests/test_reindex.py"], "5e8a9c3", 44, 7)
    s.stop("Committed as 5e8a9c3.")

    h.q("fix_location", "Where did we fix documents failing to index because of the price field?", "price field indexing",
        "indexer/transform.py: parse_price handles EU-formatted prices and returns None for NaN/empty.",
        ["indexer/transform.py"], [e_pricefix])
    h.q("failed_command", "What error did the reindex report for the bad prices?", "reindex price error",
        "mapper_parsing_exception: failed to parse field [price] of type [scaled_float] (values like '1.299,00', 'NaN').",
        ["mapper_parsing_exception"], [e_mapper])
    h.q("failed_command", "What error did the indexer raise after the cluster moved?", "indexer connection error",
        "elasticsearch.UnsupportedProductError: the server is not Elasticsearch.", ["UnsupportedProductError"], [e_unsupported])
    h.q("decision", "Why did we replace the Elasticsearch client library?", "replace search client",
        "The cluster moved to AWS OpenSearch and the elasticsearch-py 8 client refuses non-Elastic servers; opensearch-py with SigV4.",
        ["opensearch-py"], [e_dec_os])
    h.q("knowledge_update", "What bulk size does the indexer use now?", "bulk size",
        "1000 docs per bulk request with max_chunk_bytes 9 MiB (was 500, then 2000).", ["BULK_SIZE = 1000"], [e_bulk1000])
    h.q("temporal", "What did the first bulk size benchmark show?", "bulk size benchmark",
        "500: 1.3k docs/s, 1000: 2.2k, 2000: 3.4k, 4000: 3.4k with 211 rejected.", ["rejected=211"], [e_bench])
    h.q("temporal", "Which bulk size did we pick right after benchmarking?", "chosen bulk size",
        "2000 documents per request.", ["BULK_SIZE = 2000"], [e_bulk2000])
    h.q("failed_command", "Why did the nightly reindex fail halfway on April 20?", "reindex failed halfway",
        "TransportError(413): request size exceeded 10485760 bytes.", ["TransportError(413"], [e_413])
    h.q("decision", "How do we avoid an empty search index during reindexing?", "reindex downtime",
        "Index into products-<timestamp> and swap the products alias atomically, deleting the old index afterwards.",
        ["alias"], [e_dec_alias])
    h.q("file_history", "What did we change in the reindex job for zero downtime?", "reindex job alias",
        "indexer/jobs/reindex.py rewritten: new timestamped index, update_aliases swap, old index deleted.",
        ["indexer/jobs/reindex.py"], [e_alias])
    h.q("file_history", "What did the client module look like after the OpenSearch switch?", "opensearch client",
        "indexer/client.py: OpenSearch client with AWS4Auth (SigV4), RequestsHttpConnection, same bulk_index helper.",
        ["AWS4Auth"], [e_osclient])
