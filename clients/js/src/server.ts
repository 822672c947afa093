// startDoppel: the doppel binary on a document, on loopback ports of its
// own, for a test in node:test, Vitest or Jest.

import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, openSync, closeSync } from "node:fs";
import { constants as os, tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { Client } from "./client.js";
import { DoppelError } from "./errors.js";

/** Doppel could not be started: no binary, or it refused the document
 * (the message holds what it wrote to stderr), or it was not ready in time. */
export class StartFailed extends DoppelError {
  static readonly code = "START_FAILED";
}

export interface StartOptions {
  /** The YAML document. Its listener addresses are replaced. */
  config: string;
  /** The token the client sends. */
  token?: string;
  /** The binary; default DOPPEL_BIN, else doppel on PATH. */
  binary?: string;
  /** Milliseconds to wait until it is ready (default 15000). */
  readyTimeoutMs?: number;
}

export interface Doppel {
  proxyUrl: string;
  adminUrl: string;
  /** A Client of adminUrl with the token given. */
  client: Client;
  /** What it wrote to stdout and stderr so far (its log). */
  output(): string;
  /** Sends SIGTERM (SIGKILL after 10 s), waits, and resolves to the exit status. */
  stop(): Promise<number | null>;
}

/** The doppel binary: DOPPEL_BIN, else the first doppel on PATH. */
export function findBinary(): string {
  const given = process.env.DOPPEL_BIN;
  if (given) {
    if (isExecutable(given)) return given;
    throw new StartFailed(`DOPPEL_BIN is ${JSON.stringify(given)}, which is not an executable file`);
  }
  const path = process.env.PATH ?? "";
  for (const dir of path.split(delimiter)) {
    if (dir && isExecutable(join(dir, "doppel"))) return join(dir, "doppel");
  }
  throw new StartFailed(`no doppel binary: DOPPEL_BIN is not set, and there is no doppel on PATH (${path}); `
    + "build one with `go build -o /usr/local/bin/doppel ./cmd/doppel` or set DOPPEL_BIN");
}

/** Starts Doppel on config and resolves once its admin API answers. */
export async function startDoppel(options: StartOptions): Promise<Doppel> {
  const binary = options.binary ?? findBinary();
  const dir = mkdtempSync(join(tmpdir(), "doppel-"));
  const configPath = join(dir, "main.yaml");
  writeFileSync(configPath, options.config);
  const logPath = join(dir, "output.log");
  const log = openSync(logPath, "w");
  const output = () => { try { return readFileSync(logPath, "utf8"); } catch { return ""; } };

  // Port 0: the kernel picks free ports as doppel binds them, and its
  // startup lines say which (no port is chosen before and raced for). Its
  // log at info, whatever the environment filters.
  const env: NodeJS.ProcessEnv = { ...process.env, DOPPEL_LOG: "info" };
  delete env.RUST_LOG;
  const child: ChildProcess = spawn(binary, ["serve", "--config", configPath,
    "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
    "--socket", join(dir, "control.sock")], { stdio: ["ignore", log, log], env });
  closeSync(log);
  let exited: number | null | undefined;
  let spawnError: Error | undefined;
  const done = new Promise<number | null>((resolve) => {
    child.on("error", (e) => { spawnError = e; exited = null; resolve(null); });
    child.on("exit", (code, signal) => { exited = code ?? (signal ? 128 + (os.signals[signal] ?? 0) : null); resolve(exited); });
  });
  // A test runner that exits without stop() leaves no doppel behind.
  const onExit = () => child.kill("SIGKILL");
  process.once("exit", onExit);

  // One SIGTERM however often it is called: a second signal would make
  // Doppel exit at once, without letting requests finish.
  let stopping: Promise<number | null> | undefined;
  const stop = (): Promise<number | null> => (stopping ??= (async () => {
    if (exited === undefined) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await done;
      clearTimeout(timer);
    }
    process.removeListener("exit", onExit);
    rmSync(dir, { recursive: true, force: true });
    return exited ?? null;
  })());

  // Ready once its log says where the admin API and the proxy listener
  // are bound: "doppel started" comes after both listen.
  const deadline = Date.now() + (options.readyTimeoutMs ?? 15_000);
  let proxyUrl = "";
  let adminUrl = "";
  for (;;) {
    for (const line of output().split("\n")) {
      const fields = startupFields(line);
      if (fields?.message === "the admin API is listening" && typeof fields.admin_addr === "string") {
        adminUrl = `http://${fields.admin_addr}`;
      } else if (fields?.message === "doppel started" && typeof fields.proxy_addr === "string") {
        proxyUrl = `http://${fields.proxy_addr}`;
      }
    }
    if (proxyUrl && adminUrl) break;
    if (exited !== undefined) {
      const why = spawnError ? `cannot run ${binary}: ${spawnError.message}`
        : `${binary} exited with status ${exited} before it was ready:\n${output().trim()}`;
      await stop();
      throw new StartFailed(why);
    }
    if (Date.now() > deadline) {
      const log = output();
      await stop();
      throw new StartFailed(`doppel was not ready within ${options.readyTimeoutMs ?? 15_000} ms; its log:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const client = new Client(adminUrl, { token: options.token, sessionHeader: sessionHeader(options.config) });
  return { proxyUrl, adminUrl, client, output, stop };
}

function isExecutable(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

// startupFields are the fields of a JSON log line, or undefined.
function startupFields(line: string): Record<string, unknown> | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const fields = (JSON.parse(line) as { fields?: unknown }).fields;
    return fields && typeof fields === "object" ? fields as Record<string, unknown> : undefined;
  } catch {
    return undefined;
  }
}

// server.session_header, read without a YAML parser: the package has no
// dependency.
function sessionHeader(yaml: string): string {
  const m = /\bsession_header:\s*["']?([A-Za-z0-9!#$%&*+.^_`|~-]+)/.exec(yaml);
  return m ? m[1] : "X-Doppel-Session";
}
