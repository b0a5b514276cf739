// Snapshots and fork through the unmodified @vercel/sandbox SDK (as flow.mjs; same
// variables, plus AIRLOCK_TOKEN_B / AIRLOCK_TEAM_ID_B for another team).
// Each step prints "ok STEP" or "FAIL STEP: reason"; the last line is
// "N passed, N failed"; the exit code is 0 only if every step passed.
import { Sandbox, Snapshot } from "@vercel/sandbox";

const BASE = (process.env.AIRLOCK_URL ?? "http://127.0.0.1:7070").replace(/\/+$/, "");
const STEP_MS = Number(process.env.AIRLOCK_STEP_TIMEOUT_MS ?? 60000);
const VERCEL = "https://vercel.com/api";

function airlockFetch(url, init) {
  const s = String(url);
  return fetch(s.startsWith(VERCEL) ? BASE + s.slice(VERCEL.length) : s, init);
}

const creds = {
  token: process.env.AIRLOCK_TOKEN,
  teamId: process.env.AIRLOCK_TEAM_ID,
  projectId: process.env.AIRLOCK_PROJECT_ID ?? "prj_airlock",
  fetch: airlockFetch,
};
const credsB = { ...creds, token: process.env.AIRLOCK_TOKEN_B, teamId: process.env.AIRLOCK_TEAM_ID_B };
let passed = 0;
let failed = 0;
const made = [];
let src, snap, restored, forked, child;

function check(cond, what) {
  if (!cond) throw new Error(what);
}

async function step(name, fn) {
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
    console.log(`FAIL ${name}: ${(e?.message ?? String(e)).split("\n")[0]}`);
  } finally {
    clearTimeout(timer);
  }
}

async function status(e) {
  try {
    await e();
  } catch (err) {
    return err?.response?.status ?? err?.status ?? `error ${err?.message}`;
  }
  return "no error";
}

async function cat(sbx, path) {
  const b = await sbx.readFileToBuffer({ path });
  return b === null ? null : b.toString();
}

await step("snapshot", async () => {
  src = await Sandbox.create({ ...creds, timeout: 300000 });
  made.push(src);
  await src.writeFiles([{ path: "a.txt", content: Buffer.from("before\n") }]);
  const r = await src.runCommand("sh", ["-c", "mkdir -p /tmp/x && echo tmpdata > /tmp/x/t && echo home > /home/user/h"]);
  check(r.exitCode === 0, `setup exit ${r.exitCode}`);
  snap = await src.snapshot({ expiration: 0 });
  check(snap.snapshotId.length > 0, "no snapshot id");
  check(snap.status === "created", `status ${snap.status}`);
  check(snap.sizeBytes > 0, `size ${snap.sizeBytes}`);
  check(snap.sourceSessionId === src.currentSession().sessionId, "sourceSessionId");
  check(snap.expiresAt === undefined, "expiration 0 must not expire");
  // Unlike Vercel, the sandbox keeps running and says so.
  check(src.status === "running", `sandbox status after snapshot: ${src.status}`);
  const again = await Sandbox.get({ ...creds, name: src.name });
  check(again.status === "running", `Sandbox.get status: ${again.status}`);
  const r2 = await src.runCommand("echo", ["still-alive"]);
  check((await r2.stdout()) === "still-alive\n", "source does not run commands");
});

await step("Snapshot.get-list", async () => {
  const got = await Snapshot.get({ ...creds, snapshotId: snap.snapshotId });
  check(got.snapshotId === snap.snapshotId && got.sizeBytes === snap.sizeBytes, "get differs");
  const all = await (await Snapshot.list({ ...creds })).toArray?.() ?? [];
  const page = await Snapshot.list({ ...creds, name: src.name });
  const ids = (page.snapshots ?? all).map((s) => s.id);
  check(ids.includes(snap.snapshotId), `list by name: ${ids}`);
  const mine = await src.listSnapshots();
  check(mine.snapshots.map((s) => s.id).includes(snap.snapshotId), "sandbox.listSnapshots");
});

await step("create-from-snapshot", async () => {
  await src.writeFiles([{ path: "b.txt", content: Buffer.from("after\n") }]);
  restored = await Sandbox.create({ ...creds, source: { type: "snapshot", snapshotId: snap.snapshotId } });
  made.push(restored);
  check((await cat(restored, "a.txt")) === "before\n", "a.txt not restored");
  check((await cat(restored, "/tmp/x/t")) === "tmpdata\n", "/tmp not restored");
  check((await cat(restored, "/home/user/h")) === "home\n", "/home/user not restored");
  check((await cat(restored, "b.txt")) === null, "b.txt was written after the snapshot");
});

await step("fork-sees-live-state", async () => {
  forked = await Sandbox.fork({ ...creds, sourceSandbox: src.name });
  made.push(forked);
  check(forked.name !== src.name, "fork has the source's name");
  check((await cat(forked, "a.txt")) === "before\n", "a.txt missing in fork");
  check((await cat(forked, "b.txt")) === "after\n", "b.txt (after the snapshot) missing in fork");
  const again = await Sandbox.get({ ...creds, name: src.name });
  check(again.status === "running", `source status after fork: ${again.status}`);
  await forked.writeFiles([{ path: "c.txt", content: Buffer.from("fork only\n") }]);
  check((await cat(src, "c.txt")) === null, "the fork's write reached the source");
});

await step("Snapshot.tree", async () => {
  child = await restored.snapshot();
  const tree = await Snapshot.tree({ ...creds, snapshotId: child.snapshotId });
  const nodes = tree.snapshots.map((n) => n.snapshot.id);
  check(nodes[0] === snap.snapshotId, `ancestors of the child: ${JSON.stringify(nodes)}`);
  check(tree.anchor?.snapshot.id === child.snapshotId, "anchor");
});

await step("errors", async () => {
  check((await status(() => Sandbox.fork({ ...creds, sourceSandbox: "sbx_missingmissingmissing00" }))) === 404, "fork of a missing sandbox");
  check((await status(() => Snapshot.get({ ...credsB, snapshotId: snap.snapshotId }))) === 404, "another team's snapshot");
  check((await status(() => Sandbox.create({ ...credsB, source: { type: "snapshot", snapshotId: snap.snapshotId } }))) === 404, "another team's restore");
  const gone = await Sandbox.create({ ...creds, timeout: 60000 });
  await gone.stop();
  check((await status(() => gone.snapshot())) === 410, "snapshot of a stopped sandbox");
});

await step("Snapshot.delete", async () => {
  await child.delete();
  check((await status(() => Snapshot.get({ ...creds, snapshotId: child.snapshotId }))) === 404, "deleted snapshot still there");
  await snap.delete();
  // the sandbox made from it keeps its files
  check((await cat(restored, "a.txt")) === "before\n", "restored sandbox lost its files");
});

for (const s of made) await s.stop().catch(() => {});
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
