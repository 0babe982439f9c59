// A client on the official TypeScript MCP SDK (tests/servers/node_modules),
// for tests that start a server the way a client configuration says.
//
//     node ts-sdk-client.mjs COMMAND [ARG...]
//
// It connects over stdio, lists the tools and prints {"tools": [names]}.
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const sdk = join(
  dirname(fileURLToPath(import.meta.url)),
  "../servers/node_modules/@modelcontextprotocol/sdk/dist/esm/client",
);
const { Client } = await import(pathToFileURL(join(sdk, "index.js")).href);
const { StdioClientTransport } = await import(pathToFileURL(join(sdk, "stdio.js")).href);

const [command, ...args] = process.argv.slice(2);
const client = new Client({ name: "plumbline-test", version: "0" });
await client.connect(new StdioClientTransport({ command, args, stderr: "inherit" }));
const { tools } = await client.listTools();
console.log(JSON.stringify({ tools: tools.map((t) => t.name) }));
await client.close();
