"""A kept-alive HTTP/1.1 client of airlockd's native API, as an SDK holds one: what
bench/daemon.py, bench/density.py and bench/ab_daemon.py send their requests through."""
import http.client
import json


class ApiClient:
    def __init__(self, port, token, timeout=60):
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.last_warm = False

    def call(self, method, path, body=None):
        """The response body; RuntimeError on any status >= 300."""
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None,
                          headers=self.headers)
        r = self.conn.getresponse()
        data = r.read()
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: {r.status} {data[:300]!r}")
        return data

    def create(self, body=None):
        """A new sandbox's id (last_warm: whether the pool served it)."""
        s = json.loads(self.call("POST", "/v1/sandboxes", body or {}))["sandbox"]
        self.last_warm = bool(s.get("warm"))
        return s["id"]

    def run_true(self, sbx):
        """`true` in sbx, waited for; RuntimeError unless it exited 0."""
        out = self.call("POST", f"/v1/sandboxes/{sbx}/commands", {"cmd": "true", "wait": True})
        last = json.loads(out.strip().split(b"\n")[-1])
        if not (last.get("type") == "exit" and last["command"]["exit_code"] == 0):
            raise RuntimeError(f"unexpected command result: {last}")

    def stop(self, sbx):
        self.call("POST", f"/v1/sandboxes/{sbx}/stop")
