// Drive the clients app (tests/support/clients_app.py) with the published TypeScript SDK 1.x
// client (@modelcontextprotocol/sdk), installed by tests/support/client_installs.py.
//
//   node ts_sdk_client.mjs SDK_DIR TARGET
//
// SDK_DIR is the installed package's folder (node_modules/@modelcontextprotocol/sdk); TARGET is
// JSON: {"url": ...} for streamable HTTP, {"command", "args", "env", "cwd"} for stdio. It prints
// one JSON object describing what the client saw (what tests/support/published_clients.py checks).
// On HTTP it ends the session with terminateSession() (DELETE) before closing.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, targetJson] = process.argv.slice(2);
const target = JSON.parse(targetJson);
const load = (path) => import(pathToFileURL(join(sdkDir, "dist", "esm", path)).href);
const { version } = JSON.parse(readFileSync(join(sdkDir, "package.json"), "utf8"));
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { StdioClientTransport } = await load("client/stdio.js");
const {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} = await load("types.js");

const WATCHED = "test://watched";
const WAIT_MS = 60_000; // for anything the server is to send (a bound, not a pace)

// Notification handlers run after the message that carried them is read, not necessarily
// before the answer that followed it resolves: `until` waits, bounded, for what is expected.
let wake = () => {};
const poke = () => wake();
async function until(enough, ms = WAIT_MS) {
  const deadline = Date.now() + ms;
  while (!enough()) {
    const left = deadline - Date.now();
    if (left <= 0) return false;
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, left);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
  return true;
}

const seen = {
  sampling: [],
  elicitation: [],
  roots: 0,
  progress: [],
  logs: [],
  updates: [],
  listChanged: false,
};
const client = new Client(
  { name: "presa-trio-e2e-ts", version: "1" },
  { capabilities: { sampling: {}, elicitation: {}, roots: {} } },
);
client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
  seen.sampling.push(request.params);
  const prompt = request.params.messages[0].content;
  return {
    role: "assistant",
    content: { type: "text", text: `echo of '${prompt.text}'` },
    model: "test-model",
    stopReason: "endTurn",
  };
});
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  seen.elicitation.push(request.params);
  return { action: "accept", content: { name: "Ada" } };
});
client.setRequestHandler(ListRootsRequestSchema, async () => {
  seen.roots += 1;
  return { roots: [{ uri: "file:///tmp/presa-e2e", name: "e2e" }] };
});
client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
  seen.logs.push(notification.params);
  poke();
});
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
  seen.updates.push(notification.params);
  poke();
});
client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
  seen.listChanged = true;
  poke();
});

let transport;
if (target.url !== undefined) {
  transport = new StreamableHTTPClientTransport(new URL(target.url));
} else {
  transport = new StdioClientTransport({
    command: target.command,
    args: target.args,
    env: target.env,
    cwd: target.cwd,
    stderr: "inherit",
  });
}
let negotiated = null; // the client hands the initialize result's version to its transport
const setProtocolVersion = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = (value) => {
  negotiated = value;
  setProtocolVersion?.(value);
};

await client.connect(transport);
const tools = await client.listTools();
const whoami = await client.callTool({ name: "whoami", arguments: {} });
const era = await client.callTool({ name: "era", arguments: {} });
const ask = await client.callTool({ name: "ask_model", arguments: { prompt: "Say hi" } });
const greet = await client.callTool({ name: "greet", arguments: {} });
// `confirm`: the tool asks for the roots before it answers. The SDK runs a notification's
// handler a microtask after reading it, but settles an answer at once and forgets its progress
// token then: progress read together with the answer (one stdio read) would be dropped as
// "unknown token" (typescript-sdk issue #2580). The round trip keeps the answer out of that read.
const steps = await client.callTool({ name: "steps", arguments: { confirm: true } }, undefined, {
  onprogress: (progress) => {
    seen.progress.push(progress);
    poke();
  },
});
await until(() => seen.progress.length >= 3);
const ping = await client.ping();
await client.setLoggingLevel("info");
const chatty = await client.callTool({ name: "chatty", arguments: {} });
await until(() => seen.logs.length >= 2);
await client.subscribeResource({ uri: WATCHED });
// The change stream (the GET stream, or stdout) may start listening for the new subscription a
// moment after the answer: touch until an update arrives, each wait bounded.
let touched;
let touches = 0;
const deadline = Date.now() + WAIT_MS;
while (seen.updates.length === 0 && Date.now() < deadline) {
  touched = await client.callTool({ name: "touch", arguments: { uri: WATCHED } });
  touches += 1;
  await until(() => seen.updates.length > 0, 1000);
}
await until(() => seen.listChanged); // touch announced that too, after the update
const sessionId = transport.sessionId ?? null;
if (target.url !== undefined) {
  await transport.terminateSession(); // DELETE
}
await client.close();

const results = { whoami, era, ask_model: ask, greet, steps, chatty };
console.log(
  JSON.stringify({
    client: `@modelcontextprotocol/sdk ${version}`,
    protocol_version: negotiated,
    server_info: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    tools: tools.tools.map((tool) => tool.name),
    whoami: whoami.content,
    era: era.content,
    ask_model: ask.content,
    sampling: seen.sampling,
    greet: greet.content,
    elicitation: seen.elicitation,
    steps: steps.content,
    progress: seen.progress,
    roots_asked: seen.roots,
    ping,
    chatty: chatty.content,
    logs: seen.logs,
    touch: touched?.content ?? null,
    touches,
    update: seen.updates[0] ?? null,
    tools_list_changed: seen.listChanged,
    errors: Object.keys(results).filter((name) => results[name].isError),
    session_id: sessionId,
  }),
);
process.exit(0);
