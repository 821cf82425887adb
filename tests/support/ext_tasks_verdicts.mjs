// Verdicts of the Tasks extension's official zod validators (@modelcontextprotocol/ext-tasks,
// core/v2) on a corpus: reads [[schemaName, message], ...] as JSON on stdin, writes one
// verdict per case ([true, []] or [false, [issue messages]]) as a JSON array on stdout.
// Usage: node ext_tasks_verdicts.mjs <folder of the installed package>
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const folder = process.argv[2];
const v2 = await import(pathToFileURL(join(folder, "dist", "core", "v2", "index.js")).href);
const corpus = JSON.parse(readFileSync(0, "utf8"));
const verdicts = corpus.map(([name, message]) => {
  const schema = v2[name];
  if (schema === undefined) throw new Error(`no export ${name} in core/v2`);
  const parsed = schema.safeParse(message);
  return parsed.success ? [true, []] : [false, parsed.error.issues.map((i) => i.message)];
});
process.stdout.write(JSON.stringify(verdicts));
