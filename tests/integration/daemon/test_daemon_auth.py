"""Authentication (bearer tokens) and team isolation."""

from .conftest import TOKENS, Api, tar_of


def test_missing_or_bad_token_is_401(daemon, anon, api, sandbox):
    n = len(api.list())
    bad = Api(daemon.port, "not-a-token")
    prefix = Api(daemon.port, TOKENS["A"][:-1])
    longer = Api(daemon.port, TOKENS["A"] + "x")
    routes = [("GET", "/v1/sandboxes", None), ("POST", "/v1/sandboxes", {}),
              ("GET", f"/v1/sandboxes/{sandbox}", None),
              ("POST", f"/v1/sandboxes/{sandbox}/stop", None),
              ("POST", f"/v1/sandboxes/{sandbox}/commands", {"cmd": "/bin/true"}),
              ("GET", f"/v1/sandboxes/{sandbox}/files/content?path=/etc/hostname", None)]
    for cli in (anon, bad, prefix, longer):
        for method, path, body in routes:
            r = cli.request(method, path, body=body)
            assert r.status == 401, (cli.token, method, path, r)
            assert r.error_code == "unauthorized", r
    # Other schemes and malformed headers.
    for hdr in ("Basic " + TOKENS["A"], TOKENS["A"], "Bearer", "Bearer ",
                "Bearer " + TOKENS["B"] + " " + TOKENS["A"]):
        r = anon.request("GET", "/v1/sandboxes", headers={"Authorization": hdr})
        assert r.status == 401, (hdr, r)
    # Nothing happened: no sandbox created, the sandbox still runs, no command started.
    assert len(api.list()) == n
    assert api.sandbox(sandbox)["status"] == "running"
    assert api.cmd_list(sandbox).json["commands"] == []
    # The health probe needs no token.
    assert anon.health().status == 200


def test_team_isolation(api, api_b, make_sandbox):
    sid = make_sandbox()
    api.put_files(sid, tar_of("secret.txt", b"team A only\n"))
    cmd = api.start_ok(sid, "/bin/sleep", "300")
    done = api.run(sid, "/bin/echo", "a-output")
    cid, done_id = cmd["id"], done.exit["id"]
    sb = make_sandbox(client=api_b)

    # B does not see A's sandbox anywhere, and A does not see B's.
    assert sid not in [s["id"] for s in api_b.list()]
    assert sb not in [s["id"] for s in api.list()]
    assert api.get(sb).status == 404

    base = f"/v1/sandboxes/{sid}"
    attempts = [
        ("GET", base, None, None),
        ("POST", base + "/stop", None, None),
        ("POST", base + "/extend", {"duration_ms": 1000}, None),
        ("PUT", base + "/network-policy", "allow-all", None),
        ("GET", base + "/commands", None, None),
        ("POST", base + "/commands", {"cmd": "/bin/touch", "args": ["/workspace/b-was-here"]},
         None),
        ("GET", f"{base}/commands/{cid}", None, None),
        ("GET", f"{base}/commands/{done_id}", None, None),
        ("GET", f"{base}/commands/{cid}/wait?timeout_ms=10", None, None),
        ("GET", f"{base}/commands/{done_id}/logs", None, None),
        ("POST", f"{base}/commands/{cid}/kill", {"signal": 9}, None),
        ("POST", f"{base}/commands/{cid}/stdin?close=true", None, b"x"),
        ("GET", base + "/files/content?path=/workspace/secret.txt", None, None),
        ("GET", base + "/files?path=/workspace", None, None),
        ("POST", base + "/files/mkdir", {"path": "/workspace/b-dir"}, None),
        ("PUT", base + "/files?dir=/workspace", None, tar_of("b-file", b"from B")),
    ]
    for method, path, body, raw in attempts:
        r = api_b.request(method, path, body=body, raw=raw)
        assert r.status == 404, (method, path, r)
        assert r.error_code == "not_found", r
        assert b"team A only" not in r.data and b"a-output" not in r.data
    # B's attempts changed nothing of A's.
    s = api.sandbox(sid)
    assert s["status"] == "running" and s["network_policy"] == "deny-all"
    assert s["policy_generation"] == 1
    assert api.cmd_get(sid, cid).json["command"]["status"] == "running"
    assert len(api.cmd_list(sid).json["commands"]) == 2
    out = api.sh(sid, "ls -A /workspace")
    assert out.stdout == b"secret.txt\n"
    assert api.kill(sid, cid, 9).status == 200
