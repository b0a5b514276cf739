// Drives `airlock mcp` with the official MCP TypeScript SDK (pinned in package.json).
// MCP_COMMAND: a JSON array, the server's command line (airlock mcp and its flags, which
// must include --allow allowed.test); MCP_MODE: embedded | daemon.
// Prints "ok STEP" per step; any failed assertion exits non-zero with its message.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

const [command, ...args] = JSON.parse(process.env.MCP_COMMAND);
const mode = process.env.MCP_MODE;
const daemon = mode === "daemon";
const step = (name) => console.log(`ok ${name}`);

// Host processes whose command line contains `needle` (not ours, not pgrep's).
function hostPids(needle) {
  try {
    return execFileSync("pgrep", ["-f", needle], { encoding: "utf8" })
      .split("\n").filter(Boolean).map(Number).filter((p) => p !== process.pid);
  } catch {
    return [];
  }
}
const delay = (ms) => new Promise((r) => setTimeout(r, ms));

const transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "airlock-mcp-test", version: "1.0.0" });
await client.connect(transport);
const call = (name, a, opts) => client.callTool({ name, arguments: a }, undefined, opts);

// tools/list: the tools, each with both schemas
const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
assert.deepEqual(names, daemon
  ? ["exec", "list_files", "read_file", "reset", "run_code", "write_file"]
  : ["exec", "list_files", "read_file", "run_code", "write_file"]);
for (const t of tools) {
  assert.equal(t.inputSchema.type, "object", t.name);
  assert.equal(t.outputSchema.type, "object", t.name);
  assert.ok(t.description.length > 40, t.name);
}
assert.deepEqual(tools.find((t) => t.name === "run_code").inputSchema.properties.language.enum,
  ["python", "node", "bash"]);
step("tools/list");

// write_file, then every language and exec see it in /workspace
let r = await call("write_file", { path: "data/hello.txt", content: "héllo\n" });
assert.equal(r.isError, false);
assert.deepEqual(r.structuredContent, { path: "/workspace/data/hello.txt", size: 7 });
assert.deepEqual(JSON.parse(r.content[0].text), r.structuredContent);
step("write_file");

r = await call("run_code", { language: "python", code: "import sys\nprint(open('data/hello.txt').read().strip(), sys.stdin.read())", stdin: "from-stdin" });
assert.equal(r.isError, false, JSON.stringify(r));
assert.equal(r.structuredContent.stdout, "héllo from-stdin\n");
assert.equal(r.structuredContent.exit_code, 0);
assert.equal(r.structuredContent.reason, "exited");
assert.equal(r.structuredContent.stdout_truncated, false);
r = await call("run_code", { language: "node", code: "console.log(require('fs').readFileSync('/workspace/data/hello.txt','utf8').length + 1)" });
assert.equal(r.structuredContent.stdout, "7\n", JSON.stringify(r));
r = await call("run_code", { language: "bash", code: "echo out; echo err >&2; exit 3" });
assert.equal(r.isError, true, "a command that exits 3 is an error result");
assert.equal(r.structuredContent.exit_code, 3);
assert.equal(r.structuredContent.reason, "exited");
assert.equal(r.structuredContent.stdout, "out\n");
assert.equal(r.structuredContent.stderr, "err\n");
step("run_code");

r = await call("exec", { argv: ["cat", "data/hello.txt"] });
assert.equal(r.structuredContent.stdout, "héllo\n");
r = await call("exec", { argv: ["pwd"], cwd: "data" });
assert.equal(r.structuredContent.stdout, "/workspace/data\n");
r = await call("exec", { argv: ["/bin/sh", "-c", "kill -9 $$"] });
assert.equal(r.isError, true);
assert.equal(r.structuredContent.reason, "signaled");
assert.equal(r.structuredContent.signal, 9);
step("exec");

r = await call("read_file", { path: "/workspace/data/hello.txt" });
assert.equal(r.isError, false);
assert.equal(r.structuredContent.content, "héllo\n");
assert.equal(r.structuredContent.encoding, "utf-8");
r = await call("list_files", { path: "data" });
assert.deepEqual(r.structuredContent.entries.map((e) => [e.name, e.type]), [["hello.txt", "file"]]);
r = await call("list_files", {});
assert.ok(r.structuredContent.entries.some((e) => e.name === "data" && e.type === "dir"));
step("read_file, list_files");

// state: a command's own writes persist only against a daemon
r = await call("exec", { argv: ["/bin/sh", "-c", "echo made > made.txt"] });
assert.equal(r.isError, false);
r = await call("read_file", { path: "made.txt" });
if (daemon) {
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.equal(r.structuredContent.content, "made\n");
} else {
  assert.equal(r.isError, true, "embedded: what a command writes ends with it");
  assert.match(r.content[0].text, /no such file/);
}
step("state");

