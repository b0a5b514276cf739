// Drives airlockd with the unmodified E2B SDK (pinned in package.json): every public
// method of Sandbox, sandbox.commands, sandbox.files, network options, fork, snapshots,
// pause and resume. Run by test_e2b.py:
//
//   E2B_API_URL=http://127.0.0.1:PORT E2B_SANDBOX_URL=http://127.0.0.1:PORT \
//   E2B_API_KEY=TOKEN AIRLOCK_TOKEN=TOKEN node flow.mjs [STEP...]
//
// Each step prints "ok STEP" or "FAIL STEP: reason"; the last line is "N passed, N failed".
import { Sandbox, CommandExitError, NotFoundError, FileType, TimeoutError } from "e2b";
import { Sandbox as Sandbox250 } from "e2b-250";
import { Sandbox as CodeSandbox } from "@e2b/code-interpreter";

const BASE = process.env.E2B_API_URL;
const TOKEN = process.env.AIRLOCK_TOKEN;
const only = process.argv.slice(2);
const SUITE = `flow-${process.pid}`;
let passed = 0, failed = 0;
let sbx = null, sbx2 = null;

function check(cond, what) {
  if (!cond) throw new Error(what);
}
function eq(a, b, what) {
  if (JSON.stringify(a) !== JSON.stringify(b))
    throw new Error(`${what}: ${JSON.stringify(a)} != ${JSON.stringify(b)}`);
}
async function rejects(p, what) {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error(`${what}: did not fail`);
}
async function step(name, fn) {
  if (only.length && !only.includes(name)) return;
  try {
    await fn();
    console.log(`ok ${name}`);
    passed++;
  } catch (e) {
    console.log(`FAIL ${name}: ${e?.stack ?? e}`.split("\n").slice(0, 4).join(" | "));
    failed++;
  }
}

await step("create", async () => {
  sbx = await Sandbox.create({ timeoutMs: 120000, metadata: { suite: SUITE, n: "1" },
                               envs: { FLOW_VAR: "from-create" } });
  check(/^sbx_/.test(sbx.sandboxId), `id ${sbx.sandboxId}`);
  const info = await sbx.getInfo();
  eq(info.sandboxId, sbx.sandboxId, "getInfo id");
  eq(info.templateId, "base", "template");
  eq(info.metadata, { suite: SUITE, n: "1" }, "metadata");
  eq(info.state, "running", "state");
  check(info.endAt - info.startedAt > 100000 && info.endAt - info.startedAt <= 121000,
        `lifetime ${info.endAt - info.startedAt}`);
  check(await sbx.isRunning(), "isRunning");
});

await step("commands.run", async () => {
  const r = await sbx.commands.run("echo hello; echo oops >&2; echo $FLOW_VAR $X; id -u; pwd",
                                   { envs: { X: "per-cmd" }, cwd: "/tmp" });
  eq(r.exitCode, 0, "exit");
  eq(r.stdout, "hello\nfrom-create per-cmd\n1000\n/tmp\n", "stdout");
  eq(r.stderr, "oops\n", "stderr");
  const root = await sbx.commands.run("id -u", { user: "root" });
  eq(root.stdout, "0\n", "root");
  const chunks = [];
  await sbx.commands.run("printf 'a\\nb\\n'", { onStdout: (d) => chunks.push(d) });
  eq(chunks.join(""), "a\nb\n", "onStdout");
  const e = await rejects(sbx.commands.run("echo bad; exit 3"), "exit 3");
  check(e instanceof CommandExitError, `CommandExitError, got ${e?.constructor?.name}`);
  eq(e.exitCode, 3, "exit code");
  eq(e.stdout, "bad\n", "stdout of the failure");
});

await step("commands.background+wait+list", async () => {
  const h = await sbx.commands.run("sleep 1; echo bg", { background: true });
  check(h.pid > 0, `pid ${h.pid}`);
  const list = await sbx.commands.list();
  const mine = list.find((p) => p.pid === h.pid);
  check(mine, `pid ${h.pid} not listed in ${JSON.stringify(list)}`);
  eq(mine.cmd, "/bin/bash", "listed cmd");
  eq(mine.args.slice(-1), ["sleep 1; echo bg"], "listed args");
  const r = await h.wait();
  eq(r.stdout, "bg\n", "stdout");
  check(!(await sbx.commands.list()).some((p) => p.pid === h.pid), "still listed after end");
});

