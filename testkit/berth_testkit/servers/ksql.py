"""A protocol-level ksqlDB for tests: ksqlDB has no server in any registry reachable here.

It answers ``POST /query`` as ksqlDB documents it for pull queries on a
table (``Accept: application/vnd.ksql.v1+json``): a JSON array of a header
then one ``{"row": {"columns": [...]}}`` per row. It understands exactly the
statement berth sends (``SELECT `k`, `v` FROM `t` WHERE `k` IN ('a', ...);``,
with ksqlDB's quoting) and records every statement, so tests can check that
names are quoted, never interpolated raw. ``answer`` can be replaced to make
it speak nonsense.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STATEMENT = re.compile(
    r"^SELECT `(?P<k>[^`]+)`, `(?P<v>[^`]+)` FROM `(?P<t>[^`]+)` "
    r"WHERE `(?P=k)` IN \((?P<names>.*)\);$", re.S)
LITERAL = re.compile(r"'((?:[^']|'')*)'")


class KsqlServer:
    def __init__(self) -> None:
        self.tables: dict[str, dict[str, Any]] = {}  # table → {key: value}
        self.statements: list[str] = []
        self.answer: Any = None  # replaces every answer when set
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, reply = server.query(str(body.get("ksql", "")))
                data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.ksql.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def query(self, statement: str) -> tuple[int, Any]:
        self.statements.append(statement)
        if self.answer is not None:
            return 200, self.answer
        m = STATEMENT.match(statement.strip())
        if m is None:
            return 400, {"@type": "statement_error", "error_code": 40001,
                         "message": f"line 1:1: mismatched input: {statement[:40]}"}
        table = self.tables.get(m["t"])
        if table is None:
            return 400, {"@type": "statement_error", "error_code": 40001,
                         "message": f"{m['t']} does not exist."}
        names = [n.replace("''", "'") for n in LITERAL.findall(m["names"])]
        rows: list[Any] = [{"header": {"queryId": "pull", "schema":
                                       f"`{m['k']}` STRING, `{m['v']}` DOUBLE"}}]
        rows += [{"row": {"columns": [n, table[n]]}} for n in names if n in table]
        return 200, rows

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
