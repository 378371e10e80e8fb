// One agent's session through the official TypeScript SDK's client
// (tests/mcpclients_test.go): open, a server in the background, a run
// that reaches it, files, a checkpoint and a rollback, close.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [kbox, image] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: kbox, args: ["mcp", "--image", image], stderr: "inherit" });
const client = new Client({ name: "kbox-ts-test", version: "1.0.0" });
await client.connect(transport);

async function call(name, args) {
  const r = await client.callTool({ name, arguments: args });
  if (r.isError) {
    throw new Error(`${name}: ${JSON.stringify(r.content)}`);
  }
  return r.structuredContent;
}

// read_file's text is the result's content (its structured result says
// encoding "text").
async function readText(session, path) {
  const r = await client.callTool({ name: "read_file", arguments: { session, path } });
  if (r.isError || r.structuredContent.encoding !== "text") {
    throw new Error(`read_file ${path}: ${JSON.stringify(r)}`);
  }
  return r.content[0].text;
}

function expect(what, got, want) {
  if (got !== want) {
    throw new Error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}

const { session } = await call("session_open", {});
await call("run", { session, command: "mkdir -p /tmp/www && echo ts-ok > /tmp/www/i.html && busybox httpd -p 127.0.0.1:8090 -h /tmp/www" });
expect("wget of the last run's server", (await call("run", { session, command: "wget -qO- http://127.0.0.1:8090/i.html" })).stdout, "ts-ok\n");
const bg = await call("run", { session, command: "echo from-bg; sleep 1000", background: true });
const out = await call("process_output", { session, handle: bg.handle, wait_ms: 5000 });
expect("background output", out.stdout, "from-bg\n");
await call("write_file", { session, path: "/root/x", content: "v1" });
await call("session_checkpoint", { session, name: "a" });
await call("write_file", { session, path: "/root/x", content: "v2" });
expect("read_file before the rollback", await readText(session, "/root/x"), "v2");
await call("session_rollback", { session, name: "a" });
expect("read_file after the rollback", await readText(session, "/root/x"), "v1");
expect("the background run after the rollback", (await call("run", { session, command: "pidof sleep || echo none" })).stdout, "none\n");
await call("session_close", { session });
await client.close();
console.log("ok");
