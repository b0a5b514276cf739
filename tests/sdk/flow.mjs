// Drives airlockd with the unmodified @vercel/sandbox SDK (pinned in package.json).
//
//   AIRLOCK_URL=http://127.0.0.1:7070 AIRLOCK_TOKEN=... node flow.mjs
//
// Other variables: AIRLOCK_TEAM_ID, AIRLOCK_PROJECT_ID, AIRLOCK_STEP_TIMEOUT_MS
// (default 60000), AIRLOCK_DEBUG=1 (logs every request).
// Each step prints "ok STEP" or "FAIL STEP: reason"; the last line is
// "N passed, N failed"; the exit code is 0 only if every step passed.
import { Sandbox } from "@vercel/sandbox";

const BASE = (process.env.AIRLOCK_URL ?? "http://127.0.0.1:7070").replace(/\/+$/, "");
const TOKEN = process.env.AIRLOCK_TOKEN ?? "airlock-dev-token";
const TEAM = process.env.AIRLOCK_TEAM_ID ?? "team_airlock";
const PROJECT = process.env.AIRLOCK_PROJECT_ID ?? "prj_airlock";
const STEP_MS = Number(process.env.AIRLOCK_STEP_TIMEOUT_MS ?? 60000);
const DEBUG = process.env.AIRLOCK_DEBUG === "1";
const VERCEL = "https://vercel.com/api";

// Changes only the URL; init (headers, body, signal, dispatcher) goes through untouched.
function airlockFetch(url, init) {
  const s = String(url);
  const target = s.startsWith(VERCEL) ? BASE + s.slice(VERCEL.length) : s;
  if (DEBUG) console.error(`> ${init?.method ?? "GET"} ${target}`);
  return fetch(target, init);
}

const creds = { token: TOKEN, teamId: TEAM, projectId: PROJECT, fetch: airlockFetch };
let passed = 0;
let failed = 0;
let sandbox = null;

function check(cond, what) {
  if (!cond) throw new Error(what);
}

function reasonOf(e) {
  // A zod error of the SDK: shorten to "path: message" pairs.
  const issues = e?.issues ?? e?.cause?.issues;
  if (Array.isArray(issues) && issues.length)
    return issues.map((i) => `${(i.path ?? []).join(".")}: ${i.message}`).join("; ");
  return (e?.message ?? String(e)).split("\n")[0];
}

async function step(name, fn, { needsSandbox = true } = {}) {
  if (needsSandbox && !sandbox) {
    failed++;
    console.log(`FAIL ${name}: skipped: no sandbox`);
    return;
  }
  let timer;
  try {
    await Promise.race([
      fn(),
      new Promise((_, rej) => {
        timer = setTimeout(() => rej(new Error(`timed out after ${STEP_MS} ms`)), STEP_MS);
      }),
    ]);
    passed++;
    console.log(`ok ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${reasonOf(e)}`);
  } finally {
    clearTimeout(timer);
  }
}

const A_TXT = "hello from a.txt\n";
const B_TXT = "nested file content\n";

await step(
  "create",
  async () => {
    sandbox = await Sandbox.create({ ...creds, timeout: 300000 });
    check(typeof sandbox.name === "string" && sandbox.name.length > 0, "no name");
    const sess = sandbox.currentSession();
    check(typeof sess.sessionId === "string" && sess.sessionId.length > 0, "no sessionId");
    check(sandbox.status === "running", `status ${sandbox.status}`);
    check(sess.cwd.startsWith("/"), `cwd not absolute: ${sess.cwd}`);
  },
  { needsSandbox: false },
);

await step("writeFiles", async () => {
  await sandbox.writeFiles([
    { path: "a.txt", content: Buffer.from(A_TXT) },
    { path: "nested/b.txt", content: Buffer.from(B_TXT) },
  ]);
  const r = await sandbox.runCommand("cat", ["nested/b.txt"]);
  check(r.exitCode === 0, `cat nested/b.txt: exit ${r.exitCode}`);
  check((await r.stdout()) === B_TXT, "nested/b.txt content differs");
});

await step("runCommand", async () => {
  const r = await sandbox.runCommand("sh", ["-c", "cat a.txt; echo err >&2; exit 3"]);
  check(r.exitCode === 3, `exitCode ${r.exitCode}`);
  const out = await r.stdout();
  const err = await r.stderr();
  check(out === A_TXT, `stdout ${JSON.stringify(out)}`);
  check(err === "err\n", `stderr ${JSON.stringify(err)}`);
});

