// Records which UI sources the shipped build was made from (build-info.json beside it), so a test
// can tell when the committed assets are stale. The same digest is computed in Python
// (neuron_explorer/server/build_info.py): sha256 over "path\0content\0" of every source file, sorted.
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const skip = new Set(["node_modules"]);
function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (skip.has(name)) return [];
    return statSync(path).isDirectory() ? files(path) : [relative(root, path)];
  });
}
const hash = createHash("sha256");
for (const path of files(root).sort()) {
  hash.update(path + "\0");
  hash.update(readFileSync(join(root, path)));
  hash.update("\0");
}
const info = { sources_sha256: hash.digest("hex"), node: process.version };
writeFileSync(join(root, "../src/neuron_explorer/server/static/build-info.json"), JSON.stringify(info, null, 1) + "\n");
console.log("build-info.json", info.sources_sha256);
