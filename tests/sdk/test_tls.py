"""HTTPS on airlockd's TCP listener (docs/daemon.md, "TLS"): --tls-cert/--tls-key.

A throwaway CA and a server certificate for 127.0.0.1, localhost and *.preview.test are made
with the openssl CLI. Over HTTPS: the native API (trusting the CA; refused without it), the
PTY at a wss:// URL through the real @vercel/sandbox SDK and the `ws` package (tls.mjs),
preview URLs named https:// and served (HTTP and a WebSocket) through the wildcard
certificate; TLS 1.1 and plain HTTP on the TLS port refused; bad flag combinations and bad
files refused at start-up with a message that names the flag; --tls-listen beside a plain
--listen.

Run: /usr/bin/python3 -m pytest tests/sdk/test_tls.py -v   (needs build/airlock; node; openssl)
"""

import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time

import pytest

from test_sdk import AIRLOCK_BIN, HERE, TEAMS, TOKENS, free_port, node_modules  # noqa: F401
from test_ports import ECHO

DOMAIN = "preview.test"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def make_cert(d, name, cn, san, ca="ca"):
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write(f"subjectAltName={san}\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
            cwd=d)
    os.chmod(os.path.join(d, f"{name}.key"), 0o600)


@pytest.fixture(scope="module")
def pki():
    if not shutil.which("openssl"):
        pytest.skip("the openssl CLI makes the test certificates")
    d = tempfile.mkdtemp(prefix="airlock-tls-")
    for ca in ("ca", "otherca"):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2",
                "-subj", f"/CN=airlock test {ca}", cwd=d)
    make_cert(d, "srv", "localhost", f"IP:127.0.0.1,DNS:localhost,DNS:*.{DOMAIN}")
    make_cert(d, "other", "localhost", "IP:127.0.0.1", ca="otherca")
    with open(os.path.join(d, "tokens"), "w") as f:
        for k in TOKENS:
            f.write(f"{TOKENS[k]} {TEAMS[k]}\n")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def ctx(pki, ca="ca"):
    c = ssl.create_default_context(cafile=os.path.join(pki, f"{ca}.pem"))
    return c


def start(pki, *flags, listen=True, state=None):
    """airlock serve with flags; (proc, plain port or None, tls port, log path)."""
    port, tport = free_port(), None
    args = [AIRLOCK_BIN, "serve", "--state-dir", state or os.path.join(pki, f"state-{port}"),
            "--tokens", os.path.join(pki, "tokens"),
            "--listen", f"127.0.0.1:{port}" if listen else "none", *flags]
    if "--tls-listen" in flags:
        tport = int(flags[flags.index("--tls-listen") + 1].rsplit(":", 1)[1])
    else:
        tport, port = port, None
    log = os.path.join(pki, f"log-{tport}")
    with open(log, "wb") as f:
        proc = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 15
    while True:
        try:
            c = http.client.HTTPSConnection("127.0.0.1", tport, timeout=2, context=ctx(pki))
            c.request("GET", "/v1/health")
            if c.getresponse().status == 200:
                return proc, port, tport, log
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("airlock serve did not start: " + open(log).read()[-2000:])
        time.sleep(0.1)


def stop(proc):
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def daemon(pki):
    srv = os.path.join(pki, "srv")
    proc, _, port, _ = start(pki, "--tls-cert", srv + ".pem", "--tls-key", srv + ".key",
                             "--preview-domain", DOMAIN)
    yield port
    stop(proc)


def req(pki, port, method, path, body=None, team="A", host=None, context=None):
    c = http.client.HTTPSConnection("127.0.0.1", port, timeout=30,
                                    context=context or ctx(pki))
    hdrs = {"Content-Type": "application/json"}
    if team:
        hdrs["Authorization"] = f"Bearer {TOKENS[team]}"
    if host:
        hdrs["Host"] = host
    sep = "&" if "?" in path else "?"
    c.request(method, f"{path}{sep}teamId={TEAMS['A']}" if team else path,
              body=json.dumps(body).encode() if body is not None else None, headers=hdrs)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


@pytest.fixture(scope="module")
def sbx(pki, daemon):
    st, data = req(pki, daemon, "POST", "/v3/sandboxes",
                   {"projectId": "prj_tls", "timeout": 300000, "ports": [3000, 3002]})
    assert st == 200, data
    j = json.loads(data)
    sid = j["session"]["id"]
    for args in (["-m", "http.server", "3000", "--bind", "127.0.0.1"], ["-c", ECHO, "3002"]):
        st, data = req(pki, daemon, "POST", f"/v2/sandboxes/sessions/{sid}/cmd",
                       {"command": "python3", "args": args, "env": {}, "sudo": False})
        assert st == 200, data
    yield sid, j
    req(pki, daemon, "POST", f"/v2/sandboxes/sessions/{sid}/stop")