await step("detached-logs", async () => {
  const cmd = await sandbox.runCommand({
    cmd: "sh",
    args: ["-c", "echo one; sleep 0.3; echo two >&2; echo three"],
    detached: true,
  });
  const done = await cmd.wait();
  check(done.exitCode === 0, `exitCode ${done.exitCode}`);
  const out = await cmd.stdout();
  const err = await cmd.stderr();
  check(out === "one\nthree\n", `stdout ${JSON.stringify(out)}`);
  check(err === "two\n", `stderr ${JSON.stringify(err)}`);
  const lines = [];
  for await (const log of cmd.logs()) lines.push(`${log.stream}:${log.data}`);
  check(lines.join("") === "stdout:one\nstderr:two\nstdout:three\n", `logs ${JSON.stringify(lines)}`);
});

await step("kill", async () => {
  const cmd = await sandbox.runCommand({ cmd: "sleep", args: ["30"], detached: true });
  await cmd.kill();
  const t0 = Date.now();
  const done = await cmd.wait();
  check(Date.now() - t0 < 25000, "wait() took more than 25 s");
  check(typeof done.exitCode === "number" && done.exitCode !== 0, `exitCode ${done.exitCode}`);
});

await step("readFile", async () => {
  const rel = await sandbox.readFileToBuffer({ path: "a.txt" });
  check(rel && rel.toString() === A_TXT, `relative: ${rel}`);
  const abs = await sandbox.readFileToBuffer({ path: `${sandbox.currentSession().cwd}/nested/b.txt` });
  check(abs && abs.toString() === B_TXT, `absolute: ${abs}`);
  const missing = await sandbox.readFileToBuffer({ path: "no/such/file.txt" });
  check(missing === null, `missing file gave ${missing}`);
  const stream = await sandbox.readFile({ path: "a.txt" });
  check(stream !== null, "readFile stream is null");
});

await step("mkDir", async () => {
  await sandbox.mkDir("made");
  const cwd = sandbox.currentSession().cwd;
  await sandbox.mkDir(`${cwd}/made/child`);
  const r = await sandbox.runCommand("test", ["-d", `${cwd}/made/child`]);
  check(r.exitCode === 0, `test -d: exit ${r.exitCode}`);
});

await step("networkPolicy", async () => {
  const denied = await sandbox.updateNetworkPolicy("deny-all");
  check(denied === "deny-all", `deny-all gave ${JSON.stringify(denied)}`);
  const allowed = await sandbox.updateNetworkPolicy({ allow: ["example.test"] });
  check(
    JSON.stringify(allowed) === JSON.stringify({ allow: ["example.test"] }),
    `allow-list gave ${JSON.stringify(allowed)}`,
  );
  // Per-request rules: the secret goes in, and only "<redacted>" comes back.
  const withRules = {
    allow: {
      "example.test": [
        {
          match: { path: { startsWith: "/v1" } },
          transform: [{ headers: { Authorization: "Bearer sk-flow-secret-value" } }],
        },
      ],
    },
  };
  const ruled = await sandbox.updateNetworkPolicy(withRules);
  const want = {
    allow: {
      "example.test": [
        {
          match: { path: { startsWith: "/v1" } },
          transform: [{ headers: { Authorization: "<redacted>" } }],
        },
      ],
    },
  };
  check(
    JSON.stringify(ruled) === JSON.stringify(want),
    `rules read back as ${JSON.stringify(ruled)}`,
  );
  check(!JSON.stringify(ruled).includes("sk-flow-secret"), "the secret came back");
  const back = await sandbox.updateNetworkPolicy("deny-all");
  check(back === "deny-all", `deny-all again gave ${JSON.stringify(back)}`);
});

await step("extendTimeout", async () => {
  const before = sandbox.currentSession().timeout;
  await sandbox.extendTimeout(60000);
  const after = sandbox.currentSession().timeout;
  check(after === before + 60000, `timeout ${before} -> ${after}`);
});

await step("get", async () => {
  const again = await Sandbox.get({ ...creds, name: sandbox.name });
  check(again.name === sandbox.name, `name ${again.name}`);
  check(again.status === "running", `status ${again.status}`);
  const r = await again.runCommand("cat", ["a.txt"]);
  check((await r.stdout()) === A_TXT, "cat through Sandbox.get differs");
});

await step("stop", async () => {
  const s = await sandbox.stop();
  check(s.status === "stopped" || s.status === "stopping", `status ${s.status}`);
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
