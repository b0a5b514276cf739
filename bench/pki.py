"""The benchmarks' test PKI (bench/egress.py, bench/rules.py): a throwaway EC CA and a
certificate for bench.test signed by it, made with openssl in a scratch directory."""


def make_bench_pki(work, sh):
    """work/ca.pem, ca.key, server.pem, server.key; sh(cmd, quiet=True) runs a command."""
    o = ["openssl"]
    sh(o + ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "2", "-subj", "/CN=bench CA", "-keyout", work / "ca.key",
            "-out", work / "ca.pem", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign"], quiet=True)
    sh(o + ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-subj", "/CN=bench.test", "-keyout", work / "server.key",
            "-out", work / "server.csr"], quiet=True)
    (work / "ext.cnf").write_text("subjectAltName=DNS:bench.test\n")
    sh(o + ["x509", "-req", "-in", work / "server.csr", "-CA", work / "ca.pem",
            "-CAkey", work / "ca.key", "-CAcreateserial", "-days", "2",
            "-extfile", work / "ext.cnf", "-out", work / "server.pem"], quiet=True)