def test_native_api_over_https_trusting_the_ca(pki, daemon):
    st, data = req(pki, daemon, "GET", "/v1/sandboxes")
    assert st == 200 and "sandboxes" in json.loads(data), data
    st, _ = req(pki, daemon, "GET", "/v1/sandboxes", team=None)
    assert st == 401  # TLS changes nothing about the token
    # the same certificate, not trusted: the handshake fails on the client's side
    with pytest.raises(ssl.SSLCertVerificationError):
        req(pki, daemon, "GET", "/v1/health", context=ctx(pki, "otherca"))
    with pytest.raises(ssl.SSLCertVerificationError):
        req(pki, daemon, "GET", "/v1/health", context=ssl.create_default_context())


def test_tls_versions(pki, daemon):
    for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        c = ctx(pki)
        c.minimum_version = c.maximum_version = v
        with socket.create_connection(("127.0.0.1", daemon), timeout=10) as s, \
                c.wrap_socket(s, server_hostname="localhost") as t:
            assert t.version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2",
                                   ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[v]
    # TLS 1.1, offered by openssl s_client (with the legacy ciphers it needs): no session;
    # the same client offering TLS 1.2 gets one, so the refusal is the server's
    def s_client(version):
        r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{daemon}", version,
                            "-cipher", "DEFAULT:@SECLEVEL=0", "-CAfile",
                            os.path.join(pki, "ca.pem")],
                           input=b"", capture_output=True, timeout=15)
        return r.returncode, (r.stdout + r.stderr).decode("latin-1")

    rc, out = s_client("-tls1_2")
    assert rc == 0 and "Protocol  : TLSv1.2" in out and "Verify return code: 0" in out, out
    assert "Cipher is (NONE)" not in out, out
    rc, out = s_client("-tls1_1")
    assert rc != 0 and "Cipher is (NONE)" in out and "no peer certificate available" in out, out


def test_plain_http_to_the_tls_port_fails_cleanly(pki, daemon):
    c = http.client.HTTPConnection("127.0.0.1", daemon, timeout=10)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError, http.client.BadStatusLine)):
        c.request("GET", "/v1/health")
        c.getresponse()
    c.close()
    assert req(pki, daemon, "GET", "/v1/health", team=None)[0] == 200  # still serving


def test_pty_and_preview_websocket_over_wss(pki, daemon, sbx, node_modules):
    sid, _ = sbx
    st, data = req(pki, daemon, "POST", f"/v2/sandboxes/sessions/{sid}/interactive", {})
    assert st == 200 and json.loads(data)["url"].startswith(f"wss://127.0.0.1:{daemon}/"), data
    env = dict(os.environ, AIRLOCK_URL=f"https://127.0.0.1:{daemon}", AIRLOCK_TOKEN=TOKENS["A"],
               AIRLOCK_TEAM_ID=TEAMS["A"], AIRLOCK_SBX=sid, AIRLOCK_PREVIEW_DOMAIN=DOMAIN,
               NODE_EXTRA_CA_CERTS=os.path.join(pki, "ca.pem"))
    env.pop("AIRLOCK_DEBUG", None)
    r = subprocess.run([node_modules, "tls.mjs"], cwd=HERE, env=env, capture_output=True,
                       text=True, timeout=90)
    report = f"stdout:\n{r.stdout}\nstderr:\n{r.stderr[-3000:]}"
    assert r.returncode == 0, report
    assert r.stdout.strip().splitlines() == ["ok sdk-openInteractive-wss", "ok native-pty-wss",
                                             "ok preview-websocket-wss",
                                             "3 passed, 0 failed"], report


def test_preview_urls_are_https_and_served_with_the_wildcard_cert(pki, daemon, sbx):
    sid, j = sbx
    # the DNS form of the id ('-' for '_'): GnuTLS refuses a server name with '_'
    dns = sid.replace("_", "-")
    assert j["routes"][0]["url"] == f"https://3000-{dns}.{DOMAIN}:{daemon}/", j["routes"]
    assert j["routes"][0]["subdomain"] == f"3000-{sid}", j["routes"]
    host = f"3000-{dns}.{DOMAIN}"
    deadline = time.monotonic() + 15
    while True:
        with socket.create_connection(("127.0.0.1", daemon), timeout=10) as s, \
                ctx(pki).wrap_socket(s, server_hostname=host) as t:  # checks *.preview.test
            t.sendall(f"GET / HTTP/1.1\r\nHost: {host}:{daemon}\r\nConnection: close\r\n\r\n"
                      .encode())
            resp = b""
            while (d := t.recv(65536)):
                resp += d
        if b" 502 " not in resp.split(b"\r\n")[0] or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert resp.startswith(b"HTTP/1.1 200") and b"Directory listing" in resp, resp[:300]