await step("commands.kill", async () => {
  const h = await sbx.commands.run("sleep 100", { background: true });
  check(await sbx.commands.kill(h.pid), "kill returned false");
  const e = await rejects(h.wait(), "killed command");
  check(e instanceof CommandExitError, `CommandExitError, got ${e}`);
  check(e.exitCode !== 0, "killed exit code 0");
  eq(await sbx.commands.kill(999999), false, "kill of an unknown pid");
  const t0 = Date.now();
  const te = await rejects(sbx.commands.run("sleep 5", { timeoutMs: 500 }), "timeoutMs");
  check(te instanceof TimeoutError && Date.now() - t0 < 4000, `TimeoutError, got ${te}`);
});

await step("commands.sendStdin+closeStdin", async () => {
  const h = await sbx.commands.run("cat; echo done", { background: true, stdin: true });
  await sbx.commands.sendStdin(h.pid, "line one\n");
  await sbx.commands.sendStdin(h.pid, "line two\n");
  await sbx.commands.closeStdin(h.pid);
  const r = await h.wait();
  eq(r.stdout, "line one\nline two\ndone\n", "echoed stdin");
});

await step("commands.connect", async () => {
  const h = await sbx.commands.run("sleep 1; echo later", { background: true });
  await h.disconnect();
  const again = await sbx.commands.connect(h.pid);
  eq(again.pid, h.pid, "pid");
  const r = await again.wait();
  check(r.stdout.includes("later"), `stdout ${r.stdout}`);
  await rejects(sbx.commands.connect(424242), "connect to an unknown pid");
});

await step("files", async () => {
  const info = await sbx.files.write("/tmp/f/a.txt", "text one");
  eq(info.path, "/tmp/f/a.txt", "write info");
  eq(await sbx.files.read("/tmp/f/a.txt"), "text one", "read text");
  const bytes = new Uint8Array([0, 1, 2, 250, 255, 10]);
  await sbx.files.write("/tmp/f/b.bin", bytes.buffer);
  eq(Array.from(await sbx.files.read("/tmp/f/b.bin", { format: "bytes" })), Array.from(bytes),
     "read bytes");
  const blob = await sbx.files.read("/tmp/f/b.bin", { format: "blob" });
  eq(blob.size, 6, "blob size");
  const rs = new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode("streamed")); c.close(); } });
  await sbx.files.write("/tmp/f/s.txt", rs);
  const stream = await sbx.files.read("/tmp/f/s.txt", { format: "stream" });
  eq(await new Response(stream).text(), "streamed", "stream round trip");
  await sbx.files.write("/tmp/f/gz.txt", "gzipped ".repeat(100), { gzip: true });
  eq(await sbx.files.read("/tmp/f/gz.txt", { gzip: true }), "gzipped ".repeat(100), "gzip write");
  const many = await sbx.files.write([{ path: "/tmp/f/m1", data: "1" }, { path: "/tmp/f/m2", data: "22" }]);
  eq(many.map((w) => w.path), ["/tmp/f/m1", "/tmp/f/m2"], "multi write");
  const rel = await sbx.files.write("rel.txt", "home");
  eq(rel.path, "/home/user/rel.txt", "relative to /home/user");
  const names = (await sbx.files.list("/tmp/f")).map((e) => e.name).sort();
  eq(names, ["a.txt", "b.bin", "gz.txt", "m1", "m2", "s.txt"], "list");
  eq(await sbx.files.makeDir("/tmp/f/d/e"), true, "makeDir");
  eq(await sbx.files.makeDir("/tmp/f/d/e"), false, "makeDir again");
  const deep = (await sbx.files.list("/tmp/f", { depth: 2 })).map((e) => e.path);
  check(deep.includes("/tmp/f/d/e"), `depth 2 ${deep}`);
  const st = await sbx.files.getInfo("/tmp/f/m2");
  eq([st.name, st.type, st.size, st.path], ["m2", FileType.FILE, 2, "/tmp/f/m2"], "getInfo");
  eq((await sbx.files.getInfo("/tmp/f/d")).type, FileType.DIR, "dir type");
  check(await sbx.files.exists("/tmp/f/a.txt"), "exists");
  eq(await sbx.files.exists("/tmp/f/nope"), false, "exists of a missing file");
  const moved = await sbx.files.rename("/tmp/f/a.txt", "/tmp/f/renamed.txt");
  eq(moved.path, "/tmp/f/renamed.txt", "rename");
  eq(await sbx.files.read("/tmp/f/renamed.txt"), "text one", "renamed content");
  await sbx.files.remove("/tmp/f/d");
  eq(await sbx.files.exists("/tmp/f/d"), false, "removed dir");
  const nf = await rejects(sbx.files.read("/tmp/f/missing"), "read of a missing file");
  check(nf instanceof NotFoundError, `NotFoundError, got ${nf?.constructor?.name}`);
  await rejects(sbx.files.write("/etc/forbidden", "x"), "write outside the writable areas");
});

