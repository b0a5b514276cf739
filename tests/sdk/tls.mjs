// The PTY and a proxied WebSocket over TLS (docs/daemon.md, "TLS"): the unmodified
// @vercel/sandbox SDK against https://, its openInteractive() ticket a wss:// URL, driven by
// the `ws` package; the native PTY route the same; a WebSocket through a preview URL's host
// form, https with the wildcard certificate. The CA comes from NODE_EXTRA_CA_CERTS.
//
//   AIRLOCK_URL=https://127.0.0.1:7443 AIRLOCK_TOKEN=... AIRLOCK_SBX=sbx_... \
//   AIRLOCK_PREVIEW_DOMAIN=preview.test NODE_EXTRA_CA_CERTS=ca.pem node tls.mjs
//
// Each step prints "ok STEP" or "FAIL STEP: reason"; the last line is "N passed, N failed".
import { Sandbox } from "@vercel/sandbox";
import WebSocket from "ws";

const BASE = process.env.AIRLOCK_URL.replace(/\/+$/, "");
const VERCEL = "https://vercel.com/api";
const TOKEN = process.env.AIRLOCK_TOKEN;
const SBX = process.env.AIRLOCK_SBX;
const creds = {
  token: TOKEN,
  teamId: process.env.AIRLOCK_TEAM_ID,
  projectId: "prj_tls",
  fetch: (url, init) => {
    const s = String(url);
    return fetch(s.startsWith(VERCEL) ? BASE + s.slice(VERCEL.length) : s, init);
  },
};
let passed = 0;
let failed = 0;

const check = (c, what) => {
  if (!c) throw new Error(what);
};

async function step(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${(e?.message ?? String(e)).split("\n")[0]}`);
  }
}

// bash in a PTY over the ticket's URL: `echo hi` is seen, then `exit CODE` in the exit frame.
function drive({ url, token }, code) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${url}?token=${encodeURIComponent(token)}`);
    let out = "";
    let exit = null;
    let typed = false;
    const t = setTimeout(() => reject(new Error(`timeout; output ${JSON.stringify(out)}`)), 15000);
    ws.on("open", () =>
      ws.send(JSON.stringify({
        type: "start", command: "bash", args: ["--norc", "--noprofile"], cols: 80, rows: 24,
        cwd: "/vercel/sandbox", env: ["TERM=dumb", "PS1=sbx$ "],
      })),
    );
    ws.on("message", (d, bin) => {
      if (!bin) {
        const m = JSON.parse(d.toString());
        if (m.type === "exit") exit = m.code;
        return;
      }
      out += d.toString("utf8");
      if (!typed && out.includes("sbx$ ")) {
        typed = true;
        ws.send(Buffer.from(`echo h""i; exit ${code}\r`));
      }
    });
    ws.on("close", (closeCode) => {
      clearTimeout(t);
      resolve({ out: out.replace(/\r/g, ""), exit, closeCode });
    });
    ws.on("error", (e) => {
      clearTimeout(t);
      reject(e);
    });
  });
}

await step("sdk-openInteractive-wss", async () => {
  const sb = await Sandbox.get({ ...creds, name: SBX });
  const t = await sb.openInteractive();
  check(t.url.startsWith(`wss://${new URL(BASE).host}/`), `ticket url ${t.url}`);
  const r = await drive(t, 0);
  check(/\nhi\n/.test(r.out), `output ${JSON.stringify(r.out)}`);
  check(r.exit === 0 && r.closeCode === 1000, `exit ${r.exit} close ${r.closeCode}`);
});

await step("native-pty-wss", async () => {
  const res = await fetch(`${BASE}/v1/sandboxes/${SBX}/pty`, {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}` },
  });
  check(res.status === 200, `status ${res.status}`);
  const t = await res.json();
  check(t.url === `wss://${new URL(BASE).host}/v1/sandboxes/${SBX}/pty/ws`, `ticket url ${t.url}`);
  const r = await drive(t, 5);
  check(/\nhi\n/.test(r.out), `output ${JSON.stringify(r.out)}`);
  check(r.exit === 5 && r.closeCode === 1000, `exit ${r.exit} close ${r.closeCode}`);
});

// <port>-<sandbox>.<preview domain> (the DNS form: '-' for the id's '_', which GnuTLS refuses
// in a server name) has no DNS here: connect to the listener, and name the host in SNI
// (checked against *.<domain> of the certificate) and in Host.
await step("preview-websocket-wss", async () => {
  const host = `3002-${SBX.replaceAll("_", "-")}.${process.env.AIRLOCK_PREVIEW_DOMAIN}`;
  const port = new URL(BASE).port;
  const got = await new Promise((resolve, reject) => {
    const ws = new WebSocket(`wss://127.0.0.1:${port}/`, {
      servername: host,
      headers: { Host: `${host}:${port}` },
    });
    ws.on("open", () => ws.send("over-tls"));
    ws.on("message", (d) => {
      resolve(d.toString());
      ws.close(1000);
    });
    ws.on("error", reject);
  });
  check(got === "echo:over-tls", `echo ${got}`);
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
