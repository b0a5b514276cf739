// bench/e2b's client (run by bench/e2b.py): the same work through three front ends of one
// daemon, interleaved in one run so they share the machine's noise:
//   cycle:      create -> first command (`true`) -> kill/stop
//   round_trip: one command (`true`) in a live sandbox
// through the E2B SDK (tests/e2b's pinned e2b), the Vercel SDK (tests/sdk's pinned
// @vercel/sandbox) and the native API (fetch on /v1, the same runtime and connection
// pool as the SDKs). Prints one JSON object: every sample in ms.
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import path from "node:path";

const here = path.dirname(new URL(import.meta.url).pathname);
const load = async (dir, name) => {
  const req = createRequire(path.join(here, "..", "tests", dir, "package.json"));
  return import(pathToFileURL(req.resolve(name)).href);
};
const { Sandbox: E2B } = await load("e2b", "e2b");
const { Sandbox: Vercel } = await load("sdk", "@vercel/sandbox");

const BASE = process.env.AIRLOCK_URL, TOKEN = process.env.AIRLOCK_TOKEN;
const CYCLES = Number(process.env.CYCLES ?? 30), TRIPS = Number(process.env.TRIPS ?? 200);
const VERCEL = "https://vercel.com/api";
const vfetch = (url, init) => {
  const s = String(url);
  return fetch(s.startsWith(VERCEL) ? BASE + s.slice(VERCEL.length) : s, init);
};
const vcreds = { token: TOKEN, teamId: "team_bench", projectId: "prj_bench", fetch: vfetch };
const H = { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" };
const native = async (method, p, body) => {
  const r = await fetch(BASE + p, { method, headers: H, body: body && JSON.stringify(body) });
  const t = await r.text();
  if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${t}`);
  return t ? JSON.parse(t.split("\n")[0]) : null;
};
const ms = async (fn) => {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
};

const fronts = {
  e2b: {
    cycle: async () => {
      const s = await E2B.create({ timeoutMs: 120000 });
      await s.commands.run("true");
      await s.kill();
    },
    live: async () => E2B.create({ timeoutMs: 600000 }),
    trip: async (s) => s.commands.run("true"),
    end: async (s) => s.kill(),
  },
  vercel: {
    cycle: async () => {
      const s = await Vercel.create({ ...vcreds, timeout: 120000 });
      await s.runCommand("true");
      await s.stop();
    },
    live: async () => Vercel.create({ ...vcreds, timeout: 600000 }),
    trip: async (s) => s.runCommand("true"),
    end: async (s) => s.stop(),
  },
  // the native API running what the E2B SDK runs for "true": a login shell
  native_bash: {
    cycle: async () => {
      const { sandbox } = await native("POST", "/v1/sandboxes", { timeout: 120000 });
      await native("POST", `/v1/sandboxes/${sandbox.id}/commands`,
                   { cmd: "/bin/bash", args: ["-l", "-c", "true"], wait: true });
      await native("POST", `/v1/sandboxes/${sandbox.id}/stop`);
    },
    live: async () => (await native("POST", "/v1/sandboxes", { timeout: 600000 })).sandbox.id,
    trip: async (id) => native("POST", `/v1/sandboxes/${id}/commands`,
                               { cmd: "/bin/bash", args: ["-l", "-c", "true"], wait: true }),
    end: async (id) => native("POST", `/v1/sandboxes/${id}/stop`),
  },
  native: {
    cycle: async () => {
      const { sandbox } = await native("POST", "/v1/sandboxes", { timeout: 120000 });
      await native("POST", `/v1/sandboxes/${sandbox.id}/commands`, { cmd: "true", wait: true });
      await native("POST", `/v1/sandboxes/${sandbox.id}/stop`);
    },
    live: async () => (await native("POST", "/v1/sandboxes", { timeout: 600000 })).sandbox.id,
    trip: async (id) => native("POST", `/v1/sandboxes/${id}/commands`, { cmd: "true", wait: true }),
    end: async (id) => native("POST", `/v1/sandboxes/${id}/stop`),
  },
};
const names = Object.keys(fronts);
const out = { cycle: {}, round_trip: {} };
for (const n of names) {
  out.cycle[n] = [];
  out.round_trip[n] = [];
  await fronts[n].cycle(); // warm: the first of each pays for connections and JIT
}
for (let i = 0; i < CYCLES; i++)
  for (const n of names) out.cycle[n].push(await ms(fronts[n].cycle));
const live = {};
for (const n of names) {
  live[n] = await fronts[n].live();
  for (let i = 0; i < 5; i++) await fronts[n].trip(live[n]);
}
for (let i = 0; i < TRIPS; i++)
  for (const n of names) out.round_trip[n].push(await ms(() => fronts[n].trip(live[n])));
for (const n of names) await fronts[n].end(live[n]);
console.log(JSON.stringify(out));