await step("files.url", async () => {
  await sbx.files.write("/tmp/u.txt", "signed");
  const url = await sbx.downloadUrl("/tmp/u.txt", { useSignatureExpiration: 60 });
  const r = await fetch(url, { headers: { "E2b-Sandbox-Id": sbx.sandboxId } });
  eq([r.status, await r.text()], [200, "signed"], "signed download");
  // one character of the signature changed (to another: "X" itself starts 1 in 64 of them)
  const wrong = url.replace(/signature=v1_(.)/, (_, c) => `signature=v1_${c === "X" ? "Y" : "X"}`);
  check(wrong !== url, "the signature was changed");
  const bad = await fetch(wrong, { headers: { "E2b-Sandbox-Id": sbx.sandboxId } });
  eq(bad.status, 401, "a wrong signature");
});

await step("files.watchDir", async () => {
  await sbx.files.makeDir("/tmp/w/sub");
  const events = [];
  const h = await sbx.files.watchDir("/tmp/w", (e) => events.push(e), { recursive: true });
  await sbx.files.write("/tmp/w/new.txt", "x");
  await sbx.files.write("/tmp/w/sub/deep.txt", "y");
  for (let i = 0; i < 50 && !(events.some((e) => e.name === "new.txt") &&
                              events.some((e) => e.name === "sub/deep.txt")); i++)
    await new Promise((r) => setTimeout(r, 100));
  await h.stop();
  check(events.some((e) => e.name === "new.txt" && (e.type === "create" || e.type === "write")),
        `events ${JSON.stringify(events)}`);
  check(events.some((e) => e.name === "sub/deep.txt"), `recursive ${JSON.stringify(events)}`);
  await rejects(sbx.files.watchDir("/tmp/none", () => {}), "watch of a missing directory");
});