def test_bad_flags_and_files_are_start_up_errors(pki):
    srv, other = os.path.join(pki, "srv"), os.path.join(pki, "other")
    loose = os.path.join(pki, "loose.key")
    shutil.copy(srv + ".key", loose)
    os.chmod(loose, 0o644)
    certkey = os.path.join(pki, "cert-as-key.pem")  # a certificate where the key goes
    shutil.copy(srv + ".pem", certkey)
    os.chmod(certkey, 0o600)
    junk = os.path.join(pki, "junk.pem")
    with open(junk, "w") as f:
        f.write("not a certificate\n")
    cases = [
        (["--tls-cert", srv + ".pem"], "--tls-cert without --tls-key"),
        (["--tls-key", srv + ".key"], "--tls-key without --tls-cert"),
        (["--tls-listen", "127.0.0.1:0"], "--tls-listen needs --tls-cert and --tls-key"),
        (["--tls-cert", srv + ".pem", "--tls-key", other + ".key"],
         "the key is not the certificate's"),
        (["--tls-cert", srv + ".pem", "--tls-key", loose], "--tls-key '%s': readable by group"
         % loose),
        (["--tls-cert", junk, "--tls-key", srv + ".key"], "--tls-cert '%s': no PEM certificate"
         % junk),
        (["--tls-cert", srv + ".pem", "--tls-key", certkey], "--tls-key '%s': no "
         "unencrypted PEM private key" % certkey),
        (["--tls-cert", srv + ".nope", "--tls-key", srv + ".key"], "--tls-cert '%s.nope': No "
         "such file" % srv),
    ]
    for flags, msg in cases:
        r = subprocess.run([AIRLOCK_BIN, "serve", "--state-dir", os.path.join(pki, "state-bad"),
                            "--tokens", os.path.join(pki, "tokens"), "--listen",
                            f"127.0.0.1:{free_port()}", *flags],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and msg in r.stderr, (flags, r.returncode, r.stderr)
        assert "serving on" not in r.stderr, r.stderr


def test_tls_listen_beside_a_plain_listener(pki):
    srv = os.path.join(pki, "srv")
    tport = free_port()
    proc, port, _, _ = start(pki, "--tls-cert", srv + ".pem", "--tls-key", srv + ".key",
                             "--tls-listen", f"127.0.0.1:{tport}")
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # plain
        c.request("GET", "/v1/health")
        assert c.getresponse().status == 200
        st, data = req(pki, tport, "POST", "/v1/sandboxes", {})
        assert st in (200, 201), data
        sid = json.loads(data)["sandbox"]["id"]
        # the URL's scheme is the connection's: ws:// on the plain listener, wss:// on TLS
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("POST", f"/v1/sandboxes/{sid}/pty",
                  headers={"Authorization": f"Bearer {TOKENS['A']}"})
        r = c.getresponse()
        assert json.loads(r.read())["url"] == f"ws://127.0.0.1:{port}/v1/sandboxes/{sid}/pty/ws"
        st, data = req(pki, tport, "POST", f"/v1/sandboxes/{sid}/pty", team="A")
        assert json.loads(data)["url"] == f"wss://127.0.0.1:{tport}/v1/sandboxes/{sid}/pty/ws"
        # the plain listener is not TLS, the TLS one not plain
        with pytest.raises(ssl.SSLError):
            req(pki, port, "GET", "/v1/health", team=None)
        req(pki, tport, "POST", f"/v1/sandboxes/{sid}/stop", team="A")
    finally:
        stop(proc)


def test_stop_with_a_wss_session_open(pki):
    """SIGTERM while a PTY runs over TLS (its handler in a thread of its own): the daemon
    ends promptly, the client gets a close frame (1001) and the end of the connection, and
    the handler is done before libmicrohttpd frees the connection (ASan saw a use after it
    when it was not)."""
    srv, state = os.path.join(pki, "srv"), os.path.join(pki, "state-stop")
    tls = ("--tls-cert", srv + ".pem", "--tls-key", srv + ".key")
    proc, _, port, _ = start(pki, *tls, state=state)
    sid = None
    try:
        st, data = req(pki, port, "POST", "/v1/sandboxes", {})
        sid = json.loads(data)["sandbox"]["id"]
        st, data = req(pki, port, "POST", f"/v1/sandboxes/{sid}/pty")
        t = json.loads(data)
        assert t["url"].startswith("wss://"), t
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        ws = ctx(pki).wrap_socket(raw, server_hostname="localhost")
        ws.sendall((f"GET /v1/sandboxes/{sid}/pty/ws?token={t['token']} HTTP/1.1\r\n"
                    f"Host: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                    "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        assert ws.recv(4096).startswith(b"HTTP/1.1 101"), "no upgrade"
        t0 = time.monotonic()
        proc.terminate()
        proc.wait(15)
        assert time.monotonic() - t0 < 10
        got = b""
        try:  # a close frame, 1001 "going away", then the end of the connection
            while (d := ws.recv(4096)):
                got += d
        except (ConnectionError, ssl.SSLError):
            pass
        assert got in (b"",) or got.startswith(b"\x88") and got[2:4] == b"\x03\xe9", got
        ws.close()
    finally:
        stop(proc)
        if sid:  # the sandbox outlived the daemon
            proc, _, port, _ = start(pki, *tls, state=state)
            req(pki, port, "POST", f"/v1/sandboxes/{sid}/stop")
            stop(proc)
