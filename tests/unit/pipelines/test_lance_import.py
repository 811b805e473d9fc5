"""``import bookindex`` keeps ``import lance`` from importing the REST namespace client's API
classes (bookindex/_lance.py), and whoever uses the client still gets all of it: the deferred
package's ``__init__`` runs on its first attribute, and Lance reads and writes as before."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

_PROBE = """
import json, sys, tempfile
import bookindex
import lance, lancedb
import pyarrow as pa

def api_modules():
    return sorted(k for k in sys.modules if k.startswith("lance_namespace_urllib3_client.api."))

state = {"api_before": api_modules()}
with tempfile.TemporaryDirectory() as tmp:
    lance.write_dataset(pa.table({"x": [1, 2, 3]}), tmp + "/t.lance")
    state["rows"] = lance.dataset(tmp + "/t.lance").to_table()["x"].to_pylist()
    state["lancedb_rows"] = lancedb.connect(tmp).open_table("t").count_rows()
state["api_after_io"] = api_modules()
import lance_namespace_urllib3_client as client
state["client"] = [client.TableApi.__name__, client.ApiClient.__name__, client.__version__ != ""]
state["api_after_use"] = len(api_modules())
print(json.dumps(state))
"""


def test_lance_imports_without_the_rest_client_and_the_client_loads_on_first_use():
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, check=True
    )
    state = json.loads(done.stdout.strip().splitlines()[-1])
    assert state["api_before"] == [] and state["api_after_io"] == []
    assert state["rows"] == [1, 2, 3] and state["lancedb_rows"] == 3
    assert state["client"] == ["TableApi", "ApiClient", True]
    assert state["api_after_use"] >= 7  # data, index, metadata, namespace, table, tag, transaction