// the call's timeout shortens the server's
r = await call("run_code", { language: "bash", code: "sleep 1.5; echo in-time" }, { timeout: 60000 });
assert.equal(r.structuredContent.stdout, "in-time\n");
r = await call("run_code", { language: "bash", code: "sleep 9; echo late", timeout: 1 });
assert.equal(r.isError, true);
assert.equal(r.structuredContent.reason, "timeout");
assert.equal(r.structuredContent.stdout, "");
step("timeout");

// progress while a long run goes on
const seen = [];
r = await call("run_code", { language: "bash", code: "sleep 3; echo done" },
  { onprogress: (p) => seen.push(p) });
assert.equal(r.structuredContent.stdout, "done\n");
assert.ok(seen.length >= 2, `progress notifications: ${JSON.stringify(seen)}`);
for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress);
step("progress");

// cancellation: the call ends, and its sandbox with it
const marker = `${61 + (process.pid % 37)}.${process.pid}`;
const ac = new AbortController();
const pending = call("run_code", { language: "bash", code: `sleep ${marker}` }, { signal: ac.signal });
let running = false;
for (let i = 0; i < 100 && !running; i++) {
  await delay(100);
  running = hostPids(`sleep ${marker}`).length > 0;
}
assert.ok(running, "the long command started");
ac.abort("test cancels");
await assert.rejects(pending);
let left = hostPids(`sleep ${marker}`);
for (let i = 0; i < 50 && left.length; i++) {
  await delay(100);
  left = hostPids(`sleep ${marker}`);
}
assert.deepEqual(left, [], "the cancelled command's processes are gone");
r = await call("exec", { argv: ["echo", "after"] });
assert.equal(r.structuredContent.stdout, "after\n", "the server still serves");
step("cancel");

// errors: bad arguments are tool errors, an unknown tool a protocol error
r = await call("run_code", { language: "cobol", code: "x" });
assert.equal(r.isError, true);
assert.match(r.content[0].text, /language.*cobol/);
for (const p of ["../etc/passwd", "/etc/passwd", "a/../../b", "/workspace/../etc/x"]) {
  r = await call("write_file", { path: p, content: "x" });
  assert.equal(r.isError, true, p);
  assert.match(r.content[0].text, /path/, p);
}
r = await call("read_file", { path: "/etc/shadow" });
assert.equal(r.isError, true);
r = await call("exec", { argv: [] });
assert.equal(r.isError, true);
r = await call("run_code", { language: "bash", code: "true", memory: "64G" });
assert.equal(r.isError, true, "no argument can widen the limits");
assert.match(r.content[0].text, /unknown argument 'memory'/);
await assert.rejects(call("no_such_tool", {}), (e) => e instanceof McpError && e.code === -32602);
step("errors");

// the network: only allowed.test; the denial is in the egress-log resource
const { resources } = await client.listResources();
assert.ok(resources.some((x) => x.uri === "airlock://egress-log"));
r = await call("exec", { argv: ["getent", "hosts", "denied.test"] });
assert.equal(r.isError, true, "a name not on the allowlist does not resolve");
// a documentation address (never a real host): the gateway refuses the request
r = await call("run_code", { language: "python", code: [
  "import urllib.request",
  "try:",
  "    urllib.request.urlopen('http://192.0.2.1/', timeout=10)",
  "    print('reached')",
  "except Exception as e:",
  "    print('refused', e)"].join("\n") });
assert.match(r.structuredContent.stdout, /^refused/, JSON.stringify(r.structuredContent));
const logged = (log, pred) => log.split("\n").filter(Boolean).map((l) => JSON.parse(l)).filter(pred);
let log = "";
for (let i = 0; i < 30; i++) {
  const res = await client.readResource({ uri: "airlock://egress-log" });
  assert.equal(res.contents[0].mimeType, "application/x-ndjson");
  log = res.contents[0].text;
  if (log.includes("denied.test") && log.includes("192.0.2.1")) break;
  await delay(200);
}
const denied = logged(log, (l) => l.name === "denied.test");
assert.ok(denied.length > 0, `egress log: ${log}`);
assert.ok(denied.every((l) => l.verdict === "deny"), JSON.stringify(denied));
const ip = logged(log, (l) => l.address === "192.0.2.1");
assert.ok(ip.length > 0 && ip.every((l) => l.verdict === "deny"), `egress log: ${log}`);
await assert.rejects(client.readResource({ uri: "airlock://nope" }),
  (e) => e instanceof McpError && e.code === -32002);
step("network");

if (daemon) {
  r = await call("reset", {});
  assert.equal(r.structuredContent.stopped, true);
  r = await call("read_file", { path: "data/hello.txt" });
  assert.equal(r.isError, true, "a fresh sandbox after reset");
  step("reset");
}

await client.close();
step("close");