await step("pty", async () => {
  let out = "";
  const dec = new TextDecoder(), enc = new TextEncoder();
  const waitFor = async (re) => {
    for (let i = 0; i < 50 && !re.test(out); i++) await new Promise((r) => setTimeout(r, 100));
    check(re.test(out), `${re} not in ${JSON.stringify(out)}`);
  };
  const h = await sbx.pty.create({ cols: 100, rows: 30, onData: (d) => { out += dec.decode(d); } });
  check(h.pid > 0, "pid");
  await sbx.pty.sendInput(h.pid, enc.encode("stty size; echo MARK$((6*7)); tty\n"));
  await waitFor(/30 100\r\nMARK42\r\n\/dev\/pts\//);
  await sbx.pty.resize(h.pid, { cols: 120, rows: 40 });
  await sbx.pty.sendInput(h.pid, enc.encode("stty size\n"));
  await waitFor(/40 120/);
  check((await sbx.commands.list()).some((p) => p.pid === h.pid), "a PTY is listed");
  eq(await sbx.pty.kill(h.pid), true, "pty.kill");
  const e = await rejects(h.wait(), "a killed PTY");
  check(e.exitCode !== 0, "exit code of a killed PTY");
});

await step("setTimeout+connect", async () => {
  await sbx.setTimeout(60000);
  let info = await sbx.getInfo();
  const left = info.endAt - Date.now();
  check(left > 50000 && left <= 61000, `left ${left}`);
  const again = await Sandbox.connect(sbx.sandboxId);
  eq(again.sandboxId, sbx.sandboxId, "connect id");
  info = await again.getInfo();
  check(Math.abs(info.endAt - (Date.now() + left)) < 5000, `connect kept the lifetime: ${info.endAt}`);
  eq((await again.commands.run("echo via-connect")).stdout, "via-connect\n", "connected run");
  await Sandbox.connect(sbx.sandboxId, { timeoutMs: 90000 });
  info = await sbx.getInfo();
  check(info.endAt - Date.now() > 80000, "connect with a timeout extends");
  await rejects(Sandbox.connect("sbx_doesnotexist"), "connect to an unknown sandbox");
});

await step("list+getHost+getMetrics", async () => {
  sbx2 = await Sandbox.create({ timeoutMs: 120000, metadata: { suite: SUITE, n: "2" },
    network: { allowOut: ["allowed.example"], denyOut: ["0.0.0.0/0"] } });
  const all = await Sandbox.list({ query: { metadata: { suite: SUITE } } }).nextItems();
  eq(all.map((s) => s.sandboxId).sort(), [sbx.sandboxId, sbx2.sandboxId].sort(), "listed");
  const one = await Sandbox.list({ query: { metadata: { suite: SUITE, n: "2" } } }).nextItems();
  eq(one.map((s) => s.sandboxId), [sbx2.sandboxId], "metadata filter");
  const pager = Sandbox.list({ limit: 1, query: { metadata: { suite: SUITE } } });
  const p1 = await pager.nextItems();
  check(pager.hasNext, "a next page");
  const p2 = await pager.nextItems();
  eq(p1.length + p2.length, 2, "two pages of one");
  check(p1[0].sandboxId !== p2[0].sandboxId, "pages differ");
  const host = sbx.getHost(8080);
  check(host.startsWith(`8080-${sbx.sandboxId}.`), `getHost ${host}`);
  const m = await sbx.getMetrics();
  check(m.length >= 1 && m[0].memUsed > 0 && m[0].cpuCount >= 1 && m[0].diskTotal > 0,
        `metrics ${JSON.stringify(m)}`);
});

await step("network", async () => {
  const info = await sbx2.getInfo();
  eq(info.network?.allowOut, ["allowed.example"], "network echoed");
  const r = await sbx2.commands.run(
    "curl -fsS -m 5 -o /dev/null http://denied-flow.example/ 2>&1; echo rc=$?", { timeoutMs: 20000 });
  check(!/rc=0/.test(r.stdout), `denied name reachable: ${r.stdout}`);
  let log = "";
  for (let i = 0; i < 30 && !log.includes("denied-flow.example"); i++) {
    const res = await fetch(`${BASE}/v1/sandboxes/${sbx2.sandboxId}/egress?follow=false`,
                            { headers: { Authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(2000) })
      .catch(() => null);
    log = res ? await res.text().catch(() => "") : "";
    if (!log.includes("denied-flow.example")) await new Promise((r) => setTimeout(r, 200));
  }
  const line = log.split("\n").find((l) => l.includes("denied-flow.example"));
  check(line && /"verdict":"deny"/.test(line) && !/nxdomain/.test(line),
        `egress log: ${log.slice(0, 500)}`);
  const e = await rejects(Sandbox.create({ network: { denyOut: ["evil.example"] } }),
                          "a name in denyOut");
  check(/denyOut/.test(e.message), e.message);
});

await step("fork+snapshots", async () => {
  await sbx.files.write("/home/user/snapflow.txt", "kept");
  const forks = await sbx.fork({ timeoutMs: 60000 });
  eq(forks.length, 1, "one fork");
  const f = forks[0];
  check(f instanceof Sandbox && f.sandboxId !== sbx.sandboxId, `fork ${f}`);
  eq(await f.files.read("/home/user/snapflow.txt"), "kept", "a fork's file");
  eq((await f.commands.run("echo forked")).stdout, "forked\n", "a fork runs");
  eq(await f.kill(), true, "fork kill");
  const snap = await sbx.createSnapshot();
  check(/^snp_/.test(snap.snapshotId), `snapshot ${JSON.stringify(snap)}`);
  eq(await sbx.files.read("/home/user/snapflow.txt"), "kept", "the source runs on");
  const listed = await sbx.listSnapshots().nextItems();
  check(listed.some((s) => s.snapshotId === snap.snapshotId), `listSnapshots ${JSON.stringify(listed)}`);
  const made = await Sandbox.create(snap.snapshotId, { timeoutMs: 60000 });
  eq(await made.files.read("/home/user/snapflow.txt"), "kept", "a sandbox from the snapshot");
  eq((await made.getInfo()).templateId, snap.snapshotId, "its templateId");
  await made.kill();
  eq(await Sandbox.deleteSnapshot(snap.snapshotId), true, "deleteSnapshot");
  eq(await Sandbox.deleteSnapshot(snap.snapshotId), false, "deleteSnapshot again");
  await rejects(Sandbox.create(snap.snapshotId), "a create from a deleted snapshot");
});

await step("pause+connect", async () => {
  await sbx.files.write("/home/user/paused.txt", "still here");
  eq(await sbx.pause(), true, "pause");
  eq((await sbx.getInfo()).state, "paused", "getInfo of a paused sandbox");
  eq(await sbx.isRunning(), false, "isRunning when paused");
  await rejects(sbx.commands.run("echo no"), "a command in a paused sandbox");
  eq(await sbx.pause(), false, "a second pause");
  const paused = await Sandbox.list({ query: { state: ["paused"], metadata: { suite: SUITE } } }).nextItems();
  eq(paused.map((s) => [s.sandboxId, s.state]), [[sbx.sandboxId, "paused"]], "list of paused");
  const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 120000 });
  eq(again.sandboxId, sbx.sandboxId, "the same id after a resume");
  eq(await again.files.read("/home/user/paused.txt"), "still here", "files after a resume");
  eq((await sbx.commands.run("echo $FLOW_VAR")).stdout, "from-create\n", "commands and envs after a resume");
  const info = await sbx.getInfo();
  eq(info.state, "running", "running after a resume");
  check(info.endAt - Date.now() > 100000, `lifetime after a resume ${info.endAt - Date.now()}`);
});

