// Snapshots and fork through the unmodified @vercel/sandbox SDK (as flow.mjs; same
// variables, plus AIRLOCK_TOKEN_B / AIRLOCK_TEAM_ID_B for another team).
// Each step prints "ok STEP" or "FAIL STEP: reason"; the last line is
// "N passed, N failed"; the exit code is 0 only if every step passed.
import { Drive, Sandbox, Snapshot } from "@vercel/sandbox";

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
let src, snap, restored, forked, child, drive, writer;

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
  const named = await Sandbox.fork({ ...creds, sourceSandbox: src.name, name: `fork-${Date.now()}` });
  made.push(named);
  check(named.name.startsWith("fork-") && (await cat(named, "b.txt")) === "after\n", "named fork");
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

async function run(sbx, script) {
  const r = await sbx.runCommand("sh", ["-c", script]);
  return { code: r.exitCode, out: await r.stdout(), err: await r.stderr() };
}

await step("persistent-round-trip", async () => {
  const name = `persist-${Date.now()}`;
  const p = await Sandbox.create({ ...creds, name, persistent: true, keepLastSnapshots: { count: 2 } });
  made.push(p);
  check(p.name === name && p.persistent === true, `name ${p.name} persistent ${p.persistent}`);
  await p.writeFiles([{ path: "keep.txt", content: Buffer.from("kept\n") }]);
  const first = p.currentSession().sessionId;
  const st = await p.stop();
  check(st.snapshot?.id, "the stop of a persistent sandbox took no snapshot");
  check(p.currentSnapshotId === st.snapshot.id, `currentSnapshotId ${p.currentSnapshotId}`);
  const again = await Sandbox.get({ ...creds, name, resume: true });
  made.push(again);
  check(again.currentSession().sessionId !== first, "resume gave the old session");
  check(again.status === "running", `resumed status ${again.status}`);
  check((await cat(again, "keep.txt")) === "kept\n", "keep.txt did not come back");
  await again.writeFiles([{ path: "second.txt", content: Buffer.from("2\n") }]);
  await again.stop();
  // a call on a stopped persistent sandbox resumes it (the SDK's withResume)
  const r = await again.runCommand("cat", ["keep.txt", "second.txt"]);
  check((await r.stdout()) === "kept\n2\n", "implicit resume lost files");
  const listed = (await Sandbox.list({ ...creds })).sandboxes.filter((s) => s.name === name);
  check(listed.length === 1, `listed ${listed.length} times`);
  const sessions = await again.listSessions();
  check(sessions.sessions.length === 3, `sessions ${sessions.sessions.length}`);
  const snaps = await again.listSnapshots();
  check(snaps.snapshots.length === 2, `keepLastSnapshots 2 kept ${snaps.snapshots.length}`);
  check((await status(() => Sandbox.create({ ...creds, name }))) === 409, "a second sandbox with the name");
  await again.update({ persistent: false });
  check(again.persistent === false, "update persistent");
  await again.delete();
  check((await status(() => Sandbox.get({ ...creds, name }))) === 404, "deleted name still there");
});

await step("persistent-expiry", async () => {
  const name = `expiring-${Date.now()}`;
  const p = await Sandbox.create({ ...creds, name, persistent: true, timeout: 1500 });
  made.push(p);
  await p.writeFiles([{ path: "late.txt", content: Buffer.from("late\n") }]);
  let st = p.status;
  for (let i = 0; i < 100 && st !== "stopped"; i++) {
    await new Promise((res) => setTimeout(res, 100));
    st = (await Sandbox.get({ ...creds, name })).status;
  }
  check(st === "stopped", `status after its timeout: ${st}`);
  const again = await Sandbox.get({ ...creds, name, resume: true });
  made.push(again);
  check(again.currentSnapshotId, "no snapshot at expiry");
  check((await cat(again, "late.txt")) === "late\n", "late.txt lost at expiry");
  await again.delete({ deleteOrphanSnapshots: true });
});

await step("Drive.getOrCreate-list", async () => {
  drive = await Drive.getOrCreate({ ...creds, name: "sdk-data", maxSize: 32 * 1024 * 1024 });
  check(drive.name === "sdk-data" && drive.maxSize === 32 * 1024 * 1024, `drive ${drive.name} ${drive.maxSize}`);
  const again = await Drive.getOrCreate({ ...creds, name: "sdk-data" });
  check(again.driveId === drive.driveId, "getOrCreate made a second drive");
  const list = await Drive.list({ ...creds });
  check(list.drives.map((d) => d.name).includes("sdk-data"), "Drive.list");
  const other = await Drive.list({ ...credsB });
  check(!other.drives.map((d) => d.name).includes("sdk-data"), "another team lists our drive");
});

await step("mounts-rw-ro-share", async () => {
  writer = await Sandbox.create({ ...creds, name: `writer-${Date.now()}`, mounts: { "/vercel/sandbox/data": drive } });
  made.push(writer);
  check(writer.mounts?.["/vercel/sandbox/data"]?.drive === "sdk-data", `mounts ${JSON.stringify(writer.mounts)}`);
  const w = await run(writer, "echo shared-bytes > /vercel/sandbox/data/f && id -u && stat -c %u /vercel/sandbox/data/f");
  check(w.code === 0 && w.out === "1000\n1000\n", `write to the drive: ${JSON.stringify(w)}`);
  const reader = await Sandbox.create({ ...creds, mounts: { "/tmp/snap": drive.snapshot() } });
  made.push(reader);
  check((await cat(reader, "/tmp/snap/f")) === "shared-bytes\n", "the second sandbox does not see the data");
  const ro = await run(reader, "echo x > /tmp/snap/g");
  check(ro.code !== 0 && /Read-only/.test(ro.err), `a write to a read-only mount: ${JSON.stringify(ro)}`);
  // one read-write user at a time
  check((await status(() => Sandbox.create({ ...creds, mounts: { "/vercel/sandbox/d": drive } }))) === 409, "second read-write mount");
});

await step("drive-limits", async () => {
  const big = await run(writer, "head -c 64M /dev/zero > /vercel/sandbox/data/big");
  check(big.code !== 0 && /No space/.test(big.err), `over the drive's size: ${JSON.stringify(big)}`);
  await run(writer, "rm -f /vercel/sandbox/data/big");
  check((await status(() => drive.delete())) === 409, "delete of a drive in use");
  check((await status(() => Sandbox.create({ ...credsB, mounts: { "/vercel/sandbox/d": { drive: "sdk-data", mode: "read-write" } } }))) === 404, "another team's drive");
});

await step("Drive.delete", async () => {
  for (const s of made.splice(0)) await s.stop();
  await drive.delete();
  const list = await Drive.list({ ...creds });
  check(!list.drives.map((d) => d.name).includes("sdk-data"), "deleted drive still listed");
});

for (const s of made) await s.stop().catch(() => {});
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
