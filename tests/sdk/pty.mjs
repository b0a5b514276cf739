// The interactive PTY (and the ports' routes) with the unmodified @vercel/sandbox SDK (openInteractive) and a real
// WebSocket client (the `ws` package, as the sandbox CLI uses), speaking the CLI's protocol.
//
//   AIRLOCK_URL=http://127.0.0.1:7070 AIRLOCK_TOKEN=... node pty.mjs
//
// Each step prints "ok STEP" or "FAIL STEP: reason"; the last line is "N passed, N failed".
import { Sandbox } from "@vercel/sandbox";
import WebSocket from "ws";

const BASE = (process.env.AIRLOCK_URL ?? "http://127.0.0.1:7070").replace(/\/+$/, "");
const VERCEL = "https://vercel.com/api";
const creds = {
  token: process.env.AIRLOCK_TOKEN ?? "airlock-dev-token",
  teamId: process.env.AIRLOCK_TEAM_ID ?? "team_airlock",
  projectId: process.env.AIRLOCK_PROJECT_ID ?? "prj_airlock",
  fetch: (url, init) => {
    const s = String(url);
    return fetch(s.startsWith(VERCEL) ? BASE + s.slice(VERCEL.length) : s, init);
  },
};
let passed = 0;
let failed = 0;

// One PTY session: what the CLI's interactive-shell does (start, binary stdin, resize, exit).
function open({ url, token }, start) {
  const ws = new WebSocket(`${url}?token=${encodeURIComponent(token)}`);
  const s = { out: "", texts: [], exit: null, closeCode: null, waiters: [] };
  const wake = () => (s.waiters = s.waiters.filter((w) => !w()));
  ws.on("open", () =>
    ws.send(JSON.stringify({ type: "start", cols: 80, rows: 24, cwd: "/vercel/sandbox", ...start })),
  );
  ws.on("message", (d, bin) => {
    if (bin) s.out += d.toString("utf8");
    else {
      const m = JSON.parse(d.toString());
      s.texts.push(m);
      if (m.type === "exit") s.exit = m.code;
    }
    wake();
  });
  ws.on("close", (code) => {
    s.closeCode = code;
    wake();
  });
  ws.on("error", (e) => {
    s.error = e.message;
    wake();
  });
  s.type = (text) => ws.send(Buffer.from(text));
  s.resize = (cols, rows) => ws.send(JSON.stringify({ type: "resize", cols, rows }));
  // Resolves when cond() holds (checked on every event), rejects after ms.
  s.until = (what, cond, ms = 15000) =>
    new Promise((res, rej) => {
      const t = setTimeout(() => rej(new Error(`no ${what} in ${JSON.stringify(s.plain().slice(-300))}`)), ms);
      const w = () => (cond() ? (clearTimeout(t), res(), true) : false);
      if (!w()) s.waiters.push(w);
    });
  // The output without terminal escapes (bash's bracketed paste mode) or lone CRs.
  s.plain = () => s.out.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "").replace(/\r(?!\n)/g, "");
  s.see = (re, ms) => s.until(String(re), () => re.test(s.plain()), ms);
  s.closed = () => s.until("close", () => s.closeCode !== null);
  return s;
}

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

const check = (c, what) => {
  if (!c) throw new Error(what);
};

const sandbox = await Sandbox.create({ ...creds, timeout: 120000 });
try {
  await step("python-repl", async () => {
    const t = await sandbox.openInteractive();
    check(t.url.startsWith("ws://") && t.token.length === 48, `bad ticket ${JSON.stringify(t)}`);
    const s = open(t, { command: "python3", args: ["-q"], env: ["TERM=xterm-256color"] });
    await s.see(/>>> $/);
    s.type("print(6*7)\r");
    await s.see(/print\(6\*7\)\r\n42\r\n>>> $/); // the echo, then the result
    s.type("raise SystemExit(3)\r");
    await s.closed();
    check(s.exit === 3, `exit frame ${JSON.stringify(s.texts)}`);
    check(s.closeCode === 1000, `close code ${s.closeCode}`);
  });
  await step("bash-resize", async () => {
    const s = open(await sandbox.openInteractive(), {
      command: "bash",
      args: ["--norc", "--noprofile"],
      env: ["TERM=xterm-256color", "PS1=sbx$ "],
    });
    await s.see(/sbx\$ $/);
    s.type("stty size; tty\r");
    await s.see(/\r\n24 80\r\n\/dev\/pts\/\d+\r\n/);
    s.resize(132, 50);
    s.type("stty size\r");
    await s.see(/\r\n50 132\r\n/);
    s.type("echo $((6*7))\r");
    await s.see(/\r\n42\r\n/);
    s.type("exit 7\r");
    await s.closed();
    check(s.exit === 7, `exit frame ${JSON.stringify(s.texts)}`);
  });
  await step("ctrl-c-and-sigwinch", async () => {
    const s = open(await sandbox.openInteractive(), {
      command: "bash",
      args: ["--norc", "--noprofile"],
      env: ["TERM=xterm-256color", "PS1=sbx$ "],
    });
    await s.see(/sbx\$ $/);
    // a trap on SIGWINCH proves the resize reaches the foreground process group
    s.type("trap 'echo WINCH $(stty size)' WINCH; echo READY; cat\r");
    // READY: bash has put the terminal back in cooked mode; what is typed now is echoed
    await s.see(/\r\nREADY\r\n$/);
    s.type("ping\r");
    await s.see(/ping\r\nping\r\n$/); // cat runs: the tty's echo, then cat's copy
    s.type("\x03"); // ^C ends cat through the line discipline, bash stays
    await s.see(/\^C\r?\n?sbx\$ $/);
    s.type("read -t 20 x\r");
    await s.see(/read -t 20 x\r\n$/);
    s.resize(90, 30);
    await s.see(/WINCH 30 90/);
    s.type("\r");
    await s.see(/sbx\$ $/);
    s.type("exit\r");
    await s.closed();
    check(s.exit === 0, `exit frame ${JSON.stringify(s.texts)}`);
  });
} finally {
  await sandbox.stop().catch(() => {});
}

// Ports through the SDK: routes on create and update, domain(), and the preview URL's path
// form reached with plain fetch (the SDK's domain() is https://<subdomain>.vercel.run).
await step("sdk-ports", async () => {
  const sb = await Sandbox.create({ ...creds, timeout: 60000, ports: [3000] });
  try {
    check(sb.routes.length === 1 && sb.routes[0].subdomain === `3000-${sb.name}`,
      `routes ${JSON.stringify(sb.routes)}`);
    check(sb.domain(3000) === `https://3000-${sb.name}.vercel.run`, sb.domain(3000));
    await sb.runCommand({ cmd: "python3", args: ["-m", "http.server", "3000"], detached: true });
    let body = "";
    for (let i = 0; i < 100 && !body.includes("Directory listing"); i++) {
      const r = await fetch(`${BASE}/preview/${sb.name}/3000/`);
      body = await r.text();
      if (!body.includes("Directory listing")) await new Promise((res) => setTimeout(res, 100));
    }
    check(body.includes("Directory listing"), `preview answered ${body.slice(0, 200)}`);
    await sb.update({ ports: [3000, 3001] });
    check(sb.routes.map((r) => r.port).join() === "3000,3001", JSON.stringify(sb.routes));
  } finally {
    await sb.stop().catch(() => {});
  }
});
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