await step("kill", async () => {
  eq(await sbx2.kill(), true, "kill");
  eq(await Sandbox.kill(sbx.sandboxId), true, "static kill");
  eq(await sbx.isRunning(), false, "isRunning after kill");
  eq(await Sandbox.kill(sbx.sandboxId), false, "kill again");
  await rejects(sbx.getInfo(), "getInfo after kill");
});

await step("sdk-2.50", async () => {
  const old = await Sandbox250.create({ timeoutMs: 60000 });
  eq((await old.commands.run("echo old")).stdout, "old\n", "2.50 run");
  const again = await Sandbox250.connect(old.sandboxId);
  eq((await again.files.write("/tmp/o.txt", "o")).path, "/tmp/o.txt", "2.50 write");
  await old.kill();
});

await step("runCode", async () => {
  const ci = await CodeSandbox.create({ timeoutMs: 60000 });
  try {
    let ex = await ci.runCode("import os\nx = 41\nprint('hi'); print('err', file=__import__('sys').stderr)\nx + 1");
    eq([ex.text, ex.logs.stdout, ex.logs.stderr, ex.error], ["42", ["hi\n"], ["err\n"], undefined], "python");
    eq((await ci.runCode("x * 2")).text, "82", "globals persist");
    eq((await ci.runCode("os.environ['V']", { envs: { V: "per-run" } })).text, "'per-run'", "envs");
    ex = await ci.runCode("def f():\n    return 1/0\nf()");
    eq([ex.error?.name, ex.error?.value], ["ZeroDivisionError", "division by zero"], "error");
    check(/Traceback[\s\S]*ZeroDivisionError/.test(ex.error.traceback), `traceback ${ex.error.traceback}`);
    const out = [];
    await ci.runCode("for i in range(3): print(i)", { onStdout: (m) => out.push(m.line) });
    eq(out.join(""), "0\n1\n2\n", "onStdout");
    const js = await ci.createCodeContext({ language: "javascript" });
    ex = await ci.runCode("let a = 5; console.log('js', {k: 1}); a * 3", { context: js });
    eq([ex.text, ex.logs.stdout], ["15", ["js { k: 1 }\n"]], "javascript");
    eq((await ci.runCode("a + 1", { context: js })).text, "6", "js globals persist");
    ex = await ci.runCode("null.x", { context: js });
    eq(ex.error?.name, "TypeError", "js error");
    const ids = (await ci.listCodeContexts()).map((c) => c.id);
    check(ids.includes(js.id) && ids.includes("default-python"), `contexts ${ids}`);
    await ci.restartCodeContext(js);
    eq((await ci.runCode("typeof a", { context: js })).text, "'undefined'", "restart clears");
    await ci.removeCodeContext(js);
    check(!(await ci.listCodeContexts()).some((c) => c.id === js.id), "removed");
    await rejects(ci.runCode("1", { context: js }), "a removed context");
  } finally {
    await ci.kill();
  }
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
