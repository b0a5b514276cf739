"""--policy FILE equivalents, invalid policies, the log format, --json."""

import json
import time

import pytest


def _write(tmp_path, obj, raw=False):
    p = tmp_path / "policy.json"
    p.write_text(obj if raw else json.dumps(obj))
    return str(p)


def test_policy_file_domains_and_subnets(run_net, net, world, tmp_path):
    pol = _write(tmp_path, {"allow": ["allowed.test", "*.wild.test"],
                            "subnets": {"allow": ["198.51.100.0/24"],
                                        "deny": ["198.51.100.0/26"]}})
    r = run_net(["--policy", pol] + net.sh(
        f"{net.CURL} https://allowed.test/; {net.CURL} https://a.b.wild.test/; "
        f"{net.CURL} http://198.51.100.130/; {net.CURL} http://198.51.100.20/; "
        f"{net.CURL} https://denied.test/"))
    codes = net.codes(r)
    assert [c[0] for c in codes[:3]] == [200, 200, 200], r.out
    assert codes[3][0] == 403 and codes[4][1] == 403, r.out
    assert world.events("denied") == [] and world.packets("denied") == 0
    assert net.find(r.egress, verdict="deny", name="denied.test")


def test_policy_file_allow_all(run_net, net, world, tmp_path):
    r = run_net(["--policy", _write(tmp_path, "allow-all")] +
                net.curl("https://denied.test/"))
    assert net.http_code(r) == 200, r.out
    assert world.events("denied", "http")


def test_policy_file_record_form(run_net, net, world, tmp_path):
    r = run_net(["--policy", _write(tmp_path, {"allow": {"allowed.test": []}})]
                + net.sh(f"{net.CURL} https://allowed.test/; "
                         f"{net.CURL} https://denied.test/"))
    codes = net.codes(r)
    assert codes[0][0] == 200 and codes[1][1] == 403, r.out


BAD_FLAGS = [
    (["--allow-cidr", "10.0.0.0/33"], "10.0.0.0/33"),
    (["--allow-cidr", "banana"], "banana"),
    (["--deny-cidr", "300.1.2.3/8"], "300.1.2.3/8"),
    (["--allow", "*.com"], "*.com"),
    (["--allow", "*.co.uk"], "*.co.uk"),
    (["--allow", "*"], "*"),
    (["--allow", "bad..name.test"], "bad..name.test"),
    (["--allow", "exa mple.test"], "exa mple.test"),
    (["--allow", "www.*.test"], "www.*.test"),
    (["--net", "allow-some"], "allow-some"),
]


@pytest.mark.parametrize("flags,needle", BAD_FLAGS,
                         ids=[b[1] for b in BAD_FLAGS])
def test_invalid_policy_flag_exit_64(run_net, net, flags, needle):
    r = run_net(flags + net.sh("echo SANDBOX-RAN"))
    assert r.returncode == 64, (r.returncode, r.out, r.err)
    assert r.err.startswith("airlock: "), r.err
    assert needle in r.err, f"the message should name {needle!r}: {r.err}"
    assert "SANDBOX-RAN" not in r.out and r.out == ""
    assert r.egress == []


BAD_FILES = [
    ("not-json", "{allow: nope", True, None),
    ("bad-cidr", {"allow": ["allowed.test"],
                  "subnets": {"allow": ["1.2.3.4/99"]}}, False, "1.2.3.4/99"),
    ("wild-star", {"allow": ["*"]}, False, "*"),
    ("psl-wildcard", {"allow": ["*.com"]}, False, "*.com"),
    ("malformed-name", {"allow": ["-bad-.test"]}, False, "-bad-.test"),
    ("rule-bad-regex", {"allow": {"allowed.test": [
        {"match": {"path": {"regex": "(("}}, "response": {"statusCode": 200}}]}},
     False, "regex does not compile"),
    ("rule-forbidden-header", {"allow": {"allowed.test": [
        {"transform": [{"headers": {"Host": "denied.test"}}]}]}},
     False, "managed by the proxy"),
    ("unknown-mode", "allow-some", False, "allow-some"),
    ("allow-not-list", {"allow": "allowed.test"}, False, "allow"),
]


@pytest.mark.parametrize("case", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_invalid_policy_file_exit_64(run_net, net, tmp_path, case):
    name, obj, raw, needle = case
    r = run_net(["--policy", _write(tmp_path, obj, raw)] +
                net.sh("echo SANDBOX-RAN"))
    assert r.returncode == 64, (r.returncode, r.out, r.err)
    assert r.err.startswith("airlock: "), r.err
    if needle:
        assert needle in r.err, f"the message should name {needle!r}: {r.err}"
    elif name == "not-json":
        assert "json" in r.err.lower() or "policy" in r.err.lower(), r.err
    else:
        low = r.err.lower()
        assert "rule" in low or "transform" in low, r.err
    assert r.out == "" and r.egress == []


def test_missing_policy_file_exit_64(run_net, net, tmp_path):
    r = run_net(["--policy", str(tmp_path / "nope.json")] +
                net.sh("echo SANDBOX-RAN"))
    assert r.returncode == 64, (r.returncode, r.err)
    assert "nope.json" in r.err and r.out == ""


FIELDS = {"time": int, "sandbox": str, "generation": int, "layer": str,
          "verdict": str, "reason": str, "bytes_out": int, "bytes_in": int}


def _check_schema(e):
    for k, t in FIELDS.items():
        assert isinstance(e.get(k), t) and not isinstance(e.get(k), bool), \
            (k, e)
    for k, t in (("name", str), ("address", str), ("port", int)):
        assert k in e and (e[k] is None or isinstance(e[k], t)), (k, e)
    assert e["layer"] in {"dns", "proxy", "transparent", "tls"}, e
    assert e["verdict"] in {"allow", "deny"}, e
    assert e["reason"], e


def test_egress_log_schema(run_net, net, world):
    t0 = int(time.time() * 1000)
    r = run_net(["--allow", "allowed.test"] + net.sh(
        f"{net.CURL} https://allowed.test/; {net.CURL} http://denied.test/; "
        f"{net.CURL} --noproxy '*' https://allowed.test/; "
        "python3 /workspace/probe.py dns denied.test"))
    t1 = int(time.time() * 1000)
    assert len(r.egress) >= 4, r.egress
    for e in r.egress:
        _check_schema(e)
        assert t0 - 1000 <= e["time"] <= t1 + 1000, e
    assert len({e["sandbox"] for e in r.egress}) == 1
    layers = {e["layer"] for e in r.egress}
    assert {"dns", "proxy"} <= layers, layers


def test_json_result_has_egress(run_net_json, net, world):
    r = run_net_json(["--allow", "allowed.test"] + net.sh(
        f"{net.CURL} https://allowed.test/; {net.CURL} https://denied.test/;"
        " exit 0"))
    j = r.json
    assert j["exit_code"] == 0 and j["reason"] == "exited", j
    eg = j.get("egress")
    assert isinstance(eg, list) and eg, j
    for e in eg:
        _check_schema(e)
    assert net.find(eg, layer=net.CONNECT, verdict="allow",
                    name="allowed.test")
    assert net.find(eg, layer="proxy", verdict="deny", name="denied.test")
    key = lambda e: (e["layer"], e["verdict"], e["name"], e["port"])  # noqa
    assert sorted(map(key, eg)) == sorted(map(key, r.egress)), \
        "--json egress and --egress-log disagree"
